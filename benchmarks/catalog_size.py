"""What the catalog file holds, table by table, with its FTS5 table as korpus makes it (no copy of the terms) and as
it was made before (its own copy), and as KORPUS_BACKEND=opensearch writes it (no search terms at all, and since
session 45 no vector of a chunk the cluster holds), side by side on the same chunks, with the time each takes to
publish them.

    .venv/bin/python benchmarks/catalog_size.py [--chunks 20000]

Generated chunks (benchmarks/index_scale.py `generate`, labelled as generated: Zipf words, random unit vectors) are
published into a fresh catalog, and into two files that keep no search terms (`SqliteIndex.keep_search_terms`),
one written before and one after it, timed. A copy of the first file then gets the FTS5 table of the schema before
(`content` kept by FTS5 itself), filled with the same current chunks' terms. The OpenSearch file is measured as
published, then as a mirror's sync that indexed every chunk leaves it (`hand_off_vectors`; no node is started:
what the sync sends is benchmarks/mirror_sync.py's). The files are vacuumed and measured with SQLite's `dbstat`
(bytes per table and index).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.index_scale import DIMS, generate
from tasks.index.sqlite import SqliteIndex

OLD_FTS = """
DROP TABLE chunk_terms_vocab; DROP TABLE chunk_terms_instance; DROP TABLE chunk_terms;
CREATE VIRTUAL TABLE chunk_terms USING fts5(terms, exact,
    tokenize = "unicode61 remove_diacritics 0 tokenchars '.,''’:_'");
CREATE VIRTUAL TABLE chunk_terms_vocab USING fts5vocab(chunk_terms, 'col');
CREATE VIRTUAL TABLE chunk_terms_instance USING fts5vocab(chunk_terms, 'instance');
INSERT INTO chunk_terms (rowid, terms, exact) SELECT t.rowid, t.terms, t.exact FROM chunk_tokens t
    JOIN chunks c ON c.rowid = t.rowid WHERE c.lifecycle = 'current';
"""


def tables(path: Path) -> dict[str, int]:
    conn = apsw.Connection(str(path))
    conn.execute("VACUUM")
    sizes = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"))
    conn.close()
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    args = parser.parse_args()
    generated = generate(args.chunks)
    with tempfile.TemporaryDirectory() as tmp:
        now, before, cluster = Path(tmp) / "now.db", Path(tmp) / "before.db", Path(tmp) / "cluster.db"
        seconds = {}
        for path, keep in ((cluster, False), (now, True), (cluster.with_name("cluster-2.db"), False)):
            with SqliteIndex(path) as index:
                index.bind_embedding("e5-small", DIMS)
                index.keep_search_terms(keep)
                started = time.perf_counter()
                for source, chunks, vectors in generated:
                    index.publish_version(source, chunks, vectors, 1)
                seconds.setdefault(keep, []).append(time.perf_counter() - started)
        shutil.copy(now, before)
        conn = apsw.Connection(str(before))
        with conn:
            conn.execute(OLD_FTS)
        conn.close()
        terms_only = tables(cluster)
        with SqliteIndex(cluster) as index:  # as a sync that indexed every chunk leaves it (the mirror's hand-off)
            index.keep_vectors(False)
            ids = [c for (c,) in index.conn.execute("SELECT chunk_id FROM chunks")]
            handed = sum(index.hand_off_vectors(ids[at : at + 500]) for at in range(0, len(ids), 500))
            assert handed == len(ids)
        rows = {
            "korpus, KORPUS_BACKEND=sqlite (no copy of the terms)": tables(now),
            "korpus, KORPUS_BACKEND=opensearch, once mirrored (no terms, no vectors: the cluster's)": tables(cluster),
            "KORPUS_BACKEND=opensearch, vectors kept (before session 45)": terms_only,
            "the schema before (FTS5 keeps a copy)": tables(before),
        }
    names = sorted(set().union(*rows.values()), key=lambda n: -max(r.get(n, 0) for r in rows.values()))
    print(f"{args.chunks:,} generated chunks, {DIMS}-dim vectors\n")
    print("| table | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for name in names[:8]:
        print(f"| {name} | " + " | ".join(f"{r.get(name, 0) / 1e6:.1f} MB" for r in rows.values()) + " |")
    totals = [sum(r.values()) for r in rows.values()]
    print("| **file** | " + " | ".join(f"**{t / 1e6:.1f} MB**" for t in totals) + " |")
    print(
        f"\nkorpus ÷ before: {totals[0] / totals[3]:.3f}; with the cluster ÷ sqlite: {totals[1] / totals[0]:.3f} "
        f"(vectors kept: {totals[2] / totals[0]:.3f})"
    )
    print(
        f"publish, {len(generated)} versions: sqlite {seconds[True][0]:.1f} s; opensearch "
        + " and ".join(f"{t:.1f} s" for t in seconds[False])
        + f" (÷ sqlite {min(seconds[False]) / seconds[True][0]:.2f}, the better of the two runs around it)"
    )


if __name__ == "__main__":
    main()

"""What the catalog file holds, table by table, with its FTS5 table as korpus makes it (no copy of the terms) and as
it was made before (its own copy), side by side on the same chunks.

    .venv/bin/python benchmarks/catalog_size.py [--chunks 20000]

Generated chunks (benchmarks/index_scale.py `generate`, labelled as generated: Zipf words, random unit vectors) are
published into a fresh catalog. A copy of the file then gets the FTS5 table of the schema before (`content` kept by
FTS5 itself), filled with the same current chunks' terms; both files are vacuumed and measured with SQLite's
`dbstat` (bytes per table and index).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
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
    with tempfile.TemporaryDirectory() as tmp:
        now, before = Path(tmp) / "now.db", Path(tmp) / "before.db"
        with SqliteIndex(now) as index:
            index.bind_embedding("e5-small", DIMS)
            for source, chunks, vectors in generate(args.chunks):
                index.publish_version(source, chunks, vectors, 1)
        shutil.copy(now, before)
        conn = apsw.Connection(str(before))
        with conn:
            conn.execute(OLD_FTS)
        conn.close()
        rows = {"korpus (no copy of the terms)": tables(now), "the schema before (FTS5 keeps a copy)": tables(before)}
    names = sorted(set().union(*rows.values()), key=lambda n: -max(r.get(n, 0) for r in rows.values()))
    print(f"{args.chunks:,} generated chunks, {DIMS}-dim vectors\n")
    print("| table | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for name in names[:8]:
        print(f"| {name} | " + " | ".join(f"{r.get(name, 0) / 1e6:.1f} MB" for r in rows.values()) + " |")
    totals = [sum(r.values()) for r in rows.values()]
    print("| **file** | " + " | ".join(f"**{t / 1e6:.1f} MB**" for t in totals) + " |")
    print(f"\nkorpus ÷ before: {totals[0] / totals[1]:.3f}")


if __name__ == "__main__":
    main()

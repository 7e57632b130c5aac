"""What one change costs to reach the cluster: the outbox sync against the full comparison it replaced (#63 item 3).

    .venv/bin/python benchmarks/mirror_sync.py [--chunks 10000 30000] [--opensearch-url URL] [--json]

For each size: generated chunks (benchmarks/index_scale.py `generate`, labelled as generated: Zipf words, random unit
vectors) in a catalog, mirrored once to a real OpenSearch node; then, timed side by side on the same node and catalog:
- a review decision's sync — one source (50 chunks) relabelled, then synced: from the outbox (the default) and by the
  full comparison (`full=True`: what every sync did before: the whole catalog's states and a scroll of the cluster);
  the outbox sync's time split into its parts (the catalog's outbox, states and new rows, the bulks,
  the index refresh, the marks), each a median over the repeats;
  timed once the node merges nothing (up to 30 minutes' wait after a load of 1,000,000), as a reviewer's decision
  comes hours after a load; three decisions timed first, right after the load while its merges run, are their own
  figure (session 35's 0.51 s at 1,000,000 was timed so);
- a sync with nothing to do, both ways;
- the first sync (every chunk indexed) against what a competent engineer writes without korpus: the same documents
  read from the same catalog, into the same mapping on the same node, by `opensearchpy.helpers.bulk` (2,000 actions
  or 8 MB a request, as korpus's bulks), then a refresh. `--rounds` pairs of loads (default 4), each into a fresh
  index deleted after it and begun once the node merges nothing, which side goes first alternating from pair to pair
  (until session 42 one load of each ran minutes apart, the second beside the first's index and its merges);
  korpus's speed ÷ the plain bulk's from each side's median, and each pair's (#64 item 3's target: ≥ 0.9). korpus
  loads as KORPUS_BACKEND=opensearch keeps its catalog (since session 45): each chunk's vector dropped from the file
  once the cluster holds it, a copy of the catalog made before each such load (not timed); a third side, labelled,
  loads from the catalog itself, which keeps every vector (as before session 45), in the same rounds. With
  `--tried`, as its own row, korpus's first sync with the index's periodic refresh off while it loads (a bulk-time
  setting tried in session 41, not adopted: slower here);
- `korpus serve` on that catalog and cluster: its resident memory after 30 searches (#63: what a serving machine
  holds must not grow with the corpus).
Past `--plain-up-to` (100,000) the plain bulk and the full comparison are not run (each takes minutes a round there):

    .venv/bin/python benchmarks/mirror_sync.py --chunks 10000 1000000 --heap-mb 4096 [--postgres]

With `--postgres` the catalog's serving part is on a PostgreSQL started for the run (KORPUS_CATALOG_URL): every
publish and the relabel write through it, the hits are checked there, and `korpus serve` runs with an empty data
directory of its own — the stateless replica (#63 item 4).
The claim: the outbox sync's cost follows the change, not the corpus (the ratio between sizes near 1), while the full
comparison grows with the corpus.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.index_scale import DIMS, generate
from tasks.index.pg_catalog import PgCatalog
from tasks.index.sqlite import SqliteIndex

REPEATS = 9
SETTLE_WITHIN = 1800.0
"""Seconds the decisions wait at most for the load's merges to end (minutes at 1,000,000 chunks)."""


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(
    n: int,
    url: str,
    folder: Path,
    korpus_first: bool = True,
    plain_up_to: int = 100_000,
    full_up_to: int = 100_000,
    catalog_url: str | None = None,
    rounds: int = 4,
    tried: bool = False,
) -> dict:
    from opensearchpy import OpenSearch

    from tasks.index.opensearch import OpenSearchIndex

    path = folder / str(n) / "korpus.db"
    sources = generate(n)
    from korpus.core.model_store import embed_model_path
    from korpus.core.settings import Settings

    built = time.perf_counter()
    with SqliteIndex(path) as index:  # bound to the default model's name: `korpus serve` embeds the queries with it
        if catalog_url:  # every publish writes through the catalog's serving part, as a refresh's does
            index.bind_serving_catalog(catalog_url)
        index.bind_embedding(embed_model_path(Settings()).name, DIMS)
        for source, chunks, vectors in sources:
            index.publish_version(source, chunks, vectors, 1)
    out: dict = {"chunks": n, "build_s": round(time.perf_counter() - built, 1)}
    backend = OpenSearchIndex(
        OpenSearch(hosts=[url], timeout=600, max_retries=0),
        prefix=f"sync{uuid.uuid4().hex[:8]}",
        catalog=PgCatalog(catalog_url) if catalog_url else path,
    )
    try:
        with SqliteIndex(path) as index:
            out["first_sync_s"] = round(_timed(lambda: backend.sync_from(index)), 1)
            if n <= plain_up_to:  # the baseline's bulk and the tried row: not run past it (as long again)
                out.update(_bulk_rounds(index, backend.client, path, korpus_first, rounds))
                if tried:
                    out["first_sync_refresh_off_s"] = round(_loaded(backend.client, "tried", path, index), 1)
                    out["refresh_off_vs_plain"] = round(out["plain_bulk_s"] / out["first_sync_refresh_off_s"], 2)
            # the decisions on a node that merges nothing, as a reviewer's are hours after a load: one timed while the
            # load's merges still run shares the node with them (0.51 s at 1,000,000 in session 35, timed so)
            merging = []
            for r in range(3):  # as session 35 timed them: right after the load, its merges running
                source = sources[(r * 7 + 3) % len(sources)][0]
                index.relabel_source(source.model_copy(update={"access": _other(source.access)}))
                merging.append(_timed(lambda: backend.sync_from(index)))
            out["decision while merging"] = round(statistics.median(merging), 4)
            settling = time.perf_counter()
            out["settled"] = _settled(backend.client, SETTLE_WITHIN)
            out["settle_s"] = round(time.perf_counter() - settling, 1)
            rows: dict[str, list[float]] = {
                k: [] for k in ("decision", "decision full", "nothing", "nothing full", "relabel")
            }
            compare = (False, True) if n <= full_up_to else (False,)  # the full comparison: minutes a round past it
            parts: dict[str, list[float]] = {}
            for r in range(REPEATS):
                source = sources[r * 7 % len(sources)][0]
                for full in compare:  # a real change each time: to another scope, and (full) back again
                    access = source.access if full else _other(source.access)
                    rows["relabel"].append(  # the catalog's own write (through PostgreSQL when bound)
                        _timed(
                            lambda access=access, source=source: index.relabel_source(
                                source.model_copy(update={"access": access})
                            )
                        )
                    )
                    if full:
                        rows["decision full"].append(_timed(lambda: backend.sync_from(index, full=True)))
                    else:
                        with _parts(backend, index, parts):
                            rows["decision"].append(_timed(lambda: backend.sync_from(index)))
                rows["nothing"].append(_timed(lambda: backend.sync_from(index)))
                if True in compare:
                    rows["nothing full"].append(_timed(lambda: backend.sync_from(index, full=True)))
            out.update({k: round(statistics.median(v), 4) if v else "—" for k, v in rows.items()})
            out["decision parts (median s)"] = {k: round(statistics.median(v), 4) for k, v in sorted(parts.items())}
            out["check_ms"] = _check_ms(backend, index)
        # stateless with the catalog on PostgreSQL: the replica gets an empty data directory of its own
        serving_data = folder / f"replica-{n}" if catalog_url else path.parent
        out["serve_rss_mb"] = _serve_rss(serving_data, url, backend.prefix, catalog_url)
    finally:  # a node still merging may time out here: the figures are kept, the node goes with the run
        _drop(backend)
    print(json.dumps(out), file=sys.stderr, flush=True)  # each size as soon as it is measured
    return out


def _other(access: str) -> str:
    """A scope other than `access`: a relabel to it changes every chunk of the source. (Until session 43 the
    decisions alternated "public" and "hr" whatever the source had, and 80 % of the generated sources are public:
    about half the timed decisions changed nothing, their sync a no-op, and the medians mixed the two.)"""
    return "hr" if access != "hr" else "public"


def _drop(cluster) -> None:
    """A benchmark index and its template gone from the node."""
    with contextlib.suppress(Exception):
        cluster.client.indices.delete(index=f"{cluster.prefix}-chunks-*", ignore=[404])
        cluster.client.indices.delete_index_template(name=f"{cluster.prefix}-chunks", ignore=[404])


def _settled(client, within: float = 300.0) -> bool:
    """Until the node merges nothing (an index loaded a moment ago goes on merging its segments for a while, and a
    load timed then shares the node with it), at most `within` seconds; whether it did."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        stats = client.nodes.stats(metric="indices", index_metric="merge")
        if all(node["indices"]["merges"]["current"] == 0 for node in stats["nodes"].values()):
            return True
        time.sleep(1)
    return False


def _loaded(client, side: str, path: Path, index: SqliteIndex) -> float:
    """Seconds to load every current chunk of the catalog into a fresh index on the node, by korpus's first sync
    (`korpus`), the plain bulk (`plain`) or korpus's first sync with the periodic refresh off (`tried`); the index
    is deleted after, and each starts on a node that merges nothing, so no load shares the node with another's
    merges."""
    from tasks.index.opensearch import OpenSearchIndex

    handing = path.with_name("handing.db")
    if side == "korpus":  # a copy of the catalog as KORPUS_BACKEND=opensearch keeps it: each vector until indexed
        handing.unlink(missing_ok=True)
        index.conn.execute("VACUUM INTO ?", (str(handing),))
        with SqliteIndex(handing) as copy:
            copy.keep_vectors(False)
    own = {"plain": None, "korpus": handing}.get(side, path)
    cluster = OpenSearchIndex(client, prefix=f"{side}{uuid.uuid4().hex[:8]}", catalog=own)
    _settled(client)
    try:
        if side == "plain":
            return _plain_bulk(index, cluster)
        if side == "tried":
            return _refresh_off(index, cluster)
        if side == "kept":  # the catalog keeps every vector (before session 45)
            return _timed(lambda: cluster.sync_from(index))
        with SqliteIndex(handing) as copy:
            seconds = _timed(lambda: cluster.sync_from(copy))
            left = copy.conn.execute(f"SELECT count(*) FROM {copy.vector_table()}").fetchall()[0][0]
            assert left == 0, f"{left} vectors left in the catalog after its first sync"
            return seconds
    finally:
        _drop(cluster)
        handing.unlink(missing_ok=True)


def _bulk_rounds(index: SqliteIndex, client, path: Path, korpus_first: bool, rounds: int) -> dict:
    """korpus's first sync against the plain bulk, `rounds` pairs of loads into fresh indices, which side goes first
    alternating from pair to pair (machines are noisy, and a load just after another pays for its merges): each
    side's median, korpus's speed ÷ the plain bulk's from the medians, and each pair's."""
    times: dict[str, list[float]] = {"korpus": [], "plain": [], "kept": []}
    for r in range(rounds):
        order = ("korpus", "plain", "kept") if (r % 2 == 0) == korpus_first else ("kept", "plain", "korpus")
        for side in order:
            times[side].append(_loaded(client, side, path, index))
    korpus, plain = statistics.median(times["korpus"]), statistics.median(times["plain"])
    kept = statistics.median(times["kept"])
    return {
        "korpus_loads_s": [round(t, 1) for t in times["korpus"]],
        "plain_bulk_s": round(plain, 1),
        "plain_loads_s": [round(t, 1) for t in times["plain"]],
        "first_sync_vs_plain": round(plain / korpus, 2),
        "pairs_vs_plain": [round(p / k, 2) for k, p in zip(times["korpus"], times["plain"], strict=True)],
        "kept_loads_s": [round(t, 1) for t in times["kept"]],
        "handing_vs_kept": round(korpus / kept, 2),
    }


@contextlib.contextmanager
def _parts(backend, index: SqliteIndex, parts: dict[str, list[float]]):
    """Where one outbox sync's time goes, each part summed over the sync and added to `parts`: the catalog's reads
    (outbox, states, and which rows were written since the last sync), the bulks, the index refresh that makes them
    searchable, and the marks (the file's, and PostgreSQL's when bound). (Until session 44 a multi-get of the
    changed chunks' states in the cluster came before the bulks: its own part, 0.027 s at 10,000 chunks and 0.091 s
    at 1,000,000.)"""
    from tasks.index import catalog_check, opensearch_mirror

    spent: dict[str, float] = {}

    def timing(name: str, call):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return timed

    patches = [
        (catalog_check, "changed_since", "catalog: outbox"),
        (index, "chunk_states_of", "catalog: states"),
        (catalog_check, "inserted_after", "catalog: rows written since"),
        (backend, "_bulk", "cluster: bulk"),
        (opensearch_mirror, "_searchable", "cluster: index refresh"),
        (catalog_check, "mark_synced", "catalog: mark"),
    ]
    if index.serving is not None:
        patches.append((index.serving, "mark_synced", "PostgreSQL: mark"))
    kept = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, label in patches:
        setattr(owner, name, timing(label, getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, call in kept:
            setattr(owner, name, call)
        for name, seconds in spent.items():
            parts.setdefault(name, []).append(seconds)


def _check_ms(backend, index: SqliteIndex, rounds: int = 50) -> float:
    """The per-hit check of one search's 50 hits (the catalog file, or PostgreSQL): median ms."""
    ids = [c for (c,) in index.conn.execute("SELECT chunk_id FROM chunks ORDER BY random() LIMIT ?", (50 * rounds,))]
    times = [_timed(lambda r=r: backend._allowed(ids[r * 50 : (r + 1) * 50], ["public"])) for r in range(rounds)]
    return round(statistics.median(times) * 1000, 2)


def _serve_rss(data: Path, url: str, prefix: str, catalog_url: str | None = None, searches: int = 30) -> float:
    """`korpus serve` on this catalog and cluster: its resident memory (MB, with its children) after `searches`
    searches — what a serving machine holds as the corpus grows."""
    import os
    import socket
    import subprocess

    import httpx
    import psutil

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, KORPUS_BACKEND="opensearch", KORPUS_OPENSEARCH_URL=url, KORPUS_OPENSEARCH_PREFIX=prefix)
    if catalog_url:
        env["KORPUS_CATALOG_URL"] = catalog_url
    korpus = Path(sys.executable).parent / "korpus"
    server = subprocess.Popen(
        [str(korpus), "serve", "--port", str(port), "--data", str(data)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        for n in range(searches):
            answer = httpx.get(f"http://127.0.0.1:{port}/search", params={"q": f"договор поставки {n}"}, timeout=120)
            answer.raise_for_status()
        process = psutil.Process(server.pid)
        rss = process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))
        return round(rss / 2**20, 1)
    finally:
        server.terminate()
        server.wait(30)


def _refresh_off(index: SqliteIndex, cluster) -> float:
    """korpus's first sync with the index's periodic refresh off while it loads (`refresh_interval: -1`, put back to
    the template's after; the sync's own refresh at its end makes the load searchable), as OpenSearch's k-NN tuning
    guide suggests for a bulk load: tried in session 41, slower here, not adopted."""
    from tasks.index.opensearch_requests import index_template

    model, dims = index.embedding_model()
    kept = index_template(cluster.prefix, dims)["template"]["settings"]["index"]["refresh_interval"]
    start = time.perf_counter()
    cluster.ensure(model, dims)
    cluster.client.indices.put_settings(index=cluster.alias, body={"index": {"refresh_interval": "-1"}})
    try:
        cluster.sync_from(index)
    finally:
        cluster.client.indices.put_settings(index=cluster.alias, body={"index": {"refresh_interval": kept}})
    return time.perf_counter() - start


def _plain_bulk(index: SqliteIndex, plain) -> float:
    """The baseline: every current chunk read from the catalog, its document built and sent by `helpers.bulk`."""
    from opensearchpy import helpers

    from tasks.index.opensearch_requests import chunk_document

    start = time.perf_counter()
    plain.ensure(*index.embedding_model())
    ids = [c for (c,) in index.conn.execute("SELECT chunk_id FROM chunks WHERE lifecycle = 'current'")]

    def actions():
        for at in range(0, len(ids), 500):
            for stored in index.stored_chunks(ids[at : at + 500]):
                doc = chunk_document(stored.chunk, stored.ordinal, stored.vector, stored.kind, stored.exception)
                yield {"_index": plain.alias, "_id": stored.chunk.chunk_id, "_source": doc | {"lifecycle": "current"}}

    helpers.bulk(plain.client, actions(), chunk_size=2000, max_chunk_bytes=8 * 2**20)
    plain.client.indices.refresh(index=plain.alias)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 30_000])
    parser.add_argument("--opensearch-url", help="a running node (else one is started for the run)")
    parser.add_argument(
        "--plain-up-to", type=int, default=100_000, help="run helpers.bulk and the full comparison up to this size"
    )
    parser.add_argument("--heap-mb", type=int, default=2048, help="the node's heap (4096 for 1,000,000 chunks)")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the catalog's serving part on a PostgreSQL started for the run (KORPUS_CATALOG_URL): writes go through "
        "it, hits are checked there, and serve runs with no file",
    )
    parser.add_argument("--rounds", type=int, default=4, help="pairs of loads, korpus against the plain bulk")
    parser.add_argument(
        "--tried", action="store_true", help="also load with the periodic refresh off (tried in session 41, slower)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        catalogs: list[str | None] = [None] * len(args.chunks)
        if args.postgres:
            from tasks.runtime.postgres import LocalPostgres, create_database

            server = LocalPostgres(Path(os.environ.get("TMPDIR", "/tmp")) / f"korpus-bench-pg-{uuid.uuid4().hex[:8]}")
            server.start()
            stack.callback(server.stop)
            for n in args.chunks:
                create_database(server.port, f"bench{n}")
            catalogs = [server.url.rsplit("/", 1)[0] + f"/bench{n}" for n in args.chunks]

        def measured(url: str) -> list[dict]:
            return [
                measure(
                    n, url, folder, i % 2 == 0, args.plain_up_to, args.plain_up_to, catalogs[i], args.rounds, args.tried
                )
                for i, n in enumerate(args.chunks)
            ]

        if args.opensearch_url:
            results = measured(args.opensearch_url)
        else:
            from tasks.runtime.opensearch_node import start, stop_leashed

            try:
                (node,) = start(folder / "opensearch", port=None, heap_mb=args.heap_mb, detach=False, log=sys.stderr)
                results = measured(node.url)
            finally:
                stop_leashed()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    where = "PostgreSQL" if args.postgres else "the file"
    print(
        "| chunks (generated) | catalog on | relabel s | decision: outbox s | decision: full s | nothing: outbox s "
        "| nothing: full s | first sync s | korpus loads s | helpers.bulk loads s | korpus speed ÷ plain (medians; "
        "each pair) | periodic refresh off (tried) s | tried ÷ plain | check ms | serve RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        pairs = " / ".join(str(p) for p in r.get("pairs_vs_plain", []))
        print(
            f"| {r['chunks']:,} | {where} | {r['relabel']} | {r['decision']} | {r['decision full']} | {r['nothing']} "
            f"| {r['nothing full']} | {r['first_sync_s']} | {r.get('korpus_loads_s', '—')} "
            f"| {r.get('plain_loads_s', '—')} | {r.get('first_sync_vs_plain', '—')} ({pairs}) "
            f"| {r.get('first_sync_refresh_off_s', '—')} | {r.get('refresh_off_vs_plain', '—')} | {r['check_ms']} "
            f"| {r['serve_rss_mb']} |"
        )
    for r in results:
        print(
            f"decision at {r['chunks']:,}: {r['decision']} s on a node that merges nothing (waited {r['settle_s']} s, "
            f"settled: {r['settled']}), {r['decision while merging']} s while the load's merges ran"
        )
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(
            f"outbox decision {b['chunks']:,} ÷ {a['chunks']:,}: {b['decision'] / a['decision']:.2f} "
            f"(while merging: {b['decision while merging'] / a['decision while merging']:.2f}); "
            f"nothing: {b['nothing'] / a['nothing']:.2f}; serve RSS: {b['serve_rss_mb'] / a['serve_rss_mb']:.2f}"
        )
    for r in results:
        print(f"decision parts at {r['chunks']:,} (median s): {r['decision parts (median s)']}")
    for r in results:
        if "kept_loads_s" in r:
            print(
                f"first sync at {r['chunks']:,}, vectors handed to the cluster (korpus's default) "
                f"{r['korpus_loads_s']} s against every vector kept {r['kept_loads_s']} s: "
                f"{r['handing_vs_kept']}× the time (medians)"
            )


if __name__ == "__main__":
    main()

"""What one change costs to reach the cluster: the outbox sync against the full comparison it replaced (#63 item 3).

    .venv/bin/python benchmarks/mirror_sync.py [--chunks 10000 30000] [--opensearch-url URL] [--json]

For each size: generated chunks (benchmarks/index_scale.py `generate`, labelled as generated: Zipf words, random unit
vectors) in a catalog, mirrored once to a real OpenSearch node; then, timed side by side on the same node and catalog:
- a review decision's sync — one source (50 chunks) relabelled, then synced: from the outbox (the default) and by the
  full comparison (`full=True`: what every sync did before: the whole catalog's states and a scroll of the cluster);
- a sync with nothing to do, both ways.
The claim: the outbox sync's cost follows the change, not the corpus (the ratio between sizes near 1), while the full
comparison grows with the corpus.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.index_scale import DIMS, generate
from tasks.index.sqlite import SqliteIndex

REPEATS = 5


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(n: int, url: str, folder: Path) -> dict:
    from opensearchpy import OpenSearch

    from tasks.index.opensearch import OpenSearchIndex

    path = folder / f"catalog-{n}.db"
    sources = generate(n)
    with SqliteIndex(path) as index:
        index.bind_embedding("e5-small", DIMS)
        for source, chunks, vectors in sources:
            index.publish_version(source, chunks, vectors, 1)
    backend = OpenSearchIndex(
        OpenSearch(hosts=[url], timeout=600, max_retries=0), prefix=f"sync{uuid.uuid4().hex[:8]}", catalog=path
    )
    out: dict = {"chunks": n}
    try:
        with SqliteIndex(path) as index:
            out["first_sync_s"] = round(_timed(lambda: backend.sync_from(index)), 1)
            rows: dict[str, list[float]] = {k: [] for k in ("decision", "decision full", "nothing", "nothing full")}
            for r in range(REPEATS):
                source = sources[r * 7 % len(sources)][0]
                for full in (False, True):
                    access = "hr" if (r + full) % 2 else "public"
                    index.relabel_source(source.model_copy(update={"access": access}))
                    rows["decision full" if full else "decision"].append(
                        _timed(lambda full=full: backend.sync_from(index, full=full))
                    )
                rows["nothing"].append(_timed(lambda: backend.sync_from(index)))
                rows["nothing full"].append(_timed(lambda: backend.sync_from(index, full=True)))
            out.update({k: round(statistics.median(v), 4) for k, v in rows.items()})
    finally:
        backend.client.indices.delete(index=f"{backend.prefix}-chunks-*", ignore=[404])
        backend.client.indices.delete_index_template(name=f"{backend.prefix}-chunks", ignore=[404])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 30_000])
    parser.add_argument("--opensearch-url", help="a running node (else one is started for the run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.opensearch_url:
            results = [measure(n, args.opensearch_url, folder) for n in args.chunks]
        else:
            from tasks.runtime.opensearch_node import start, stop_leashed

            try:
                (node,) = start(folder / "opensearch", port=None, heap_mb=2048, detach=False, log=sys.stderr)
                results = [measure(n, node.url, folder) for n in args.chunks]
            finally:
                stop_leashed()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("| chunks (generated) | decision: outbox s | decision: full s | nothing: outbox s | nothing: full s |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['chunks']:,} | {r['decision']} | {r['decision full']} | {r['nothing']} | {r['nothing full']} |")
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(
            f"outbox decision {b['chunks']:,} ÷ {a['chunks']:,}: {b['decision'] / a['decision']:.2f}; "
            f"full: {b['decision full'] / a['decision full']:.2f}"
        )


if __name__ == "__main__":
    main()

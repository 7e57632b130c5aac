"""What regions cost (tasks/text/regions.py): storage per page and per chunk on real files, and search latency with
regions against the same index without them, side by side.

    .venv/bin/python benchmarks/regions.py [--chunks 100000] [--queries 300] [--json]

1. Storage: a default refresh (`korpus refresh` settings) of real files — `../shared/data/real-archive` when it is
   beside the repository, else `tests/fixtures/real-archive` — then the bytes of each page's `boxes` and of each
   chunk's stored `regions`, and what they come to per 100k chunks.
2. Latency: the generated 100k-chunk index of benchmarks/index_scale.py built twice from the same chunks, once with
   regions (each chunk given the stored regions of a real chunk, drawn at random) and once without; the same hybrid
   queries (filters on, k=10) run alternately on both, each going first on every other query. Reported: p50/p95 of
   each and the p95 ratio (goal ≤ 1.1).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.index_scale import DIMS, generate, pct, queries
from flows.corpus_refresh import run_refresh
from korpus.core.datamodel import Region
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve
from tasks.runtime.prefect_server import stop_server
from tasks.text.regions import unpack

ROOT = Path(__file__).resolve().parents[1]
REAL = [ROOT.parent / "shared" / "data" / "real-archive", ROOT / "tests" / "fixtures" / "real-archive"]


def storage(work: Path) -> tuple[dict, list[str]]:
    """Refresh real files with the default settings; bytes of boxes per page and regions per chunk."""
    real = next(p for p in REAL if p.is_dir())
    root = work / "archive"
    shutil.copytree(real, root, ignore=shutil.ignore_patterns("LICENSE", "README.md", "*.json"))
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    settings = Settings(data=work / "data")
    home = work / "prefect"
    home.mkdir()
    os.environ["PREFECT_HOME"] = str(home)  # a Prefect server of its own, stopped below
    try:
        run_refresh(root, settings)
    finally:
        stop_server(home)
    with SqliteIndex(settings.index_path) as index:
        pages = [json.loads(row[0]) for row in index.conn.execute("SELECT page FROM pages")]
        stored = [
            row[0]
            for row in index.conn.execute(
                "SELECT regions FROM chunks WHERE lifecycle = 'current' AND source_id NOT LIKE 'korpus://%'"
            )
        ]
        page_bytes = sum(len(row[0]) for row in index.conn.execute("SELECT page FROM pages"))
    with_boxes = [p for p in pages if p.get("boxes")]
    boxes = [len(p["boxes"]) for p in with_boxes]
    kept = [s for s in stored if s]
    per_chunk = sum(len(s) for s in kept) / max(1, len(stored))
    return {
        "files": str(real.relative_to(ROOT.parent) if real.is_relative_to(ROOT.parent) else real),
        "pages": len(pages),
        "pages_with_boxes": len(with_boxes),
        "boxes_bytes_per_page_mean": round(sum(boxes) / max(1, len(boxes))),
        "boxes_bytes_per_page_max": max(boxes),
        "boxes_share_of_page_rows": round(sum(boxes) / max(1, page_bytes), 3),
        "chunks": len(stored),
        "chunks_with_regions": len(kept),
        "regions_bytes_per_chunk_mean": round(per_chunk, 1),
        "regions_mb_per_100k_chunks": round(per_chunk * 100_000 / 2**20, 1),
    }, kept


def latency(work: Path, kept: list[str], n: int, n_queries: int) -> dict:
    """The same chunks indexed with and without regions; the same queries alternately on both."""
    rng = random.Random(7)
    paths = {"with_regions": work / "with.db", "without": work / "without.db"}
    sources = generate(n)
    for name, path in paths.items():
        with SqliteIndex(path) as index:
            index.bind_embedding("e5-small", DIMS)
            for source, chunks, vectors in sources:
                if name == "with_regions":
                    chunks = [
                        c.model_copy(update={"regions": [Region(**r) for r in unpack(rng.choice(kept))]})
                        for c in chunks
                    ]
                index.publish_version(source, chunks, vectors, 1)
    qs = queries(n_queries)
    times: dict[str, list[float]] = {name: [] for name in paths}
    indexes = {name: SqliteIndex(path) for name, path in paths.items()}
    try:
        for index in indexes.values():
            retrieve(index.searcher, qs[0][0], qs[0][1], ["public"])  # load the vector copy and the page cache
        for i, (q, v) in enumerate(qs):
            order = list(indexes.items())
            for name, index in order if i % 2 else order[::-1]:  # neither goes first every time
                start = time.perf_counter()
                hits = retrieve(index.searcher, q, v, ["public"], k=10, mode="hybrid")
                times[name].append(time.perf_counter() - start)
                assert name == "without" or all(h["regions"] for h in hits)
    finally:
        for index in indexes.values():
            index.close()
    out = {name: {"p50_ms": pct(t, 50), "p95_ms": pct(t, 95)} for name, t in times.items()}
    out["p95_ratio"] = round(out["with_regions"]["p95_ms"] / out["without"]["p95_ms"], 3)
    out["db_mb"] = {name: round(path.stat().st_size / 2**20, 1) for name, path in paths.items()}
    out["chunks"] = n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cost, kept = storage(Path(tmp))
        result = {"storage": cost, "search": latency(Path(tmp), kept, args.chunks, args.queries)}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return
    s, q = result["storage"], result["search"]
    print(
        f"{s['files']}: {s['pages_with_boxes']}/{s['pages']} pages with boxes, {s['boxes_bytes_per_page_mean']} "
        f"bytes a page (max {s['boxes_bytes_per_page_max']}); {s['chunks_with_regions']}/{s['chunks']} chunks "
        f"with regions, {s['regions_bytes_per_chunk_mean']} bytes a chunk = {s['regions_mb_per_100k_chunks']} MB "
        "per 100k chunks"
    )
    print(
        f"hybrid at {q['chunks']} chunks: with regions p50 {q['with_regions']['p50_ms']} / p95 "
        f"{q['with_regions']['p95_ms']} ms, without p50 {q['without']['p50_ms']} / p95 {q['without']['p95_ms']} ms "
        f"→ p95 ratio {q['p95_ratio']}; index {q['db_mb']}"
    )


if __name__ == "__main__":
    main()

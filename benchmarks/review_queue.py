"""Page load of the /review queue with 10,000 quarantine items (issue #17: p95 ≤ 300 ms on this machine, paged).

An index holding N generated quarantine items (six reason codes, three folders, public and hr, a few decided) is
served by `korpus serve`'s app under uvicorn on loopback; one client loads queue pages over HTTP as a reviewer —
the first page, a deep page, a reason filter, a folder + kind filter, the JSON API and an item page — and the
latency of each is measured. Side by side in the same run: the same requests against a queue of 50 items
(the baseline: the ratio says how much the queue's size costs a reviewer).

    .venv/bin/python benchmarks/review_queue.py                 # 10,000 vs 50 items, 200 requests per page kind
    .venv/bin/python benchmarks/review_queue.py --items 50000
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REASONS = ("text-quality", "empty-text", "page-quality", "oversized", "missing-metadata", "ocr-failed")
FOLDERS = ("переписка", "приказы", "сканы")
KEY = "bench-reviewer"


def fill(data: Path, n: int) -> list[str]:
    """An index with `n` quarantine items; returns their ids."""
    from korpus.core.datamodel import QuarantineItem, ReasonCode
    from tasks.index.sqlite import SqliteIndex

    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    items = []
    for i in range(n):
        folder = FOLDERS[i % len(FOLDERS)]
        kind = "pdf" if i % 4 else "text"
        items.append(
            QuarantineItem(
                source_id=f"{folder}/дело_{i // 20:05d}.{kind if kind == 'pdf' else 'txt'}",
                source_version=f"{i // 20:064x}",
                page=i % 20 + 1,
                reasons=[ReasonCode(REASONS[rng.randrange(len(REASONS))])],
                detail="tier 1 (tesseract 5.3.0): too-little-text; tier 2: no VLM configured (KORPUS_VLM_URL)",
                evidence="npoTOKon Necepa MocKBa " * 20,
                access="hr" if i % 10 == 0 else "public",
                kind=kind,
                readings=[
                    {
                        "tier": 1,
                        "engine": "tesseract 5.3.0",
                        "text": "npoTOKon " * 30,
                        "score": 0.1,
                        "reasons": ["too-little-text"],
                    }
                ],
                first_seen=start + timedelta(seconds=i),
            )
        )
    with SqliteIndex(data / "korpus.db") as index:
        index.record_quarantine(items)
        ids = [item.item_id for item in items]
        for item_id in ids[: n // 20]:
            index.record_decision(item_id, "Петрова", "reject", "", "kept out of the index", "rejected")
    return ids


def serve(data: Path) -> tuple[str, object, threading.Thread]:
    import uvicorn

    from korpus.apps.api import create_app
    from korpus.core.settings import Settings

    settings = Settings(data=data, review_keys={KEY: {"name": "Петрова", "scopes": ["public", "hr"]}})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def requests_for(ids: list[str], n: int) -> dict[str, str]:
    deep = max(1, n // 50 // 2)
    return {
        "queue, first page": "/review",
        "queue, middle page": f"/review?page={deep}",
        "reason filter": "/review?reason=empty-text",
        "folder + kind filter": "/review?folder=сканы&kind=pdf&status=all",
        "JSON API page": "/review/api/items?reason=page-quality&per_page=100",
        "item page": f"/review/items/{ids[len(ids) // 2]}",
    }


def measure(base: str, paths: dict[str, str], repeats: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in paths}
    with httpx.Client(headers={"X-API-Key": KEY}, timeout=30) as client:
        for name, path in paths.items():  # warm-up
            assert client.get(base + path).status_code == 200, (name, path)
        for _ in range(repeats):
            for name, path in paths.items():
                t0 = time.perf_counter()
                response = client.get(base + path)
                times[name].append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200
    return times


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (args.baseline, args.items):
            data = Path(tmp) / f"q{n}"
            ids = fill(data, n)
            base, server, thread = serve(data)
            results[n] = measure(base, requests_for(ids, n), args.repeats)
            server.should_exit = True  # type: ignore[attr-defined]
            thread.join(10)
    big, small = results[args.items], results[args.baseline]
    print(f"{'request':<24} {f'p50 {args.items}':>11} {f'p95 {args.items}':>11} {f'p95 {args.baseline}':>9} ratio")
    for name in big:
        print(
            f"{name:<24} {statistics.median(big[name]):>9.1f}ms {p95(big[name]):>9.1f}ms "
            f"{p95(small[name]):>7.1f}ms {p95(big[name]) / p95(small[name]):>5.2f}"
        )
    worst = max(p95(v) for v in big.values())
    print(f"worst p95 at {args.items} items: {worst:.1f} ms (target ≤ 300 ms)")


if __name__ == "__main__":
    main()

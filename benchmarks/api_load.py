"""API under concurrent clients: `korpus serve` (uvicorn, one process) on loopback, N client threads each looping
requests for a fixed time; p50/p95 latency and errors for bm25 and hybrid queries.

The server as a user runs it (the default ONNX embedder, which embeds each query alone: the query-batching setting
of the torch days is gone, it changed nothing there). Target (issue #13): hybrid p95 at 20 clients ÷ p95 of one
client ≤ 4, both measured in the same run.

    .venv/bin/python benchmarks/api_load.py                    # 1, 20 and 50 clients, 20 s each
    .venv/bin/python benchmarks/api_load.py --seconds 60 --clients 50
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "приказ премировании сотрудников договор поставки насосов протокол заседания комиссии записка отпусках "
    "ремонт кровли склада акт сверки расчётов квартал поставщик оборудование смета"
).split()


def page_chunks(source, bodies: list[str]) -> list:
    """One chunk per page of `source`, each body under its address line, owner and access from the source."""
    from korpus.core.datamodel import Chunk, Locator, chunk_id_for

    return [
        Chunk(
            chunk_id=chunk_id_for(source.version, source.source_id, i),
            source_id=source.source_id,
            source_version=source.version,
            locator=Locator(page=i + 1, start=0, end=len(body)),
            text=f"[{source.file_name} · лист {i + 1}]\n{body}",
            body=body,
            owner=source.owner,
            access_rule=source.access,
            policy_version="structure-v2",
        )
        for i, body in enumerate(bodies)
    ]


def build_index(data: Path, documents: int = 200, seed: int = 1) -> list[str]:
    """A synthetic index of `documents` × 3 chunks (real embeddings); returns queries that find them."""
    sys.path.insert(0, str(ROOT))
    from korpus.core.datamodel import Source, SourceKind
    from korpus.core.model_store import embed_model_path
    from korpus.core.settings import Settings
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import shared_embedder

    rnd = random.Random(seed)
    settings = Settings(data=data)
    embedder = shared_embedder(str(embed_model_path(settings)))
    with SqliteIndex(settings.index_path) as index:
        for n in range(documents):
            source = Source(
                source_id=f"doc_{n:04d}.txt",
                version=f"{n:064x}",
                path="/x",
                kind=SourceKind.text,
                owner="Архив",
                access="public" if n % 4 else "hr",
            )
            chunks = page_chunks(source, [" ".join(rnd.choices(WORDS, k=40)) + f". Номер {n}-{i}." for i in range(3)])
            vectors = embedder.embed_passages([c.text for c in chunks])
            index.publish_version(source, chunks, vectors, 3, embed_model=embedder.name)
    # distinct questions (a repeated one would only measure a cache): 3 words of 29 and a number
    return [f"{' '.join(rnd.sample(WORDS, 3))} {n}" for n in range(5000)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(health: str, proc: subprocess.Popen, why: Callable[[], str], seconds: float = 120) -> None:
    """Until `health` answers 200; raises with `why()` when the process exits first or the time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(health, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(why())
        time.sleep(0.2)


@contextmanager
def serving(data: Path, **env: str) -> Iterator[str]:
    """`korpus serve` in a subprocess on a free loopback port until the block ends; yields the base URL."""
    port = free_port()
    command = [
        sys.executable,
        "-c",
        "from korpus.apps.cli import app; app()",
        "serve",
        "--port",
        str(port),
        "--data",
        str(data),
    ]
    proc = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(
            f"{url}/health", proc, lambda: f"korpus serve did not start: {proc.stderr.read().decode()[-2000:]}"
        )
        httpx.get(f"{url}/search", params={"q": "прогрев", "mode": "hybrid"}, timeout=120)  # load the model
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def load(url: str, queries: list[str], clients: int, mode: str, seconds: float = 0, per_client: int = 0) -> dict:
    """`clients` threads, each sending requests until `seconds` pass (or `per_client` requests are made)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds if seconds else None
    start = threading.Barrier(clients)

    def client(n: int) -> None:
        rnd = random.Random(n)
        with httpx.Client(base_url=url, timeout=60) as http:
            start.wait()
            made = 0
            while (stop is None and made < per_client) or (stop is not None and time.monotonic() < stop):
                began = time.perf_counter()
                try:
                    response = http.get("/search", params={"q": rnd.choice(queries), "mode": mode, "k": 10})
                    ok = response.status_code == 200
                    problem = None if ok else f"HTTP {response.status_code}"
                except httpx.HTTPError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                took = time.perf_counter() - began
                with lock:
                    (errors.append(problem) if problem else latencies.append(took))
                made += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ordered = sorted(latencies)
    p95 = ordered[int(0.95 * (len(ordered) - 1))] if ordered else float("nan")
    return {
        "clients": clients,
        "mode": mode,
        "requests": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors))[:3],
        "p50_ms": round(1000 * statistics.median(ordered), 1) if ordered else None,
        "p95_ms": round(1000 * p95, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 50])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        queries = build_index(data)
        report: dict[str, list[dict]] = {}
        with serving(data) as url:
            report["default"] = [
                load(url, queries, n, mode, seconds=args.seconds) for mode in ("bm25", "hybrid") for n in args.clients
            ]
        for label, rows in report.items():
            print(f"== {label}")
            for row in rows:
                print(
                    f"  {row['mode']:>6} × {row['clients']:>2} clients: {row['requests']:>5} requests, "
                    f"{row['errors']} errors, p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms"
                )
            hybrid = {r["clients"]: r["p95_ms"] for r in rows if r["mode"] == "hybrid"}
            if 1 in hybrid and 20 in hybrid:
                print(f"  hybrid p95 at 20 clients ÷ 1 client: {hybrid[20] / hybrid[1]:.2f}")


if __name__ == "__main__":
    main()

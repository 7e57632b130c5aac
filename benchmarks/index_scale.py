"""The embedded index at 100k chunks: indexing rate, query latency with filters, the HTTP API under concurrent
clients, and the serving process's memory.

    .venv/bin/python benchmarks/index_scale.py [--chunks 100000] [--queries 300] [--keep DIR] [--json]

Chunks are generated (Zipf-sampled words of the XQuAD-ru paragraphs, 60-140 words, 1 % carrying a contract number),
with random unit vectors of e5-small's 384 dimensions, so indexing is measured without the model; 80 % are `public`,
15 % `hr`, 5 % `finance`, and every tenth source is published twice so 10 % of chunks are superseded. Every query
runs with the scopes ["public"] — the access and lifecycle filters inside both sides, before the cut.

Baselines run beside each figure in the same process, so the ratios hold on a noisy machine:
- indexing: a plain SQLite table insert of the same rows (no FTS5, no vectors, no identifiers);
- kNN: sqlite-vec's scan inside SQL (`vector_ranking_sql`, what korpus did before the in-memory copy) and numpy
  brute force over the already filtered vectors (the memory-bandwidth floor);
- with the embedding model: e5-small on 1 000 of the generated texts, to combine into an end-to-end rate.

`--backend opensearch` adds, in the same run, the same index on a real OpenSearch node (`--opensearch-url`, else a
node korpus starts for the run with `--heap-mb`): the mirror's bulk indexing rate (`sync_from`, what a refresh runs:
stored text and vectors, 500 chunks a bulk), BM25/kNN/hybrid p50 and p95 of the same queries with the same filters
through the backend korpus serves with (every hit checked against the catalog), and the node's resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.api_load import page_chunks
from korpus.core.datamodel import Chunk, Source, SourceKind, chunk_id_for
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

ROOT = Path(__file__).resolve().parents[1]
XQUAD = ROOT / "eval" / "xquad-ru" / "corpus.jsonl"
DIMS = 384
PER_SOURCE = 50


def vocabulary() -> tuple[list[str], np.ndarray]:
    words: dict[str, int] = {}
    for line in XQUAD.read_text(encoding="utf-8").splitlines():
        for w in re.findall(r"[А-Яа-яЁё]{3,}", json.loads(line)["text"]):
            words[w.lower()] = words.get(w.lower(), 0) + 1
    ranked = sorted(words, key=lambda w: -words[w])
    weights = 1.0 / np.arange(1, len(ranked) + 1)
    return ranked, weights / weights.sum()


def generate(n: int, seed: int = 1) -> list[tuple[Source, list[Chunk], np.ndarray]]:
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    words, p = vocabulary()
    vocab = np.asarray(words, dtype=object)  # converted once: choice() on a list converts it on every call
    sources = []
    for s in range((n + PER_SOURCE - 1) // PER_SOURCE):
        access = rng.choices(["public", "hr", "finance"], weights=[80, 15, 5])[0]
        source = Source(
            source_id=f"gen/{s:05d}.txt",
            version=f"v{s}",
            path="/gen",
            kind=SourceKind.text,
            owner="bench",
            access=access,
            tenant="default",
        )
        count = min(PER_SOURCE, n - s * PER_SOURCE)
        bodies = []
        for _ in range(count):
            body = " ".join(nrng.choice(vocab, size=rng.randint(60, 140), p=p))
            if rng.random() < 0.01:
                body += f" по договору № {rng.randint(10, 99)}-{rng.randint(1, 30)}/{rng.randint(2015, 2024)}"
            bodies.append(body)
        chunks = page_chunks(source, bodies)
        vectors = nrng.standard_normal((count, DIMS), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        sources.append((source, chunks, vectors))
    return sources


def build(path: Path, sources: list) -> dict:
    plain = path.with_name("plain.db")
    import apsw

    conn = apsw.Connection(str(plain))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE chunks (chunk_id TEXT, source_id TEXT, text TEXT, access TEXT, lifecycle TEXT)")
    start = time.perf_counter()
    for _source, chunks, _ in sources:
        with conn:
            conn.executemany(
                "INSERT INTO chunks VALUES (?, ?, ?, ?, 'current')",
                [(c.chunk_id, c.source_id, c.text, c.access_rule) for c in chunks],
            )
    plain_s = time.perf_counter() - start
    conn.close()
    with SqliteIndex(path) as index:
        # random vectors, recorded as e5-small's so the API (which embeds queries with e5-small) accepts the index
        index.bind_embedding("e5-small", DIMS)
        start = time.perf_counter()
        total = 0
        for source, chunks, vectors in sources:
            index.publish_version(source, chunks, vectors, 1)
            total += len(chunks)
        index_s = time.perf_counter() - start
        # every tenth source gets a second version: its first version's chunks become superseded
        for source, chunks, vectors in sources[::10]:
            v2 = source.model_copy(update={"version": source.version + "b"})
            moved = [
                c.model_copy(
                    update={"source_version": v2.version, "chunk_id": chunk_id_for(v2.version, c.source_id, i)}
                )
                for i, c in enumerate(chunks)
            ]
            index.publish_version(v2, moved, vectors, 1)
        stats = {"current": index.chunk_count(), "all": index.chunk_count(None)}
    return {
        "chunks": total,
        "index_chunks_per_s": round(total / index_s, 1),
        "plain_insert_chunks_per_s": round(total / plain_s, 1),
        "ratio_vs_plain": round(index_s / plain_s, 2),
        "chunks_in_index": stats,
        "db_mb": round(path.stat().st_size / 2**20, 1),
    }


def embedding_rate(sources: list, n: int = 1000) -> float:
    from korpus.core.model_store import embed_model_path
    from korpus.core.settings import Settings
    from tasks.retrieval.embedding import Embedder

    texts = [c.text for _, chunks, _ in sources for c in chunks][:n]
    embedder = Embedder(embed_model_path(Settings()), batch_size=32)
    embedder.embed_passages(texts[:32])
    start = time.perf_counter()
    embedder.embed_passages(texts)
    return n / (time.perf_counter() - start)


def pct(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[q - 1] * 1000, 2) if len(values) > 1 else values[0] * 1000


def percentiles(fn, qs: list) -> dict[str, float]:
    """p50 and p95 in milliseconds of `fn(query, vector)` over the queries, one after another."""
    times = []
    for q, v in qs:
        start = time.perf_counter()
        fn(q, v)
        times.append(time.perf_counter() - start)
    return {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}


def queries(n: int, ranks: tuple[int, int] = (200, 5000), seed: int = 2) -> list[tuple[str, np.ndarray]]:
    """2-5 words drawn from a band of the vocabulary's frequency ranks. Content words (ranks 200-5000) each occur in
    ~0.1-5 % of the chunks, like the nouns of a real question; frequent words (20-200) in 5-40 %, a worst case
    that makes BM25 score tens of thousands of matches."""
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    vocab, _ = vocabulary()
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(vocab[ranks[0] : ranks[1]]) for _ in range(rng.randint(2, 5)))
        v = nrng.standard_normal(DIMS, dtype=np.float32)
        out.append((text, v / np.linalg.norm(v)))
    return out


def latency(path: Path, qs: list) -> dict:
    scopes = ["public"]
    out = {}
    with SqliteIndex(path) as index:
        start = time.perf_counter()
        retrieve(index.searcher, qs[0][0], qs[0][1], scopes)  # warm the page cache; loads the process's vector copy
        out["first_query_with_vector_load_ms"] = round((time.perf_counter() - start) * 1000, 1)
        runs = {
            "bm25": lambda q, v: retrieve(index.searcher, q, None, scopes, k=10, mode="bm25"),
            "knn": lambda q, v: retrieve(index.searcher, q, v, scopes, k=10, mode="dense"),
            "hybrid": lambda q, v: retrieve(index.searcher, q, v, scopes, k=10, mode="hybrid"),
            "hybrid-rrf": lambda q, v: retrieve(index.searcher, q, v, scopes, k=10, mode="hybrid-rrf"),
            "knn-sqlite-vec-scan": lambda q, v: index.searcher.vector_ranking_sql(v, scopes, 50),
        }
        table = index.vector_table()
        rows = index.conn.execute(
            f"SELECT c.rowid, v.embedding FROM chunks c JOIN {table} v ON v.rowid = c.rowid "
            "WHERE c.lifecycle = 'current' AND c.access = 'public'"
        ).fetchall()
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), DIMS)
        runs["numpy-knn-floor"] = lambda q, v: np.argpartition(-(matrix @ v), 10)[:10]
        # FTS5's own bm25() per matching row, the path every query took before the in-memory postings: side by side
        fts5 = lambda fn: lambda q, v: _with_fts5_bm25(fn, q, v)  # noqa: E731
        runs["bm25-fts5"], runs["hybrid-fts5"] = fts5(runs["bm25"]), fts5(runs["hybrid"])
        cold = []
        for q, v in qs:  # the first pass loads each frequent term's postings once (a serving process keeps them)
            start = time.perf_counter()
            runs["hybrid"](q, v)
            cold.append(time.perf_counter() - start)
        out["hybrid_first_pass"] = {"p50_ms": pct(cold, 50), "p95_ms": pct(cold, 95)}
        for name, fn in runs.items():
            out[name] = percentiles(fn, qs)
    out["hybrid_vs_hybrid_fts5_p95"] = round(out["hybrid"]["p95_ms"] / out["hybrid-fts5"]["p95_ms"], 2)
    out["knn_vs_numpy_floor_p50"] = round(out["knn"]["p50_ms"] / out["numpy-knn-floor"]["p50_ms"], 1)
    out["sqlite_vec_scan_vs_knn_p50"] = round(out["knn-sqlite-vec-scan"]["p50_ms"] / out["knn"]["p50_ms"], 1)
    return out


def _with_fts5_bm25(fn, q: str, v: np.ndarray):
    """`fn` with BM25 always scored by FTS5's bm25() (the in-memory postings switched off)."""
    import tasks.index.sqlite_search as search

    saved, search.MEMORY_BM25_MIN_MATCHES = search.MEMORY_BM25_MIN_MATCHES, 10**12
    try:
        return fn(q, v)
    finally:
        search.MEMORY_BM25_MIN_MATCHES = saved


def api(path: Path, qs: list, clients: int = 20, per_client: int = 15) -> dict:
    import httpx

    port = 18000 + os.getpid() % 1000
    env = {**os.environ, "KORPUS_DATA": str(path.parent), "KORPUS_EMBED_MODEL": "", "PREFECT_LOGGING_LEVEL": "ERROR"}
    env.pop("KORPUS_EMBED_MODEL")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "korpus"), "serve", "--port", str(port), "--data", str(path.parent)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(path.parent / "serve.log", "wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if server.poll() is not None:
                    raise RuntimeError(f"korpus serve exited: see {path.parent / 'serve.log'}") from None
                time.sleep(0.2)
        report = {}
        for mode in ("bm25", "hybrid"):
            httpx.get(f"{base}/search", params={"q": qs[0][0], "mode": mode}, timeout=60)  # model loaded
            times: list[float] = []
            lock = threading.Lock()

            def client(offset: int, mode: str = mode, times: list = times, lock: threading.Lock = lock) -> None:
                with httpx.Client(timeout=120) as session:
                    for i in range(per_client):
                        q = qs[(offset * per_client + i) % len(qs)][0]
                        start = time.perf_counter()
                        session.get(f"{base}/search", params={"q": q, "mode": mode}).raise_for_status()
                        with lock:
                            times.append(time.perf_counter() - start)

            threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            report[mode] = {
                "p50_ms": pct(times, 50),
                "p95_ms": pct(times, 95),
                "requests_per_s": round(len(times) / wall, 1),
            }
        status = Path(f"/proc/{server.pid}/status").read_text()
        mem = {k: int(re.search(rf"{k}:\s+(\d+)", status).group(1)) // 1024 for k in ("VmRSS", "VmHWM")}
        report["server_rss_mb"], report["server_peak_rss_mb"] = mem["VmRSS"], mem["VmHWM"]
        return report
    finally:
        server.terminate()
        server.wait(10)


def cluster(path: Path, sets: dict[str, list], url: str, pid: int | None) -> dict:
    """The same catalog mirrored to the node, and the same queries through the served (catalog-checked) backend."""
    import uuid

    import psutil
    from opensearchpy import OpenSearch

    from tasks.index.opensearch import OpenSearchIndex

    backend = OpenSearchIndex(
        OpenSearch(hosts=[url], timeout=300, max_retries=0), prefix=f"scale{uuid.uuid4().hex[:8]}", catalog=path
    )
    out: dict = {}
    with SqliteIndex(path) as index:
        start = time.perf_counter()
        report = backend.sync_from(index)
        seconds = time.perf_counter() - start
        total = index.chunk_count(None)
    out["mirror"] = {
        **report,
        "seconds": round(seconds, 1),
        "chunks_per_s": round(report["indexed"] / seconds, 1),
        "chunks_in_catalog": total,
    }
    backend.client.indices.forcemerge(index=backend.alias, max_num_segments=1, request_timeout=3600)
    scopes = ["public"]
    runs = {
        "bm25": lambda q, v: retrieve(backend, q, None, scopes, k=10, mode="bm25"),
        "knn": lambda q, v: retrieve(backend, q, v, scopes, k=10, mode="dense"),
        "hybrid": lambda q, v: retrieve(backend, q, v, scopes, k=10, mode="hybrid"),
        "hybrid-rrf": lambda q, v: retrieve(backend, q, v, scopes, k=10, mode="hybrid-rrf"),
    }
    for label, qs in sets.items():
        for q, v in qs[:20]:  # warm: the HNSW graph and the postings into the page cache
            runs["hybrid"](q, v)
        out[label] = {name: percentiles(fn, qs) for name, fn in runs.items()}
    if pid is not None:
        out["node_rss_mb"] = round(psutil.Process(pid).memory_info().rss / 2**20)
    backend.client.indices.delete(index=f"{backend.prefix}-chunks-*", ignore=[404])
    backend.client.indices.delete_index_template(name=f"{backend.prefix}-chunks", ignore=[404])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the index in this folder")
    parser.add_argument("--skip-api", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--backend",
        choices=["sqlite", "opensearch"],
        default="sqlite",
        help="opensearch: the same index and queries on a real node too, beside SQLite",
    )
    parser.add_argument("--opensearch-url", help="the node for --backend opensearch (default: start one)")
    parser.add_argument("--heap-mb", type=int, default=2048, help="the started node's Java heap")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="korpus-scale-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "korpus.db"
        report: dict = {}
        if not path.exists():
            sources = generate(args.chunks)
            report["indexing"] = build(path, sources)
            rate = embedding_rate(sources)
            idx_rate = report["indexing"]["index_chunks_per_s"]
            report["indexing"]["embed_chunks_per_s"] = round(rate, 1)
            report["indexing"]["with_embedding_chunks_per_s"] = round(1 / (1 / rate + 1 / idx_rate), 1)
        qs = queries(args.queries)
        report["latency"] = latency(path, qs)
        report["latency_frequent_words"] = latency(path, queries(args.queries // 2, ranks=(20, 200)))
        if not args.skip_api:
            report["api_20_clients"] = api(path, qs)
        if args.backend == "opensearch":
            from tasks.runtime.opensearch_node import start, stop_leashed

            url, pid = args.opensearch_url, None
            try:
                if url is None:
                    (node,) = start(
                        folder / "opensearch", port=None, heap_mb=args.heap_mb, detach=False, log=sys.stderr
                    )
                    url, pid = node.url, node.pid
                sets = {"latency": qs, "latency_frequent_words": queries(args.queries // 2, ranks=(20, 200))}
                report["opensearch"] = cluster(path, sets, url, pid)
            finally:
                stop_leashed()
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

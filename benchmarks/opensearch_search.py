"""A hybrid search on OpenSearch: korpus against a plain client on the same node and index (#64 item 2).

    .venv/bin/python benchmarks/opensearch_search.py [--chunks 30000] [--queries 200] [--opensearch-url URL]
        [--heap-mb 2048] [--json]

Generated chunks (benchmarks/index_scale.py `generate`, labelled as generated: Zipf words, random unit vectors) are
mirrored to a real OpenSearch node with korpus's mapping (`sync_from`), with the catalog beside it. Questions are
three to five words of a random chunk with that chunk's vector plus noise, asked with the `public` scope. Timed side
by side, each question in turn by each row (the order rotating), after 20 warm-up questions:
- **korpus hybrid (default)** — `Retriever.from_settings(...).search(q, v, ["public"], k=10)`: typo check, BM25, kNN,
  identifiers and routing in one `_msearch` (`prefetch`), convex fusion, the hits' fields, the catalog's per-hit check;
- **korpus, one request a primitive** — the same with `prefetch` turned off (what korpus did before);
- **plain client** — what a competent engineer writes without korpus: one `_msearch` of `match` and `knn` under the
  same filter (current, public), the hits' fields but not the vectors, RRF (k 60) in Python, the top 10;
- **korpus, routing counts asked every search (before)** — the default without its kept counts (tasks/index/
  opensearch.py `Statistics`): each term's document count, the total and each term's visibility in every `_msearch`,
  as before session 39.
Where the time goes, for the default and the plain client: each `_msearch`'s wall time and each kind of sub-search's
own `took` (the node runs them side by side).
Reported: p50 and p95 in ms and korpus ÷ plain at each (target p95 ≤ 1.3), and requests a question.
With `--typos` each question has a typo in its longest word (two letters swapped), and each is asked four times, in
random order among the others (about a quarter of the asks are first asks): korpus's typo check finds the word's
close terms (the term suggester) and asks BM25 again with them; the plain client does nothing of the kind, so
compare korpus's rows with each other there — the default keeps a typo's close terms and counts between syncs, the
"routing counts asked every search (before)" row keeps nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.index_scale import DIMS, generate
from tasks.index.sqlite import SqliteIndex

WARMUP = 20
REPEATS = 4
"""With `--typos`: how often each mistyped question is asked."""
ROWS = (
    "korpus hybrid (default)",
    "korpus, one request a primitive",
    "plain client (_msearch + RRF)",
    "korpus hybrid, routing counts asked every search (before)",
    "korpus hybrid, BM25 with a named clause a term (before)",
)


def _mistyped(words: list[str]) -> list[str]:
    """The question with a typo in its longest word of six letters or more: its third and fourth letters swapped (the
    first letter kept, as the typo rule asks: tasks/text/typos.py); the words unchanged if none is that long."""
    longest = max(range(len(words)), key=lambda i: len(words[i]))
    word = words[longest]
    if len(word) < 6 or word[2] == word[3]:
        return words
    return [*words[:longest], word[:2] + word[3] + word[2] + word[4:], *words[longest + 1 :]]


def _questions(sources: list, count: int, seed: int = 7, typos: bool = False) -> list[tuple[str, np.ndarray]]:
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    public = [
        (c, v) for s, chunks, vectors in sources if s.access == "public" for c, v in zip(chunks, vectors, strict=True)
    ]
    out = []
    for _ in range(count // REPEATS if typos else count):
        chunk, vector = rng.choice(public)
        words = chunk.text.split()
        start = rng.randrange(max(1, len(words) - 5))
        noisy = vector + nrng.standard_normal(DIMS).astype(np.float32) * 0.05
        asked = words[start : start + rng.randint(3, 5)]
        out.append((" ".join(_mistyped(asked) if typos else asked), noisy / np.linalg.norm(noisy)))
    if typos:  # each mistyped question asked REPEATS times, in random order (people repeat what they type)
        out = [*out * REPEATS, *out[: count - len(out) * REPEATS]]
        rng.shuffle(out)
    return out


def _plain(client, alias: str, query: str, vector: np.ndarray) -> list[str]:
    """One `_msearch` of BM25 and kNN under the filter, RRF in Python: the baseline."""
    filters = [{"term": {"lifecycle": "current"}}, {"term": {"access": "public"}}]
    source = {"excludes": ["embedding"]}
    bm25 = {
        "size": 50,
        "_source": source,
        "query": {"bool": {"must": [{"match": {"text": query}}], "filter": filters}},
    }
    knn = {
        "size": 50,
        "_source": source,
        "query": {"knn": {"embedding": {"vector": vector.tolist(), "k": 50, "filter": {"bool": {"filter": filters}}}}},
    }
    answers = client.msearch(body=[{"index": alias}, bm25, {"index": alias}, knn])["responses"]
    scores: dict[str, float] = {}
    docs: dict[str, dict] = {}
    for answer in answers:
        for rank, hit in enumerate(answer["hits"]["hits"]):
            scores[hit["_id"]] = scores.get(hit["_id"], 0.0) + 1.0 / (60 + rank + 1)
            docs[hit["_id"]] = hit["_source"]
    return sorted(scores, key=scores.get, reverse=True)[:10]


def _kind(body: dict) -> str:
    """What a sub-search of korpus's `prefetch` asks (tasks/index/opensearch.py)."""
    if body.get("size") == 0:
        return "document frequencies" if body.get("track_total_hits") is True else "visible holds"
    query = json.dumps(body.get("query"))
    return "knn" if '"knn"' in query else "identifiers" if '"identifiers"' in query else "lexical"


def measure(
    n: int,
    queries: int,
    url: str,
    folder: Path,
    beams: tuple[int, ...] = (),
    profile: bool = False,
    typos: bool = False,
) -> dict:
    from opensearchpy import OpenSearch

    from korpus.core.settings import Settings
    from tasks.index.opensearch import OpenSearchIndex
    from tasks.retrieval.retriever import Retriever

    path = folder / f"catalog-{n}.db"
    sources = generate(n)
    with SqliteIndex(path) as index:
        index.bind_embedding("e5-small", DIMS)
        for source, chunks, vectors in sources:
            index.publish_version(source, chunks, vectors, 1)
    print(f"{n:,} chunks: catalog built", file=sys.stderr, flush=True)
    settings = Settings(data=folder)
    cluster = OpenSearchIndex(
        OpenSearch(hosts=[url], timeout=600, max_retries=0),
        prefix=f"search{uuid.uuid4().hex[:8]}",
        catalog=path,
        knn_candidates=settings.opensearch_knn_candidates,
    )
    try:
        with SqliteIndex(path) as index:
            cluster.sync_from(index)
        print(f"{n:,} chunks: mirrored to the node", file=sys.stderr, flush=True)
        unfetched = OpenSearchIndex(cluster.client, prefix=cluster.prefix, catalog=path)
        unfetched.prefetch = lambda *_asked: None  # type: ignore[method-assign]
        korpus, alone = Retriever.from_settings(cluster, settings), Retriever.from_settings(unfetched, settings)
        uncounted = OpenSearchIndex(cluster.client, prefix=cluster.prefix, catalog=path)
        uncounted._statistics.current = dict  # type: ignore[method-assign]  # nothing kept: every count asked
        counting_each = Retriever.from_settings(uncounted, settings)
        named = OpenSearchIndex(cluster.client, prefix=cluster.prefix, catalog=path)
        named.named_terms = True
        with_named = Retriever.from_settings(named, settings)
        asked = _questions(sources, WARMUP + queries, typos=typos)
        rows = (*ROWS, *(f"korpus hybrid, kNN beam {beam}" for beam in beams))
        counted = {row: 0 for row in rows}
        perform = cluster.client.transport.perform_request
        current = [ROWS[0]]

        def counting(*args, **kwargs):
            counted[current[0]] += 1
            return perform(*args, **kwargs)

        cluster.client.transport.perform_request = counting
        parts: dict[str, list[float]] = {}
        sent = cluster.client.msearch

        def timed_msearch(*args, **kwargs):
            """The default's and the plain client's `_msearch`: its wall time, and each sub-search's own `took` by
            kind."""
            start = time.perf_counter()
            answer = sent(*args, **kwargs)
            if current[0] in (ROWS[0], ROWS[2]):
                row = "default" if current[0] == ROWS[0] else "plain"
                parts.setdefault(f"{row}: _msearch wall", []).append(1000 * (time.perf_counter() - start))
                took: dict[str, float] = {}
                for body, response in zip(kwargs["body"][1::2], answer["responses"], strict=True):
                    took[_kind(body)] = took.get(_kind(body), 0.0) + response.get("took", 0)
                for kind, ms in took.items():
                    parts.setdefault(f"{row}: took {kind}", []).append(ms)
            return answer

        cluster.client.msearch = timed_msearch
        runs = {
            ROWS[0]: lambda q, v: korpus.search(q, v, ["public"], k=10),
            ROWS[1]: lambda q, v: alone.search(q, v, ["public"], k=10),
            ROWS[2]: lambda q, v: _plain(cluster.client, cluster.alias, q, v),
            ROWS[3]: lambda q, v: counting_each.search(q, v, ["public"], k=10),
            ROWS[4]: lambda q, v: with_named.search(q, v, ["public"], k=10),
        }
        for beam, row in zip(beams, rows[len(ROWS) :], strict=True):
            wider = Retriever.from_settings(cluster.with_knn_candidates(beam), settings)
            runs[row] = lambda q, v, wider=wider: wider.search(q, v, ["public"], k=10)
        times: dict[str, list[float]] = {row: [] for row in rows}
        for i, (query, vector) in enumerate(asked):
            order = rows[i % len(rows) :] + rows[: i % len(rows)]
            for row in order:
                current[0] = row
                start = time.perf_counter()
                runs[row](query, vector)
                if i >= WARMUP:
                    times[row].append(time.perf_counter() - start)
                else:
                    parts.clear()  # the warm-up's own
        out: dict = {"chunks": n, "queries": queries, "rows": rows}
        for row in rows:
            ordered = sorted(times[row])
            out[row] = {
                "p50_ms": round(1000 * statistics.median(ordered), 1),
                "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
                "requests_a_question": round(counted[row] / len(asked), 2),
            }
        plain = out[ROWS[2]]
        for row in (r for r in rows if r != ROWS[2]):
            out[row]["p50_ratio"] = round(out[row]["p50_ms"] / plain["p50_ms"], 2)
            out[row]["p95_ratio"] = round(out[row]["p95_ms"] / plain["p95_ms"], 2)
        out["where the time goes (ms: p50, p95)"] = {
            name: [round(statistics.median(v), 1), round(sorted(v)[int(0.95 * (len(v) - 1))], 1)]
            for name, v in sorted(parts.items())
        }
        if profile:  # the default row's own Python, after the timed runs (a profiler slows what it watches)
            import cProfile
            import io
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            for query, vector in asked[:50]:
                korpus.search(query, vector, ["public"], k=10)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
            print(text.getvalue(), file=sys.stderr, flush=True)
        print(json.dumps(out), file=sys.stderr, flush=True)  # kept whatever the cleanup does
        return out
    finally:  # a node still merging may time out here (1,000,000 chunks: a run's figures were lost so)
        with contextlib.suppress(Exception):
            cluster.client.indices.delete(index=f"{cluster.prefix}-chunks-*", ignore=[404])
            cluster.client.indices.delete_index_template(name=f"{cluster.prefix}-chunks", ignore=[404])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[30_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--opensearch-url", help="a running node (else one is started for the run)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--heap-mb", type=int, default=2048, help="the started node's heap (4096 for 1,000,000 chunks)")
    parser.add_argument(
        "--knn-candidates", type=int, nargs="+", default=[], help="also korpus's hybrid with these kNN beams"
    )
    parser.add_argument("--profile", action="store_true", help="then profile 50 of the default row's searches")
    parser.add_argument(
        "--typos",
        action="store_true",
        help="each question with a typo in its longest word (the plain client has no "
        "typo handling: compare korpus's rows with each other)",
    )
    args = parser.parse_args()
    beams = tuple(args.knn_candidates)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def measured(url: str) -> list[dict]:
            return [measure(n, args.queries, url, folder, beams, args.profile, args.typos) for n in args.chunks]

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
    print("| chunks (generated) | row | p50 ms | p95 ms | ÷ plain p50 | ÷ plain p95 | requests a question |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for row in r["rows"]:
            m = r[row]
            print(
                f"| {r['chunks']:,} | {row} | {m['p50_ms']} | {m['p95_ms']} | {m.get('p50_ratio', 1.0)} | "
                f"{m.get('p95_ratio', 1.0)} | {m['requests_a_question']} |"
            )


if __name__ == "__main__":
    main()

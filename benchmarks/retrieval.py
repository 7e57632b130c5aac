"""Retrieval quality side by side: BM25 without stemming, BM25 with Russian analysis, dense, hybrid — per type.

    .venv/bin/python benchmarks/retrieval.py [--xquad eval/xquad-ru] [--json]

Corpora, each refreshed into a fresh data directory by the real flow:
- the archive-style set (`corpora.archive_eval`: 34 documents — near-identical contracts told apart by ИНН, ОГРН
  and numbers, memos/minutes/orders asked about in other words, restricted HR orders, court notes; refreshed,
  changed, refreshed again; 92 questions), with the default chunk policy and again with structure-v1;
- the sample archive with its eval set (`eval/sample-archive.jsonl`);
- XQuAD-ru (240 paragraphs, 623 dev questions), imported with `import_beir`;
- real-colloquial (`eval/real-colloquial`): the real files of tests/fixtures/real-archive, and 26 questions a person
  wrote about them, each as a formal question and as the colloquial rewrite a user would type (52 in all; the
  answer is the chunk holding a quoted phrase: docs/retrieval.md).
`--only NAME …` runs only those sets; `--embed-model PATH` refreshes every set with that embedder instead of the
default (the embedder comparison of #31).
Retrievers: bm25-nostem, bm25, dense, hybrid-rrf (plain equal-weight RRF), hybrid (routed by lexical coverage).
It ends with one table: every set × {bm25, dense, hybrid} × {R@1, nDCG@10}, and whether hybrid is ≥ both sides
(fitted out of sample, with intervals: benchmarks/fusion.py).

`--backend opensearch`: every set is also mirrored to a real OpenSearch node (`--opensearch-url`, else a node korpus
starts for the run: infra/opensearch/node) and every retriever evaluated there too, with the same analyzer, fusion
and catalog; the closing table then has both backends' R@1 and nDCG@10 side by side and their difference.

`--meta-check`: each set (or each `--only` set) refreshed twice, meta-documents on (the default) and off, and the
default hybrid compared on the non-collection questions (R@1 must be equal within 0.005: meta parts stay out of their
way) and on the collection questions (top 3 must hold the meta-document asked for).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.question_sets import DANETQA, DEFAULT_XQUAD, REAL_QUESTIONS, ROOT, write_real_colloquial
from corpora import archive_eval
from corpora.sample_archive import write_sample_archive
from flows.corpus_refresh import run_refresh
from korpus.core.model_store import embed_model_path, ensure_models
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import Embedder
from tasks.retrieval.evaluation import RETRIEVERS, calibrate_no_answer, evaluate, import_beir, load_questions
from tasks.retrieval.retriever import Retriever

EMBED_MODEL: list[Path] = []  # --embed-model, when given
CLUSTER: list[str] = []  # --backend opensearch: the node's URL
KNN_CANDIDATES: list[int] = []  # --knn-candidates: kNN beams evaluated beside the default, on the same node


def cluster_backend(settings: Settings, index: SqliteIndex):
    """The set's catalog mirrored to the node under its own prefix, served as korpus serves it (catalog-checked)."""
    import uuid

    from opensearchpy import OpenSearch

    from tasks.index.opensearch import OpenSearchIndex

    cluster = OpenSearchIndex(
        OpenSearch(hosts=CLUSTER, timeout=120, max_retries=0),
        prefix=f"bench{uuid.uuid4().hex[:8]}",
        catalog=settings.index_path,
    )
    start = time.perf_counter()
    report = cluster.sync_from(index)
    print(f"mirrored to OpenSearch: {report} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return cluster


def run(root: Path, questions: Path, data: Path, changes=None, policy: str | None = None) -> dict:
    extra = {"chunk_policy": policy} if policy else {}
    settings = Settings(data=data, **extra, **({"embed_model": EMBED_MODEL[0]} if EMBED_MODEL else {}))
    run_refresh(root, settings)
    if changes is not None:
        changes(root)
        run_refresh(root, settings)
    embedder = Embedder(embed_model_path(settings))
    qs = load_questions(questions)
    with SqliteIndex(settings.index_path) as index:
        if any(q.type == "no-answer" for q in qs):
            calibration = calibrate_no_answer(qs, index.searcher, embedder, settings.default_scopes)
            print(f"no-answer calibration: {calibration}", file=sys.stderr)
        report, seconds = {}, {}
        embed = embedder.embed_queries
        spent = [0.0]

        def timed_embed(texts: list[str]):
            start = time.perf_counter()
            try:
                return embed(texts)
            finally:
                spent[0] += time.perf_counter() - start

        embedder.embed_queries = timed_embed
        backends = {"": index.searcher}
        if CLUSTER:
            backends[OPENSEARCH] = cluster_backend(settings, index)
            for beam in KNN_CANDIDATES:  # the same mirrored index, the kNN beam widened (dense rows)
                backends[f"{OPENSEARCH}, kNN beam {beam}"] = backends[OPENSEARCH].with_knn_candidates(beam)
        for suffix, backend in backends.items():
            for r in RETRIEVERS:
                if r == "hybrid+rerank":  # no offline cross-encoder weights exist here
                    continue
                if "beam" in suffix and r != "dense":  # a hybrid keeps its depth as its kNN beam
                    continue
                spent[0], start = 0.0, time.perf_counter()
                report[r + suffix] = evaluate(
                    qs,
                    backend,
                    embedder,
                    r,
                    settings.default_scopes,
                    settings.no_answer_threshold,
                    Retriever.from_settings(backend, settings),  # what korpus search and the API rank with
                )
                total = time.perf_counter() - start
                seconds[r + suffix] = {
                    "questions": len(qs),
                    "embedding_s": round(spent[0], 2),
                    "rest_s": round(total - spent[0], 2),
                }
        if CLUSTER:
            cluster = backends[OPENSEARCH]
            cluster.client.indices.delete(index=f"{cluster.prefix}-chunks-*", ignore=[404])
            cluster.client.indices.delete_index_template(name=f"{cluster.prefix}-chunks", ignore=[404])
        # timings go to stderr: the JSON report stays comparable byte for byte between runs
        print(f"eval seconds ({questions.name}): {seconds}", file=sys.stderr)
        return report


def meta_check(root_writer, questions: Path, tmp: Path, name: str) -> dict:
    """Hybrid R@1 on the set's non-collection questions with meta-documents on and off; collection top-3."""
    from tasks.retrieval.evaluation import _scores
    from tasks.retrieval.query import clean_query

    qs = load_questions(questions)
    out = {}
    for meta in (True, False):
        root, data = tmp / f"{name}-root-{meta}", tmp / f"{name}-data-{meta}"
        root_writer(root)
        settings = Settings(data=data, meta_documents=meta)
        run_refresh(root, settings)
        embedder = Embedder(embed_model_path(settings))
        with SqliteIndex(settings.index_path) as index:
            ranker = Retriever.from_settings(index.searcher, settings)
            ordinary, collection = [], []
            for q in qs:
                if q.type in ("no-answer", "denied-access") and not q.expected:
                    continue
                text = clean_query(q.question)
                hits = ranker.search(text, embedder.embed_query(text), q.scopes or settings.default_scopes, k=10)
                if q.type == "collection":
                    collection.append(any(h["source_id"] == e.source_id for h in hits[:3] for e in q.expected))
                else:
                    ordinary.append(_scores(hits, q.expected)["recall@1"])
        out["on" if meta else "off"] = {
            "ordinary_n": len(ordinary),
            "ordinary_r@1": round(sum(ordinary) / max(1, len(ordinary)), 4),
            "collection_top3": f"{sum(collection)}/{len(collection)}",
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xquad", type=Path, default=DEFAULT_XQUAD)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--meta-check", action="store_true", help="hybrid with meta-documents on vs off, per set")
    parser.add_argument("--only", nargs="+", help="run only these sets (names as printed)")
    parser.add_argument("--embed-model", type=Path, help="refresh every set with this embedding model folder")
    parser.add_argument(
        "--backend",
        choices=["sqlite", "opensearch"],
        default="sqlite",
        help="opensearch: evaluate every set on a real node too, beside SQLite",
    )
    parser.add_argument("--opensearch-url", help="the node or cluster for --backend opensearch (default: start one)")
    parser.add_argument(
        "--knn-candidates",
        type=int,
        nargs="+",
        default=[],
        help="with --backend opensearch: also evaluate dense with these kNN beams (KORPUS_OPENSEARCH_KNN_CANDIDATES)",
    )
    args = parser.parse_args()
    KNN_CANDIDATES[:] = args.knn_candidates
    EMBED_MODEL[:] = [args.embed_model] if args.embed_model else []
    if args.backend == "opensearch":
        if args.opensearch_url:
            CLUSTER[:] = [args.opensearch_url]
        else:
            from tasks.runtime.opensearch_node import start

            CLUSTER[:] = [
                start(Path(tempfile.mkdtemp(prefix="korpus-bench-node-")), port=None, detach=False, log=sys.stderr)[
                    0
                ].url
            ]
    try:
        _main(args)
    finally:
        from tasks.runtime.opensearch_node import stop_leashed

        stop_leashed()


def _main(args: argparse.Namespace) -> None:
    wanted = (lambda name: name in args.only) if args.only else (lambda name: True)
    ensure_models(Settings())
    if args.meta_check:
        with tempfile.TemporaryDirectory(prefix="korpus-meta-check-") as tmp:
            tmp = Path(tmp)
            archive_questions = tmp / "archive-style.jsonl"
            archive_eval.write_questions(archive_questions)

            def archive(root: Path) -> None:
                archive_eval.write_archive(root)
                archive_eval.apply_changes(root)  # the archive as it stands after its changes

            def xquad(root: Path) -> None:
                import_beir(args.xquad, root, tmp / "xquad.jsonl")

            import_beir(args.xquad, tmp / "xquad-probe", tmp / "xquad.jsonl")
            sets = {
                "archive-style": (archive, archive_questions, "archive"),
                "sample-archive": (write_sample_archive, ROOT / "eval" / "sample-archive.jsonl", "s"),
                "xquad-ru": (xquad, tmp / "xquad.jsonl", "xquad"),
                "real-colloquial": (write_real_colloquial, REAL_QUESTIONS, "real"),
            }
            report = {
                name: meta_check(writer, questions, tmp, short)
                for name, (writer, questions, short) in sets.items()
                if wanted(name)
            }
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return
    report, built = {}, {}  # built: set name → (data folder, questions)
    with tempfile.TemporaryDirectory(prefix="korpus-retrieval-") as tmp:
        questions = Path(tmp) / "archive-style.jsonl"
        archive_eval.write_questions(questions)
        for name, policy in (("archive-style", None), ("archive-style, structure-v1 chunks", "structure-v1")):
            if not wanted(name):
                continue
            root = Path(tmp) / f"archive-{policy}"
            archive_eval.write_archive(root)
            report[name] = run(
                root, questions, Path(tmp) / f"archive-data-{policy}", archive_eval.apply_changes, policy
            )
            built[name] = (Path(tmp) / f"archive-data-{policy}", questions)
        if wanted("sample-archive"):
            sample = Path(tmp) / "sample"
            write_sample_archive(sample)
            report["sample-archive"] = run(sample, ROOT / "eval" / "sample-archive.jsonl", Path(tmp) / "sample-data")
            built["sample-archive"] = (Path(tmp) / "sample-data", ROOT / "eval" / "sample-archive.jsonl")
        if wanted("xquad-ru"):
            corpus, questions = Path(tmp) / "xquad", Path(tmp) / "xquad.jsonl"
            import_beir(args.xquad, corpus, questions)
            report["xquad-ru"] = run(corpus, questions, Path(tmp) / "xquad-data")
            built["xquad-ru"] = (Path(tmp) / "xquad-data", questions)
        if wanted("danetqa"):  # its reporting half: 890 questions nobody fits on
            corpus, questions = Path(tmp) / "danetqa", Path(tmp) / "danetqa.jsonl"
            import_beir(DANETQA, corpus, questions, split="-report")
            report["danetqa"] = run(corpus, questions, Path(tmp) / "danetqa-data")
            built["danetqa"] = (Path(tmp) / "danetqa-data", questions)
        if wanted("real-colloquial"):
            real = Path(tmp) / "real"
            write_real_colloquial(real)
            report["real-colloquial"] = run(real, REAL_QUESTIONS, Path(tmp) / "real-data")
            built["real-colloquial"] = (Path(tmp) / "real-data", REAL_QUESTIONS)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return
    if CLUSTER:
        print(backends_table(report))
    for name, by_retriever in report.items():
        print(f"== {name}")
        for retriever, r in by_retriever.items():
            types = "  ".join(f"{t}={v['ndcg@10']}" for t, v in r["by_type"].items())
            types += "".join(f"  {t} passed={v['passed']}" for t, v in r["checks"].items())
            print(
                f"{retriever:>12}: n={r['n']} R@1={r['recall@1']} R@10={r['recall@10']} MRR@10={r['mrr@10']} "
                f"nDCG@10={r['ndcg@10']} leaks={r['leaks']}  by type nDCG@10: {types}"
            )
    print(summary(report))


OPENSEARCH = " @opensearch"


def backends_table(report: dict) -> str:
    """Every set × {bm25, dense, hybrid} × {R@1, nDCG@10} on SQLite and on the OpenSearch node, and the difference."""
    rows = [
        "| set | retriever | SQLite R@1 | OpenSearch R@1 | SQLite nDCG@10 | OpenSearch nDCG@10 | largest gap |",
        "|" + "---|" * 7,
    ]
    for name, by in report.items():
        for r in ("bm25", "dense", "hybrid"):
            a, b = by[r], by[r + OPENSEARCH]
            gap = max(abs(a[m] - b[m]) for m in ("recall@1", "ndcg@10"))
            rows.append(
                f"| {name} | {r} | {a['recall@1']:.3f} | {b['recall@1']:.3f} | {a['ndcg@10']:.3f} "
                f"| {b['ndcg@10']:.3f} | {gap:.3f}{'' if gap <= 0.01 else ' (over 0.01)'} |"
            )
            for beam in KNN_CANDIDATES:
                if r == "dense":
                    b = by[f"{r}{OPENSEARCH}, kNN beam {beam}"]
                    gap = max(abs(a[m] - b[m]) for m in ("recall@1", "ndcg@10"))
                    rows.append(
                        f"| {name} | {r}, kNN beam {beam} | {a['recall@1']:.3f} | {b['recall@1']:.3f} "
                        f"| {a['ndcg@10']:.3f} | {b['ndcg@10']:.3f} | {gap:.3f} |"
                    )
    return "\n".join(rows)


def summary(report: dict) -> str:
    """One table: every set × {bm25, dense, hybrid} × {R@1, nDCG@10}, and whether hybrid is at least its better side
    on both measures (fusion fitted out of sample, with intervals: benchmarks/fusion.py)."""
    head = (
        "| set | bm25 R@1 | bm25 nDCG@10 | dense R@1 | dense nDCG@10 | hybrid R@1 | hybrid nDCG@10 "
        "| hybrid ≥ both sides |"
    )
    rows = [head, "|" + "---|" * 8]
    for name, by in report.items():
        b, d, h = by["bm25"], by["dense"], by["hybrid"]
        holds = all(h[m] >= max(b[m], d[m]) for m in ("recall@1", "ndcg@10"))
        rows.append(
            f"| {name} | {b['recall@1']:.3f} | {b['ndcg@10']:.3f} | {d['recall@1']:.3f} | {d['ndcg@10']:.3f} "
            f"| {h['recall@1']:.3f} | {h['ndcg@10']:.3f} | {'yes' if holds else 'NO'} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()

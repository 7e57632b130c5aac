"""How BM25 and kNN are fused, studied on every set korpus has (#31 item 2): each side alone, plain RRF, the routed
default, and a per-query weighting whose one parameter is fitted leave-one-set-out (on the other sets, reported on
the one left out).

    .venv/bin/python benchmarks/fusion.py [--keep DIR] [--json]

Each set is refreshed once by the real flow with the default settings (kept in `--keep DIR` to be reused); then,
per answerable question, the retriever's own primitives are read once — BM25's and kNN's top 50 under the filters,
BM25's lexical coverage, the meta and furniture parts the retriever sets aside — and every fusion is computed from
those rankings, so all are compared on exactly the same candidates. nDCG@10 and R@1 as `korpus eval` counts them.

Fusions:
- `bm25`, `dense` — one side;
- `rrf` — Σ 1/(60 + rank) over both;
- `routed` — korpus's default: RRF, or dense alone when BM25's best hit covers < 0.35 of the query;
- `weighted(a)` — RRF with BM25's votes weighted by coverage^a and dense's by 1 (a = 0: rrf; large a: BM25 counts
  only when it covers the whole query); `a` fitted on the other sets.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.retrieval import REAL_QUESTIONS, write_real_colloquial
from corpora import archive_eval
from corpora.sample_archive import write_sample_archive
from flows.corpus_refresh import run_refresh
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import Embedder
from tasks.retrieval.evaluation import _scores, import_beir, load_questions
from tasks.retrieval.query import clean_query
from tasks.retrieval.retriever import Retriever
from tasks.runtime.prefect_server import stop_server
from tasks.text.analysis import analyse

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("no-answer", "denied-access", "collection")
EXPONENTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
CUTS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01)


def build(keep: Path) -> dict[str, tuple[Path, Path]]:
    """Each set refreshed once: name → (data directory, questions)."""
    sets: dict[str, tuple[Path, Path]] = {}
    archive_q = keep / "archive-style.jsonl"
    archive_eval.write_questions(archive_q)
    xquad_q = keep / "xquad.jsonl"

    def archive(root: Path) -> None:
        archive_eval.write_archive(root)
        archive_eval.apply_changes(root)

    writers = {
        "archive-style": (archive, archive_q),
        "sample-archive": (write_sample_archive, ROOT / "eval" / "sample-archive.jsonl"),
        "xquad-ru": (lambda root: import_beir(ROOT / "eval" / "xquad-ru", root, xquad_q), xquad_q),
        "real-colloquial": (write_real_colloquial, REAL_QUESTIONS),
    }
    for name, (write, questions) in writers.items():
        root, data = keep / f"{name}-root", keep / f"{name}-data"
        if not (data / "korpus.db").is_file():
            write(root)
            run_refresh(root, Settings(data=data))
        sets[name] = (data, questions)
    return sets


def rankings(data: Path, questions: Path) -> list[dict]:
    """Per answerable question: both sides' rankings (set-aside parts removed), coverage, and which keys answer."""
    settings = Settings(data=data)
    embedder = Embedder(embed_model_path(settings))
    out = []
    with SqliteIndex(settings.index_path) as index:
        backend = index.searcher
        retriever = Retriever.from_settings(backend, settings)
        scopes = settings.default_scopes
        for q in load_questions(questions):
            if q.type in SKIP or not q.expected:
                continue
            text = clean_query(q.question)
            variants = backend.typo_variants(analyse(text))
            lexical = [k for k, _ in backend.lexical(text, q.scopes or scopes, 50, True, variants)]
            dense = [k for k, _ in backend.vector(embedder.embed_query(text), q.scopes or scopes, 50)]
            aside, dropped = retriever._set_aside(False, [*lexical, *dense], q.scopes or scopes)
            out_keys = set(aside) | dropped
            lexical = [k for k in lexical if k not in out_keys]
            dense = [k for k in dense if k not in out_keys]
            coverage = backend.coverage(text, lexical[0], variants) if lexical else 0.0
            hits = dict(backend.hits([(k, 0.0) for k in dict.fromkeys([*lexical, *dense])], q.scopes or scopes,
                                     regions=False))  # fmt: skip
            out.append({"type": q.type, "lexical": lexical, "dense": dense, "coverage": coverage, "hits": hits,
                        "expected": q.expected})  # fmt: skip
    return out


def fuse(case: dict, how: str, a: float = 0.0) -> list:
    lexical, dense, coverage = case["lexical"], case["dense"], case["coverage"]
    if how == "bm25":
        return lexical
    if how == "dense" or (how == "two-way" and coverage < 0.35):
        return dense
    if how == "two-way" and coverage >= a:
        return lexical
    weight = {"rrf": 1.0, "routed": 0.0 if coverage < 0.35 else 1.0, "weighted": coverage**a if a else 1.0,
              "two-way": 1.0}[how]  # fmt: skip
    scores: dict = {}
    for rank, key in enumerate(dense, start=1):
        scores[key] = scores.get(key, 0.0) + 1.0 / (60 + rank)
    for rank, key in enumerate(lexical, start=1):
        scores[key] = scores.get(key, 0.0) + weight / (60 + rank)
    return sorted(scores, key=lambda k: (-scores[k], k))


def measure(cases: list[dict], how: str, a: float = 0.0) -> dict[str, float]:
    rows = [_scores([c["hits"][k] for k in fuse(c, how, a)[:10]], c["expected"]) for c in cases]
    n = max(1, len(rows))
    return {"ndcg@10": round(sum(r["ndcg@10"] for r in rows) / n, 4),
            "r@1": round(sum(r["recall@1"] for r in rows) / n, 4)}  # fmt: skip


def fitted_cut(others: list[dict]) -> float:
    """Two-way routing's BM25-alone cut, fitted on the other sets' questions (best nDCG@10; the higher cut on a tie)."""
    return max(CUTS, key=lambda t: (measure(others, "two-way", t)["ndcg@10"], t))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="korpus-fusion-") as tmp:
        keep = args.keep or Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        home = keep / "prefect"
        home.mkdir(exist_ok=True)
        os.environ["PREFECT_HOME"] = str(home)
        try:
            sets = build(keep)
        finally:
            stop_server(home)
        cases = {name: rankings(data, questions) for name, (data, questions) in sets.items()}
    report: dict = {}
    for name, own in cases.items():
        others = [c for other, cs in cases.items() if other != name for c in cs]
        fitted = max(EXPONENTS, key=lambda a: (measure(others, "weighted", a)["ndcg@10"], -a))
        row = {how: measure(own, how) for how in ("bm25", "dense", "rrf", "routed")}
        row[f"weighted(a={fitted}, fitted on the others)"] = measure(own, "weighted", fitted)
        cut = fitted_cut(others)
        row[f"two-way(t={cut}, fitted on the others)"] = measure(own, "two-way", cut)
        for kind in sorted({c["type"] for c in own}):
            part = [c for c in own if c["type"] == kind]
            row[f"by type {kind} (n={len(part)})"] = {
                "bm25": measure(part, "bm25")["ndcg@10"], "dense": measure(part, "dense")["ndcg@10"],
                "routed": measure(part, "routed")["ndcg@10"], "weighted": measure(part, "weighted", fitted)["ndcg@10"],
                "two-way": measure(part, "two-way", cut)["ndcg@10"]}  # fmt: skip
        report[name] = row
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for name, row in report.items():
        print(f"== {name}")
        for how, figures in row.items():
            print(f"  {how:>44}: {figures}")
    assert all(not math.isnan(v) for r in report.values() for f in r.values() for v in f.values())


if __name__ == "__main__":
    main()

"""EVALUATE: retrieval quality over the indexed corpus, per question type, with leak counts; BEIR import.

An eval file holds one question per line:
`{"id", "question", "type", "expected": [{"source_id", "page": int|null, "contains": str?}], "scopes": [...]?}`.
A hit matches an expected item when the source id matches and, if given, the page and the phrase its text holds. Types:
normal, paraphrase, identifier, boundary, table, denied-access, changed-source, collection (answered by a
meta-document about the whole collection, docs/meta.md), no-answer. A `no-answer`
question passes when the best dense similarity stays below the threshold; a `denied-access` question is
answered correctly when nothing it may not see is returned (leaks must be 0 everywhere).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tasks.index.backend import SearchBackend
from tasks.retrieval.embedding import Embedder
from tasks.retrieval.query import clean_query, search_message, split_questions
from tasks.retrieval.retriever import Retriever

RETRIEVERS = ("bm25-nostem", "bm25", "dense", "hybrid-rrf", "hybrid", "hybrid+rerank")


class Expected(BaseModel):
    source_id: str
    page: int | None = None
    contains: str | None = None
    """A phrase the answering chunk holds (whitespace and case aside): finer than a page, for long pages and text
    files, and the same whatever chunk policy cut the page."""

    def holds(self, hit: dict[str, Any]) -> bool:
        if hit["source_id"] != self.source_id or (self.page is not None and hit["page"] != self.page):
            return False
        return self.contains is None or " ".join(self.contains.lower().split()) in " ".join(hit["text"].lower().split())


class Question(BaseModel):
    id: str
    question: str
    type: str = "normal"
    expected: list[Expected] = Field(default_factory=list)
    scopes: list[str] | None = None


def load_questions(path: Path) -> list[Question]:
    return [
        Question.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def _relevance_flags(hits: list[dict[str, Any]], expected: list[Expected]) -> list[bool]:
    """A hit is relevant when it matches an expected item not matched by a better-ranked hit: several chunks of
    one expected page count once, so nDCG stays within [0, 1]."""
    matched: set[int] = set()
    flags = []
    for hit in hits:
        index = next(
            (i for i, e in enumerate(expected) if i not in matched and e.holds(hit)),
            None,
        )
        flags.append(index is not None)
        if index is not None:
            matched.add(index)
    return flags


def _scores(hits: list[dict[str, Any]], expected: list[Expected]) -> dict[str, float]:
    # An item labelled twice (a message of two questions about one page) is one relevant item: counted twice, the
    # ideal DCG would hold a second hit no ranking can give, and a perfect answer would score 0.61.
    expected = list({(e.source_id, e.page, e.contains): e for e in expected}.values())
    flags = _relevance_flags(hits[:10], expected)
    first = next((i for i, f in enumerate(flags) if f), None)
    dcg = sum(1 / math.log2(i + 2) for i, f in enumerate(flags) if f)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(expected), 10)))
    return {
        "recall@1": float(any(flags[:1])),
        "recall@3": float(any(flags[:3])),
        "recall@5": float(any(flags[:5])),
        "recall@10": float(any(flags[:10])),
        "mrr@10": 1 / (first + 1) if first is not None else 0.0,
        "ndcg@10": dcg / ideal if ideal else 0.0,
    }


def evaluate(
    questions: list[Question],
    backend: SearchBackend,
    embedder: Embedder | None,
    retriever: str,
    default_scopes: list[str],
    no_answer_threshold: float,
    ranker: Retriever | None = None,
    each: bool = False,
) -> dict[str, Any]:
    """Run every question through one retriever; metrics overall and by type, and leak counts; with `each`, also
    every answerable question's nDCG@10 in the questions' order (`each`: for paired comparisons).

    `ranker` is the Retriever `korpus search` and the API build from the settings (`Retriever.from_settings`: depth,
    RRF constant, both routing cuts, reranker) — by default from the ambient settings, so an evaluation measures
    exactly what users are served (#48 item 3: `korpus eval` once built its own without the BM25-alone route).

    The overall figures (and `n`) cover answerable questions only: a no-answer question and a denied-access
    question with nothing to find pass or fail as a whole, so averaging them in would lift recall for free.
    They are reported apart, under `checks`, as the share that passed.
    """
    if ranker is None:
        from korpus.core.settings import Settings

        ranker = Retriever.from_settings(backend, Settings())
    per_type: dict[str, list[dict[str, float]]] = defaultdict(list)
    checks: dict[str, list[float]] = defaultdict(list)
    leaks = {"denied_access": 0, "superseded": 0}
    joined: list[bool] = []  # per searched question of a routed mode: did BM25 join the fusion?
    alone: list[bool] = []  # …and did it rank alone (dense left out: the query worded as the text)?
    low: list[bool] = []  # per searched question of the convex fusion: did BM25 weigh alpha_low (low coverage)?
    ndcg: list[float] = []  # per answerable question, in order
    # Each question read as korpus search and the API read a message (cleaned, split into its questions), and every
    # part of every question embedded in batched forward passes (801 questions: minutes → seconds).
    parts = [split_questions(clean_query(q.question)) for q in questions]
    flat = [part for message in parts for part in message]
    embedded = embedder.embed_queries(flat) if embedder is not None and flat else None
    starts = [sum(len(m) for m in parts[:n]) for n in range(len(parts))]
    for number, q in enumerate(questions):
        scopes = q.scopes or default_scopes
        own = embedded[starts[number] : starts[number] + len(parts[number])] if embedded is not None else None
        lexical_only = own is None or retriever in ("bm25", "bm25-nostem")

        closeness: list[float] = []  # per part searched: the best dense similarity of what the retriever returned

        def search(part: str, vector: Any, scopes: list[str] = scopes, closeness: list = closeness) -> list[dict]:
            decided: dict[str, Any] = {}
            hits = ranker.search(part, vector, scopes, k=10, mode=retriever, explain=decided)
            if decided.get("fusion") == "convex":
                low.append(decided["coverage"] is not None and decided["coverage"] < decided["min_coverage"])
            elif decided.get("coverage") is not None:
                joined.append(bool(decided["bm25_joined"]))
                alone.append(not decided.get("dense_joined", True))
            if decided.get("answer_similarity") is not None:
                closeness.append(decided["answer_similarity"])
            return hits

        hits = search_message(q.question, search, None if lexical_only else (lambda _p, own=own: own), k=10)
        leaks["denied_access"] += sum(h["access"] not in scopes for h in hits)
        leaks["superseded"] += sum(h["lifecycle"] != "current" for h in hits)
        if q.type == "no-answer":
            # the retriever's own answer: nothing returned, or (with a dense side) nothing returned that comes as
            # close to the question as an answer does; a lexical retriever that returns hits has answered
            checks[q.type].append(float(not hits or (bool(closeness) and max(closeness) < no_answer_threshold)))
        elif q.type == "denied-access" and not q.expected:
            checks[q.type].append(float(all(h["access"] in scopes for h in hits)))
        else:
            per_type[q.type].append(_scores(hits, q.expected))
            ndcg.append(per_type[q.type][-1]["ndcg@10"])
    answerable = [s for scores in per_type.values() for s in scores]
    mean = lambda rows, key: round(sum(r[key] for r in rows) / len(rows), 4) if rows else 0.0  # noqa: E731
    keys = ("recall@1", "recall@3", "recall@5", "recall@10", "mrr@10", "ndcg@10")
    return {
        "retriever": retriever,
        "n": len(answerable),
        **{k: mean(answerable, k) for k in keys},
        "by_type": {t: {"n": len(rows), **{k: mean(rows, k) for k in keys}} for t, rows in sorted(per_type.items())},
        "checks": {t: {"n": len(v), "passed": round(sum(v) / len(v), 4)} for t, v in sorted(checks.items())},
        "leaks": leaks,
        "routing": {
            "routed": len(joined),
            "bm25_joined": sum(joined),
            "dense_only": len(joined) - sum(joined),
            "bm25_only": sum(alone),
            "convex": len(low),
            "alpha_low": sum(low),
        },
    } | ({"each": ndcg} if each else {})


def _best_similarity(
    backend: SearchBackend, embedder: Embedder, q: Question, scopes: list[str], vector: Any = None
) -> float:
    """The highest dense similarity between the question and a chunk its scopes may see (0.0 when none)."""
    best = backend.vector(vector if vector is not None else embedder.embed_query(q.question), scopes, 1)
    return best[0][1] if best else 0.0


def calibrate_no_answer(
    questions: list[Question], backend: SearchBackend, embedder: Embedder, default_scopes: list[str]
) -> dict[str, Any]:
    """The no-answer threshold that best separates questions the corpus answers from those it does not: each
    question's best dense similarity among chunks it may see, and the cut (midway between two neighbouring values)
    with the highest balanced accuracy. Denied-access questions are left out (their answer exists, unseen)."""
    answerable, unanswerable = [], []
    for q in questions:
        if q.type == "denied-access":
            continue
        value = _best_similarity(backend, embedder, q, q.scopes or default_scopes)
        (unanswerable if q.type == "no-answer" else answerable).append(value)
    if not answerable or not unanswerable:
        raise ValueError("calibration needs both no-answer questions and answerable ones")
    values = sorted(set(answerable + unanswerable))
    cuts = [(a + b) / 2 for a, b in itertools.pairwise(values)] or values

    def balanced(cut: float) -> float:
        kept = sum(v >= cut for v in answerable) / len(answerable)
        refused = sum(v < cut for v in unanswerable) / len(unanswerable)
        return (kept + refused) / 2

    best_cut = max(cuts, key=lambda c: (balanced(c), -abs(c - sum(cuts) / len(cuts))))
    return {
        "threshold": round(best_cut, 4),
        "balanced_accuracy": round(balanced(best_cut), 4),
        "answerable": len(answerable),
        "no_answer": len(unanswerable),
        "answerable_min": round(min(answerable), 4),
        "no_answer_max": round(max(unanswerable), 4),
    }


def import_beir(
    folder: Path, out: Path, eval_out: Path | None = None, access: str = "public", split: str = "*"
) -> dict[str, int]:
    """A BEIR folder (corpus.jsonl, queries*.jsonl, qrels*.tsv) → a corpus folder of `<_id>.txt` files with a
    manifest, and an eval file whose expected source id is that file name. `split` names the question files read
    (`queries{split}.jsonl`, `qrels{split}.tsv`: '-report' for a set's reporting half; every one by default)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "korpus.yaml").write_text(f"defaults:\n  owner: beir-import\n  access: {access}\n", encoding="utf-8")
    passages = 0
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        title = doc.get("title") or ""
        body = f"{title}\n\n{doc['text']}" if title else doc["text"]
        (out / f"{doc['_id']}.txt").write_text(body + "\n", encoding="utf-8")
        passages += 1
    questions = 0
    if eval_out is not None:
        queries = {}
        for path in sorted(folder.glob(f"queries{split}.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                q = json.loads(line)
                queries[q["_id"]] = q["text"]
        relevant: dict[str, list[str]] = defaultdict(list)
        for path in sorted(folder.glob(f"qrels{split}.tsv")):
            with open(path, encoding="utf-8") as handle:
                for row in csv.reader(handle, delimiter="\t"):
                    if len(row) >= 3 and row[0] in queries and row[2].strip() not in ("0", "score"):
                        relevant[row[0]].append(row[1])
        with open(eval_out, "w", encoding="utf-8") as sink:
            for qid, docs in relevant.items():
                expected = [{"source_id": f"{d}.txt", "page": None} for d in docs]
                record = {"id": qid, "question": queries[qid], "type": "normal", "expected": expected}
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                questions += 1
    return {"passages": passages, "questions": questions}

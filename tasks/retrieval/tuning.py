"""`korpus tune-fusion`: the convex fusion's two weights refitted for one collection from its own labelled questions
(#66 item 3), and reported before and after on questions it was not fitted on.

The questions (a `korpus eval` file) are split once by a hash of their id into a fitting half and a checking half.
On the fitting half every pair of BM25 weights on the grid — `hybrid_alpha` for queries BM25 covers, and
`hybrid_alpha_low` below `hybrid_min_coverage` — is ranked by mean nDCG@10, exactly as `korpus search` ranks (the
same Retriever, with only the two weights changed); each question's BM25 list, kNN list, identifiers, coverage and
hits are asked of the index once and remembered (`Remembered`), so the grid costs the fusion alone. On the checking
half the fitted pair is compared with the settings in force, question by question: the mean difference of nDCG@10
and its 95 % paired-bootstrap interval. The fitted pair is recommended only when that interval lies above zero;
otherwise the settings in force stay (the default is the global fit, docs/retrieval.md). Nothing is written: the
recommendation is two settings to put in korpus.yaml or the environment.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tasks.retrieval.evaluation import Question, evaluate
from tasks.retrieval.retriever import Retriever

ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7)
"""`hybrid_alpha` candidates: BM25's weight for a query its best hit covers."""
ALPHAS_LOW = (0.1, 0.2, 0.3, 0.4, 0.5)
"""`hybrid_alpha_low` candidates: BM25's weight below the coverage cut."""
BOOTSTRAP_ROUNDS = 2000
REMEMBERED = ("prefetch", "typo_variants", "lexical", "vector", "identifiers", "coverage", "hits")


def _key(value: Any) -> Hashable:
    if isinstance(value, np.ndarray):
        return ("array", value.tobytes())
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_key(v) for v in value)
    return value


class Remembered:
    """A search backend whose reads are asked once per arguments and remembered (a tuning run's grid asks the same
    questions of it many times); everything else goes to the backend itself."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self._answers: dict[Hashable, Any] = {}
        self.asked = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._backend, name)
        if name not in REMEMBERED:
            return found

        def remembered(*args: Any, **kwargs: Any) -> Any:
            key = (name, _key(args), _key(kwargs))
            if key not in self._answers:
                self.asked += 1
                self._answers[key] = found(*args, **kwargs)
            return self._answers[key]

        return remembered


class RememberedEmbedder:
    """The embedder's query vectors, each embedded once."""

    def __init__(self, embedder: Any) -> None:
        self._embedder, self._vectors = embedder, {}

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, self._embedder.embed_queries(missing), strict=True))
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


def halves(questions: Sequence[Question]) -> tuple[list[Question], list[Question]]:
    """(fitting, checking): each question by a hash of its id, the same split every run."""
    fit, check = [], []
    for q in questions:
        (fit if hashlib.sha256(q.id.encode()).digest()[0] % 2 == 0 else check).append(q)
    return fit, check


def paired_interval(diffs: Sequence[float], seed: int = 66) -> dict[str, float]:
    """The mean of `diffs` and its 95 % paired-bootstrap interval (BOOTSTRAP_ROUNDS resamples, seeded)."""
    values = np.asarray(diffs, dtype=float)
    if not len(values):
        return {"mean": 0.0, "low": 0.0, "high": 0.0}
    means = values[np.random.default_rng(seed).integers(0, len(values), (BOOTSTRAP_ROUNDS, len(values)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": round(float(values.mean()), 4), "low": round(float(low), 4), "high": round(float(high), 4)}


def tune_fusion(
    questions: Sequence[Question],
    backend: Any,
    embedder: Any,
    ranker: Retriever,
    scopes: list[str],
    no_answer_threshold: float,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The fitting and the check (module docstring); `ranker` is the Retriever the settings in force build."""
    if ranker.fusion != "convex":
        raise ValueError("tune-fusion fits the convex fusion's weights; KORPUS_HYBRID_FUSION is not convex")
    fit, check = halves([q for q in questions if q.expected])
    if len(fit) < 2 or len(check) < 2:
        raise ValueError(f"too few answerable questions to fit and check ({len(fit)} + {len(check)}): label more")
    memo, vectors = Remembered(backend), RememberedEmbedder(embedder)

    def scores(part: list[Question], alpha: float, alpha_low: float | None) -> list[float]:
        tuned = replace(ranker, backend=memo, alpha=alpha, alpha_low=alpha_low)
        report = evaluate(part, memo, vectors, "hybrid", scopes, no_answer_threshold, tuned, each=True)
        return report["each"]

    grid = [(a, low) for a in ALPHAS for low in ALPHAS_LOW]
    fitted: dict[tuple[float, float | None], float] = {}
    for done, (alpha, low) in enumerate(grid, start=1):
        fitted[(alpha, low)] = float(np.mean(scores(fit, alpha, low)))
        if progress is not None:
            progress(done, len(grid))
    in_force = (ranker.alpha, ranker.alpha_low)
    fit_in_force = fitted[in_force] if in_force in fitted else float(np.mean(scores(fit, *in_force)))
    best = max(fitted, key=lambda pair: (round(fitted[pair], 6), -abs(pair[0] - in_force[0])))
    before, after = scores(check, *in_force), scores(check, *best)
    interval = paired_interval([a - b for a, b in zip(after, before, strict=True)])
    better = interval["low"] > 0
    return {
        "questions": {"fitting": len(fit), "checking": len(check)},
        "in_force": {"hybrid_alpha": in_force[0], "hybrid_alpha_low": in_force[1]},
        "fitted": {"hybrid_alpha": best[0], "hybrid_alpha_low": best[1]},
        "fitting_ndcg@10": {"in_force": round(fit_in_force, 4), "fitted": round(fitted[best], 4)},
        "checking_ndcg@10": {
            "in_force": round(float(np.mean(before)), 4),
            "fitted": round(float(np.mean(after)), 4),
            "fitted_minus_in_force": interval,
        },
        "recommend": "fitted" if better else "in_force",
        "settings": (
            {"KORPUS_HYBRID_ALPHA": best[0], "KORPUS_HYBRID_ALPHA_LOW": best[1]}
            if better
            else {"KORPUS_HYBRID_ALPHA": in_force[0], "KORPUS_HYBRID_ALPHA_LOW": in_force[1]}
        ),
        "index_reads": memo.asked,
    }

"""A query-dependent fusion, learned, against korpus's default rule — fitted leave-one-set-out (#66 item 2).

    .venv/bin/python benchmarks/fusion.py --keep DIR --cases CASES.pkl --intervals   # the cases, read once
    .venv/bin/python benchmarks/fusion_learned.py CASES.pkl [--json]

The cases are benchmarks/fusion.py's: every question of every set in six kinds, each part's BM25 and kNN top 50
with their scores and BM25's lexical coverage, read through korpus's own query path. The learned rule is the convex
fusion korpus serves (min-max, α·BM25 + (1 − α)·cosine) with α chosen per query from what the query and the two
ranked lists say at search time:

- BM25's lexical coverage of the query (the default's one signal) and the query's length in index terms;
- the spread of the best BM25 match: how many of BM25's top 10 score within 5 % of its first;
- each side's gap between its first and second hit (BM25's relative, dense's in cosine);
- the agreement of the two sides: the overlap of their top 10, and whether BM25's first is in dense's top 10.

The model is a softmax over the α grid {0, 0.1, …, 1} (a multinomial logistic regression on those features), fitted
by gradient ascent on the expected nDCG@10 of the α it picks, with L2 shrinkage; served as its most likely α. Serving
costs the features (read off the two lists korpus has anyway) and one 11 × 9 product: microseconds.

Out of sample: for each set, fitted on every case of the *other* fitting sets (DaNetQA's fitting half among them;
DaNetQA's reporting half and real-typed are never fitted on), reported on the held-out set, per kind, against the
default as served and against the better side — each a 95 % paired bootstrap of nDCG@10 per question. The rule
would replace the default only where it is above it on every set of at least 300 questions and nowhere below the
better side by more than 0.005.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fusion import ALPHAS, KINDS, REPORTED_ONLY, SERVED_DEFAULT, better_side, mean, score
from tasks.retrieval.fusion import convex_fuse
from tasks.retrieval.tuning import paired_interval

LEARNED = "convex minmax, α learned from the lists"
FEATURES = ("coverage", "terms", "bm25 spread", "bm25 gap", "dense gap", "top-10 overlap", "bm25 first in dense")


def features(part: dict) -> np.ndarray:
    """The signals of one part (one question of a message), each scaled to about [0, 1]."""
    lexical, dense = part["lexical"], part["dense"]
    if not lexical:
        return np.zeros(len(FEATURES))
    b = [s for _, s in lexical[:10]]
    d = [s for _, s in dense[:2]]
    top_dense = [k for k, _ in dense[:10]]
    return np.array(
        [
            part["coverage"],
            min(part.get("terms", 0), 12) / 12,
            sum(s >= 0.95 * b[0] for s in b) / 10,
            (b[0] - b[1]) / b[0] if len(b) > 1 and b[0] > 0 else 1.0,
            (d[0] - d[1]) * 10 if len(d) > 1 else 0.0,
            len({k for k, _ in lexical[:10]} & set(top_dense)) / 10,
            float(lexical[0][0] in top_dense),
        ]
    )


@dataclass
class Learned:
    """Weights of the softmax over the α grid (one row an α: a bias and a weight a standardised feature)."""

    weights: np.ndarray
    fitted_on: int
    centre: np.ndarray
    scale: np.ndarray

    def alpha(self, part: dict) -> float:
        if not part["lexical"]:
            return 0.0
        x = np.concatenate([[1.0], (features(part) - self.centre) / self.scale])
        return ALPHAS[int(np.argmax(self.weights @ x))]

    def __repr__(self) -> str:
        return f"learned on {self.fitted_on} cases"


def ranking(part: dict, model: Learned | Trees) -> list:
    return [k for k, _ in convex_fuse(part["lexical"], part["dense"], model.alpha(part), "minmax")]


def learned_score(case: dict, model: Learned | Trees) -> dict[str, float]:
    """`fusion.score` for the learned rule: each part fused with its own α, parts interleaved as served."""
    from tasks.retrieval.evaluation import _scores
    from tasks.retrieval.query import interleave

    read = case["read"]
    parts = read["parts"][:-1] if len(read["parts"]) > 1 else read["parts"]
    results = [[read["hits"][k] for k in ranking(part, model)] for part in parts]
    hits = results[0][:10] if len(results) == 1 else interleave(results, 10)
    figures = _scores(hits, case["expected"])
    return {"ndcg@10": figures["ndcg@10"], "r@1": figures["recall@1"]}


def gains(cases: list[dict]) -> np.ndarray:
    """nDCG@10 of each case under every α of the grid, the same α for all its parts (cases × α)."""
    return np.array([[score(c, "convex minmax", a)["ndcg@10"] for a in ALPHAS] for c in cases])


def fit(cases: list[dict], gain: np.ndarray, shrink: float = 0.001, steps: int = 2000, rate: float = 1.0) -> Learned:
    """Gradient ascent on the mean expected nDCG@10 of a softmax policy over the α grid, minus shrink·|W|², on
    features standardised over the pool."""
    raw = np.array([features(c["read"]["parts"][0]) for c in cases])
    centre, scale = raw.mean(axis=0), raw.std(axis=0) + 1e-6
    x = np.hstack([np.ones((len(cases), 1)), (raw - centre) / scale])
    weights = np.zeros((len(ALPHAS), x.shape[1]))
    for _ in range(steps):
        logits = x @ weights.T
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        expected = (p * gain).sum(axis=1, keepdims=True)
        grad = ((p * (gain - expected)).T @ x) / len(cases) - 2 * shrink * weights
        weights += rate * grad
    return Learned(weights, len(cases), centre, scale)


@dataclass
class Trees:
    """Gradient-boosted trees (scikit-learn's histogram GBT) predicting a case's nDCG@10 from its features and an α
    of the grid; served as the α of the best prediction."""

    model: Any
    fitted_on: int

    def alpha(self, part: dict) -> float:
        if not part["lexical"]:
            return 0.0
        x = np.hstack([np.tile(features(part), (len(ALPHAS), 1)), np.array(ALPHAS)[:, None]])
        return ALPHAS[int(np.argmax(self.model.predict(x)))]

    def __repr__(self) -> str:
        return f"trees on {self.fitted_on} cases"


def fit_trees(cases: list[dict], gain: np.ndarray, seed: int = 0) -> Trees:
    """One row a case and α: its features and the α → the case's nDCG@10 under that α. Shallow trees, early
    stopping on a tenth of the rows, so a set's few hundred questions cannot be memorised."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    raw = np.array([features(c["read"]["parts"][0]) for c in cases])
    x = np.vstack([np.hstack([raw, np.full((len(cases), 1), a)]) for a in ALPHAS])
    y = np.concatenate([gain[:, i] for i in range(len(ALPHAS))])
    model = HistGradientBoostingRegressor(
        max_depth=3,
        learning_rate=0.05,
        max_iter=400,
        min_samples_leaf=40,
        l2_regularization=1.0,
        early_stopping=True,
        validation_fraction=0.1,
        random_state=seed,
    )
    return Trees(model.fit(x, y), len(cases))


def study(cases: list[dict], trees: bool = False) -> dict:
    rule, p = SERVED_DEFAULT
    fitting = [c for c in cases if c["set"] not in REPORTED_ONLY]
    gain = dict(zip(map(id, cases), gains(cases), strict=True))
    out: dict = {}
    for name in sorted({c["set"] for c in cases}):
        pool = [c for c in fitting if c["set"] != name]
        model = (fit_trees if trees else fit)(pool, np.array([gain[id(c)] for c in pool]))
        for kind in KINDS:
            own = [c for c in cases if c["set"] == name and c["kind"] == kind]
            if not own:
                continue
            learned = [learned_score(c, model)["ndcg@10"] for c in own]
            served = [score(c, rule, p)["ndcg@10"] for c in own]
            sides = {side: mean(own, side) for side in ("bm25", "dense")}
            better = better_side(sides)
            side = [score(c, better)["ndcg@10"] for c in own]
            out[f"{name} | {kind}"] = {
                "n": len(own),
                "served": round(float(np.mean(served)), 4),
                "learned": round(float(np.mean(learned)), 4),
                "better side": better,
                "learned − served": paired_interval([a - b for a, b in zip(learned, served, strict=True)]),
                "learned − better": paired_interval([a - b for a, b in zip(learned, side, strict=True)]),
                "served − better": paired_interval([a - b for a, b in zip(served, side, strict=True)]),
            }
    return out


def print_table(report: dict) -> None:
    print("| set | kind | n | served | learned | learned − served [95 %] | learned − better side [95 %] |")
    print("|---|---|---|---|---|---|---|")
    for cell, row in report.items():
        name, kind = cell.split(" | ")
        a, b = row["learned − served"], row["learned − better"]
        print(
            f"| {name} | {kind} | {row['n']} | {row['served']:.3f} | {row['learned']:.3f} "
            f"| {a['mean']:+.4f} [{a['low']:+.4f}, {a['high']:+.4f}] "
            f"| {b['mean']:+.3f} [{b['low']:+.3f}, {b['high']:+.3f}] ({row['better side']}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path, help="the pickle `fusion.py --cases` wrote")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--trees", action="store_true", help="gradient-boosted trees instead of the softmax")
    args = parser.parse_args()
    cases = pickle.loads(args.cases.read_bytes())
    report = study(cases, trees=args.trees)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print_table(report)


if __name__ == "__main__":
    main()

"""The retriever's arithmetic: reciprocal rank fusion and identifier pins (the routing measure every backend
computes is `tasks.index.backend.idf_coverage`)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)


def rrf_fuse(rankings: Sequence[Sequence[Key]], k: int) -> list[tuple[Key, float]]:
    """Reciprocal rank fusion: score = Σ 1/(k + rank), rank starting at 1; ties broken by the key."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def pin_first(pinned: Sequence[Key], fused: Sequence[tuple[Key, float]]) -> list[tuple[Key, float]]:
    """Exact identifier matches in front (scores above any RRF score, in their own order), then the fusion."""
    first = [(key, 1.0 + 1.0 / (rank + 1)) for rank, key in enumerate(pinned)]
    taken = set(pinned)
    return first + [(key, score) for key, score in fused if key not in taken]


NORMALISATIONS = ("minmax", "zscore", "tmm")
THEORETICAL_MIN = {"bm25": 0.0, "dense": -1.0}  # BM25 scores are ≥ 0, cosine ≥ -1


def normalised(scored: Sequence[tuple[Key, float]], how: str, side: str) -> dict[Key, float]:
    """One side's scores on a common scale (Bruch, Gai and Ingber 2023): `minmax` over the returned list, `zscore`,
    or `tmm` — the side's theoretical minimum to the returned maximum. A list whose scores are all equal maps to 1
    (each is the side's best). A key the side did not return scores below all it returned: 0 for minmax and tmm
    (see `convex_fuse`), one below the lowest z-score for zscore."""
    if not scored:
        return {}
    values = [score for _, score in scored]
    top = max(values)
    if how == "zscore":
        mean = sum(values) / len(values)
        spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
        return {key: (score - mean) / spread for key, score in scored}
    low = min(values) if how == "minmax" else THEORETICAL_MIN[side]
    if top == low:
        return {key: 1.0 for key, _ in scored}
    return {key: (score - low) / (top - low) for key, score in scored}


def convex_fuse(
    lexical: Sequence[tuple[Key, float]], dense: Sequence[tuple[Key, float]], alpha: float, how: str = "tmm"
) -> list[tuple[Key, float]]:
    """Score fusion: alpha × normalised BM25 + (1 - alpha) × normalised cosine over the union of both sides; a key
    one side did not return takes that side's floor. Ties broken by the key."""
    lex, den = normalised(lexical, how, "bm25"), normalised(dense, how, "dense")
    lex_floor = min(lex.values(), default=0.0) - 1 if how == "zscore" else 0.0
    den_floor = min(den.values(), default=0.0) - 1 if how == "zscore" else 0.0
    scores = {key: alpha * lex.get(key, lex_floor) + (1 - alpha) * den.get(key, den_floor) for key in {**lex, **den}}
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))

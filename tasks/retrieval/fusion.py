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

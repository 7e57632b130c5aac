"""What a search backend answers: the small set of primitives the `Retriever` composes into every search mode.

A backend ranks; it never fuses, routes, pins or reranks (the `Retriever` does, once, for every backend), and it
applies the caller's scopes and the lifecycle filter inside every primitive, before any top-N cut, so a chunk the
caller may not see can never take a rank. Keys are whatever names a chunk cheaply in the backend (a SQLite rowid,
an OpenSearch document id); `hits` turns them into the hit dicts every caller reads.

Implemented by `tasks.index.sqlite.SqliteSearch` (the embedded default) and `tasks.index.opensearch.OpenSearchIndex`.
A new backend is one class with these methods; `tests/integration/test_retriever_backends.py` runs the same
retriever-level tests over each.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

SEARCH_MODES = ("hybrid", "hybrid+rerank", "hybrid-rrf", "bm25", "bm25-nostem", "dense")
HYBRID_MODES = ("hybrid", "hybrid+rerank", "hybrid-rrf")


class IndexMismatchError(RuntimeError):
    """The index was built with another embedding model or dimension than the one asked to query it."""


def idf_coverage(terms: Sequence[str], held: Iterable[str], df: dict[str, int], total: int) -> float:
    """The IDF-weighted share of `terms` found among `held` (a chunk's terms); `df` gives document frequencies
    out of `total` documents (a term missing from `df` counts as rare). The routing measure of every backend."""
    held = set(held)
    idf = {t: math.log(1.0 + max(total - df.get(t, 0) + 0.5, 0.5) / (df.get(t, 0) + 0.5)) for t in terms}
    return sum(idf[t] for t in terms if t in held) / sum(idf.values())


class SearchBackend(Protocol):
    name: str
    """'sqlite' or 'opensearch': said in --explain and /health."""

    def snapshot(self) -> AbstractContextManager[Any]:
        """One consistent view for every primitive of a search (SQLite: one read transaction; a cluster: none)."""
        ...

    def prefetch(
        self, query: str, vector: np.ndarray | None, scopes: Sequence[str], depth: int, identifiers: Sequence[str]
    ) -> None:
        """What a search is about to ask — BM25 of `query` (no typo variants), kNN of `vector` (None: no dense side),
        the identifier matches — asked at once, inside `snapshot`, for the primitives to read (a cluster: one
        round trip instead of one a primitive). The answers are the primitives' own; the embedded index, whose
        primitives cost no round trip, does nothing."""
        ...

    def check_query_vector(self, vector: np.ndarray) -> None:
        """Raise IndexMismatchError when the vector's dimension is not the index's."""
        ...

    def lexical(
        self, query: str, scopes: Sequence[str], depth: int, stemmed: bool, variants: dict[str, list[str]]
    ) -> list[tuple[Hashable, float]]:
        """BM25 over the Russian-analysed text with `variants` (typo variants of unknown terms) joined in, or
        (stemmed=False) over the unstemmed text; best first."""
        ...

    def vector(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[Hashable, float]]:
        """kNN by cosine similarity; best first."""
        ...

    def identifiers(self, identifiers: Sequence[str], scopes: Sequence[str], depth: int) -> list[Hashable]:
        """Chunks holding the identifiers exactly (ИНН, ОГРН, document numbers), most identifiers matched first."""
        ...

    def typo_variants(self, terms: Sequence[str], scopes: Sequence[str] | None = None) -> dict[str, list[str]]:
        """Indexed terms a typo away from each analysed query term the index does not know (tasks/text/typos.py),
        judged over the chunks `scopes` may see: a caller is never offered a word only other scopes hold."""
        ...

    def coverage(self, query: str, key: Hashable, variants: dict[str, list[str]]) -> float:
        """The IDF-weighted share of the query's analysed terms the chunk holds (`idf_coverage`)."""
        ...

    def hits(
        self, scored: Sequence[tuple[Hashable, float]], scopes: Sequence[str], regions: bool = True
    ) -> list[tuple[Hashable, dict[str, Any]]]:
        """(key, hit dict with its score), in the given order; a backend without snapshots re-applies the filters
        here (a chunk switched out since it was ranked is dropped). `regions=False`: the hits' `regions` are left
        empty (the retriever's look at up to 150 candidates needs none: unpacking them cost 1.8 ms a query)."""
        ...

    def health(self) -> dict[str, Any]:
        """{"backend", "status": "ok" | "unreachable", "chunks_served"} for /health and `korpus status`."""
        ...

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        """`search_exact`: every occurrence of the phrase (tasks/index/exact.py locates them)."""
        ...

"""The retriever: every search mode composed once from a backend's primitives (tasks/index/backend.py).

    >>> retriever = Retriever.from_settings(backend_for(settings, index), settings)  # tasks/index/registry.py
    >>> retriever.search("договор поставки", vector, scopes=["public"], k=5)

- **hybrid** (default): convex fusion, `alpha` × min-max BM25 + (1 - `alpha`) × min-max cosine over both top lists,
  BM25 weighing `alpha_low` (0.3) instead of `alpha` (0.5) when its best hit holds less than `min_coverage` (0.35) of
  the query (IDF-weighted): a paraphrase's stray match keeps a little weight, a few typed words that do name the
  answer keep theirs. Fitted leave-one-set-out on six kinds of question over five sets, it is below the better side
  in one cell of 30, the routed RRF in three (benchmarks/fusion.py, docs/retrieval.md).
- `fusion="routed"` (KORPUS_HYBRID_FUSION): RRF over BM25 and kNN, *routed* — below `min_coverage` BM25's ranking is
  left out (any weight it kept would reorder dense's top ranks, which RRF spaces only 1/(k+r) - 1/(k+r+1) apart);
  at `lexical_coverage` (0.6) or more the query is worded as the text and BM25 ranks alone. Better on paraphrases
  over one long document, 0.02 below BM25 on typed, colloquial and two-question messages of the hand-written
  real-typed set.
- **hybrid-rrf**: plain equal-weight RRF, the baseline evaluations compare against; **hybrid+rerank**: the hybrid
  fusion's top `rerank_top` reordered by a cross-encoder.
- **bm25**, **bm25-nostem** (no Russian morphology: the baseline), **dense**: one side alone.

Meta-documents (docs/meta.md) answer questions about the collection (`is_collection_question`): only for those do
their chunks take part in the ranking as any chunk does. For every other question they are taken out of both sides
before routing and fusion (and out of the identifier pins: the organisations register holds every ИНН) and listed
after all document hits, so the documents rank exactly as they would with meta-documents off. A part of an empty
meta-document («Записей нет.») is never a hit.

In every mode that reads BM25 (not bm25-nostem), a query carrying an ИНН, ОГРН or document number wants that
document: exact identifier matches rank first, whatever either side thought of them. An unknown query term is
searched with its typo variants (tasks/text/typos.py). Scopes are enforced here and inside every backend primitive: no
scopes, no hits. `explain`, when given, is filled with how the ranking was decided (`korpus search --explain`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from korpus.core.datamodel import FURNITURE_SECTION, META_PREFIX, NO_ENTRIES
from tasks.index.backend import HYBRID_MODES, SEARCH_MODES, SearchBackend
from tasks.index.exact import mentions
from tasks.retrieval.collection import is_collection_question
from tasks.retrieval.fusion import convex_fuse, pin_first, rrf_fuse
from tasks.text.analysis import analyse
from tasks.text.identifiers import extract_identifiers

if TYPE_CHECKING:
    from korpus.core.settings import Settings
    from tasks.retrieval.rerank import Reranker


@dataclass
class Retriever:
    backend: SearchBackend
    depth: int = 50
    rrf_k: int = 60
    min_coverage: float = 0.35
    lexical_coverage: float = 0.6
    fusion: str = "convex"
    alpha: float = 0.5
    alpha_low: float | None = 0.3  # convex: BM25's weight when its best hit covers < min_coverage (None: alpha)
    reranker: Reranker | None = None
    rerank_top: int = 20

    @classmethod
    def from_settings(cls, backend: SearchBackend, settings: Settings) -> Retriever:
        """Depth, RRF constant, routing threshold and reranker (loaded on first use) from the settings."""
        from tasks.retrieval.rerank import shared_reranker

        reranker = shared_reranker(str(settings.rerank_model)) if settings.rerank_model is not None else None
        return cls(
            backend,
            depth=settings.rrf_depth,
            rrf_k=settings.rrf_k,
            min_coverage=settings.hybrid_min_coverage,
            lexical_coverage=settings.hybrid_lexical_coverage,
            fusion=settings.hybrid_fusion,
            alpha=settings.hybrid_alpha,
            alpha_low=settings.hybrid_alpha_low,
            reranker=reranker,
            rerank_top=settings.rerank_top,
        )

    def check(self, mode: str, vector: np.ndarray | None) -> None:
        """Refuse what cannot be searched, with a message for a person."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; one of {', '.join(SEARCH_MODES)}")
        if mode == "hybrid+rerank" and self.reranker is None:
            raise ValueError("hybrid+rerank needs a rerank model: set KORPUS_RERANK_MODEL to a CrossEncoder folder")
        if mode in (*HYBRID_MODES, "dense") and vector is None:
            raise ValueError("dense and hybrid search need a query vector")
        if vector is not None:
            self.backend.check_query_vector(vector)

    def search(
        self,
        query: str,
        vector: np.ndarray | None,
        scopes: Sequence[str],
        k: int = 10,
        mode: str = "hybrid",
        explain: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """The top `k` hits of `mode` among current chunks the scopes may see. Every primitive reads one snapshot
        of the backend: a version switch committed meanwhile is seen by all of them or by none."""
        self.check(mode, vector)
        if not scopes:
            return []
        with self.backend.snapshot():
            fused, pinned, sides = self._ranked(query, vector, scopes, mode, explain)
            if explain is not None and "dense_scores" in explain:
                # how close the answer comes to the question: the best dense similarity among the hits returned
                # (a hit below the dense side's depth counts as its last score, a bound) — the no-answer check
                scores = explain.pop("dense_scores")
                floor = min(scores.values(), default=0.0)
                explain["answer_similarity"] = max((scores.get(key, floor) for key, _ in fused[:k]), default=None)
            if mode != "hybrid+rerank":
                return self._explained(self.backend.hits(fused[:k], scopes), sides, explain)
            return self._reranked(query, fused, pinned, scopes, k)

    def _ranked(
        self, query: str, vector: np.ndarray | None, scopes: Sequence[str], mode: str, explain: dict[str, Any] | None
    ) -> tuple[list[tuple[Hashable, float]], int, dict[str, list[Hashable]]]:
        """(fused ranking, how many identifier pins lead it, each side's ranking)."""
        depth, sides, rankings = self.depth, {}, []
        lexical: list[Hashable] = []
        if mode == "bm25-nostem":
            lexical = [key for key, _ in self.backend.lexical(query, scopes, depth, False, {})]
        reads_bm25 = mode in HYBRID_MODES or mode == "bm25"
        variants: dict[str, list[str]] = {}
        lexical_scored: list[tuple[Hashable, float]] = []
        if reads_bm25:
            terms = analyse(query)
            wants_dense = vector is not None and mode in HYBRID_MODES
            self.backend.prefetch(query, vector if wants_dense else None, scopes, depth, extract_identifiers(query))
            variants = self.backend.typo_variants(terms, scopes)  # one lookup for ranking, coverage and explain
            lexical_scored = self.backend.lexical(query, scopes, depth, True, variants)
            lexical = [key for key, _ in lexical_scored]
        dense_scored = self.backend.vector(vector, scopes, depth) if mode in HYBRID_MODES or mode == "dense" else []
        exact = self.backend.identifiers(extract_identifiers(query), scopes, depth) if reads_bm25 else []
        collection = is_collection_question(query)
        aside, dropped = self._set_aside(collection, [*lexical, *(k for k, _ in dense_scored), *exact], scopes)
        out = dropped | set(aside)
        lexical, exact = [k for k in lexical if k not in out], [k for k in exact if k not in out]
        lexical_scored = [(key, score) for key, score in lexical_scored if key not in out]
        dense_scored = [(key, score) for key, score in dense_scored if key not in out]
        dense = [key for key, _ in dense_scored]
        if self.fusion == "convex" and mode in ("hybrid", "hybrid+rerank"):
            alpha, coverage = self.alpha, None
            if self.alpha_low is not None:  # a low-coverage query is likely a paraphrase: BM25 weighs less
                coverage = self.backend.coverage(query, lexical[0], variants) if lexical else 0.0
                alpha = self.alpha_low if coverage < self.min_coverage else alpha
            if explain is not None:
                explain.update(terms=terms, typo_variants=variants, coverage=coverage, min_coverage=self.min_coverage)
            return self._convex(lexical_scored, dense_scored, exact, aside, explain, alpha)
        if mode == "bm25-nostem":
            rankings.append(lexical)
        alone = False  # BM25 ranks alone: the query is worded as the text (two-way routing)
        if reads_bm25:
            routed = mode in ("hybrid", "hybrid+rerank") and bool(lexical)
            coverage = self.backend.coverage(query, lexical[0], variants) if routed else None
            joined = not (routed and coverage < self.min_coverage)
            alone = routed and coverage >= self.lexical_coverage  # dense would only blur its exact matches
            if joined:
                rankings.append(lexical)
            sides["bm25"] = lexical
            if explain is not None:
                explain.update(
                    terms=terms,
                    typo_variants=variants,
                    coverage=coverage,
                    min_coverage=self.min_coverage,
                    bm25_joined=joined,
                    lexical_coverage=self.lexical_coverage,
                    dense_joined=not alone,
                )
        if mode in HYBRID_MODES or mode == "dense":
            sides["dense"] = dense
            if not alone:
                rankings.append(dense)
            if explain is not None:
                explain["dense_scores"] = dict(dense_scored)
        fused = rrf_fuse(rankings, self.rrf_k)
        if reads_bm25:
            fused = pin_first(exact, fused)
        # meta parts set aside: after every document hit, in the order the sides found them
        fused += [(key, 0.0) for key in aside]
        if explain is not None:
            explain.update(
                backend=self.backend.name,
                identifier_pins=len(exact),
                meta_aside=len(aside),
                collection_question=collection,
            )
        return fused, len(exact), sides

    def _convex(
        self,
        lexical: list[tuple[Hashable, float]],
        dense: list[tuple[Hashable, float]],
        exact: list[Hashable],
        aside: list[Hashable],
        explain: dict[str, Any] | None,
        alpha: float,
    ) -> tuple[list[tuple[Hashable, float]], int, dict[str, list[Hashable]]]:
        """Score fusion (hybrid_fusion=convex): alpha × min-max BM25 + (1 - alpha) × min-max cosine, identifier pins
        first and set-aside meta parts last, as in the routed fusion."""
        fused = pin_first(exact, convex_fuse(lexical, dense, alpha, "minmax")) + [(key, 0.0) for key in aside]
        if explain is not None:
            explain.update(
                fusion="convex",
                alpha=alpha,
                bm25_joined=bool(lexical),
                dense_joined=bool(dense),
                dense_scores=dict(dense),
                backend=self.backend.name,
                identifier_pins=len(exact),
                meta_aside=len(aside),
            )
        return fused, len(exact), {"bm25": [k for k, _ in lexical], "dense": [k for k, _ in dense]}

    def _set_aside(
        self, collection: bool, keys: Sequence[Hashable], scopes: Sequence[str]
    ) -> tuple[list[Hashable], set[Hashable]]:
        """(meta parts and page furniture to list after the documents, in order; parts never to return). For a
        collection question meta parts are not set aside; parts of an empty meta-document are dropped whatever the
        question; a page's furniture (a stamp frame) always waits behind the evidence."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return [], set()
        hits = self.backend.hits([(key, 0.0) for key in unique], scopes, regions=False)
        meta = {key for key, hit in hits if hit["source_id"].startswith(META_PREFIX)}
        furniture = {key for key, hit in hits if hit.get("section_path") == [FURNITURE_SECTION]}
        dropped = {key for key, hit in hits if key in meta and NO_ENTRIES in hit["text"]}
        aside = [key for key, _ in hits if key in furniture or (key in meta and not collection)]
        return [key for key in aside if key not in dropped], dropped

    def _reranked(
        self, query: str, fused: list[tuple[Hashable, float]], pinned: int, scopes: Sequence[str], k: int
    ) -> list[dict[str, Any]]:
        """The cross-encoder reorders the fused top-N that the filters already passed; identifier matches keep
        their place in front of it."""
        assert self.reranker is not None
        hits = [hit for _key, hit in self.backend.hits(fused[: max(k, self.rerank_top + pinned)], scopes)]
        front, rest = hits[:pinned], hits[pinned : pinned + self.rerank_top]
        for hit, score in zip(rest, self.reranker.scores(query, [h["text"] for h in rest]), strict=True):
            hit["fused_score"], hit["score"] = hit["score"], round(score, 6)
        rest.sort(key=lambda h: -h["score"])
        return (front + rest + hits[pinned + self.rerank_top :])[:k]

    @staticmethod
    def _explained(
        found: list[tuple[Hashable, dict[str, Any]]], sides: dict[str, list[Hashable]], explain: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """The hits; with each one's place on either side of the fusion when the caller asked how the ranking was
        decided."""
        if explain is None:
            return [hit for _key, hit in found]
        ranks = {side: {key: n + 1 for n, key in enumerate(keys)} for side, keys in sides.items()}
        for key, hit in found:
            hit["explain"] = {
                "bm25_rank": ranks.get("bm25", {}).get(key),
                "dense_rank": ranks.get("dense", {}).get(key),
            }
        return [hit for _key, hit in found]

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        """`search_exact`: every occurrence of `text` in current chunks the scopes may see."""
        return self.backend.exact_occurrences(text, list(scopes), limit=limit)

    def count_mentions(self, text: str, scopes: Sequence[str]) -> dict[str, Any]:
        """`count_mentions`: how often `text` occurs, per source, in what the scopes may see."""
        return mentions(self.backend.exact_occurrences(text, list(scopes), limit=0))


def retrieve(
    backend: SearchBackend,
    query: str,
    vector: np.ndarray | None,
    scopes: Sequence[str],
    k: int = 10,
    mode: str = "hybrid",
    explain: dict[str, Any] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """One search with explicit options (`depth`, `rrf_k`, `min_coverage`, `reranker`, `rerank_top`): for tests,
    benchmarks and evaluations that vary them; the product's paths use `Retriever.from_settings`."""
    return Retriever(backend, **options).search(query, vector, scopes, k=k, mode=mode, explain=explain)

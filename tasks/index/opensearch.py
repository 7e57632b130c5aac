"""The OpenSearch backend (opensearch-py): the embedded index's behaviour on a cluster.

- An index template for `<prefix>-chunks-*`: `text` analysed by the built-in `russian` analyzer with an unstemmed
  `text.exact` sub-field, `identifiers` and the filter fields as keywords, `embedding` a `knn_vector` (HNSW, lucene
  engine, cosine), `dynamic: strict`. Index names carry the embedding model and dimension
  (`korpus-chunks-e5-small-384`); readers and writers use the alias `korpus-chunks`.
- A version switch: the new version's chunks are bulk-indexed as `staged` (never served), then one bulk of partial
  updates makes them `current` and the old ones `superseded`, with `refresh=wait_for`. Retire and relabel are
  bulk partial updates too. Filters — lifecycle `current` and the caller's access scopes — sit inside every query.
- The catalog is the authority (tasks/index/catalog_check.py): with `catalog` given (always, as korpus serves), a
  hit is returned only if the SQLite catalog holds its chunk current and visible to the caller, read in the same
  request, and with the catalog's access rule; a sync records the catalog generation it reached, and `health` says
  `behind` while the catalog has changes the cluster lacks.
- Search: the `SearchBackend` primitives (tasks/index/backend.py) — BM25 (`match` on `text` with the typo
  variants of unknown terms as `terms`, variants found by the cluster's term suggester), kNN (lucene-engine
  efficient filtering), identifier matches, routing coverage from the query terms' document frequencies and the
  terms the hit holds, hits fetched by id under the same filters. A search asks them in **one round trip**
  (`prefetch`: one `_msearch` of BM25, kNN, identifiers and the terms' document counts not kept since the last
  sync, the hits' fields returned with them; the terms a hit holds are read from its analysed text); the primitives
  then read that answer, and ask the cluster themselves only for what it did not hold (a typo's variants). Fusion,
  routing, pins and rerank are the `Retriever`'s, the same code as for the embedded index. (The hybrid query with
  an RRF search pipeline is not used: routing needs BM25's ranking before it decides whether BM25 joins, so the
  pipeline would run BM25 twice.)

What runs where: every path here — admin, lexical, kNN under filters, hybrid, routing, exact and count, the
mirror — is tested against a real OpenSearch 2.19 node with the k-NN plugin, assembled from Maven Central and
started once per test session (infra/opensearch/node, tasks/runtime/opensearch_node.py); `make test-opensearch`
runs that suite alone.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from korpus.core.datamodel import Chunk, Source
from korpus.core.settings import Settings
from tasks.index import catalog_check
from tasks.index.backend import IndexMismatchError, idf_coverage
from tasks.index.exact import locate_occurrences, no_occurrences
from tasks.index.opensearch_requests import (
    HIT_FIELDS,
    REGIONS_FIELD,
    STATE_FIELDS,
    absent,
    chunk_document,
    cluster_not_whole,
    count_body,
    identifier_body,
    index_name,
    index_template,
    knn_body,
    lexical_body,
    server_version,
    visible,
    visible_holds_body,
)
from tasks.index.pg_catalog import CatalogUnavailable, PgCatalog
from tasks.runtime.retry import RetryPolicy, TransientError, with_retries
from tasks.text.analysis import analyse, words
from tasks.text.regions import unpack
from tasks.text.typos import MIN_LENGTH, expand

log = logging.getLogger("korpus.opensearch")

if TYPE_CHECKING:
    from tasks.index.sqlite import SqliteIndex

# A cluster restarting, overloaded or behind a restarting proxy: worth trying again (with backoff).
RETRY_STATUSES = frozenset({429, 502, 503, 504})
T = TypeVar("T")


class OpenSearchIndex:
    """Chunks on an OpenSearch cluster behind the alias `<prefix>-chunks`.

    >>> index = OpenSearchIndex(OpenSearch(hosts=["http://localhost:9200"]))
    >>> index.ensure("e5-small", 384)
    >>> Retriever(index).search("договор поставки", vector, scopes=["public"], k=5)
    """

    def __init__(
        self,
        client: Any,
        prefix: str = "korpus",
        retry: RetryPolicy | None = None,
        catalog: Path | catalog_check.SqliteCatalog | PgCatalog | None = None,
        max_lag: float = 0.0,
        knn_candidates: int = 0,
        embedder: Callable[[], Any] | None = None,
    ) -> None:
        self.client = client
        self.embedder = embedder
        """The configured embedding model, loaded when first called: what gives a chunk its vector again when the
        catalog handed it to the cluster and the cluster lost it (tasks/index/opensearch_mirror.py). None: such a
        chunk cannot be mirrored again (the backend's own tests, benchmarks), and the sync says so."""
        self.knn_candidates = knn_candidates
        """The beam of a search kNN ranks alone (`vector` not prefetched by a hybrid: mode dense) when wider than
        its depth (KORPUS_OPENSEARCH_KNN_CANDIDATES)."""
        self.max_lag = max_lag
        """Seconds the mirror may lack a catalog change before `health` says `behind` (mirror_max_lag_seconds)."""
        self.catalog = catalog_check.SqliteCatalog(catalog) if isinstance(catalog, Path) else catalog
        """Who every hit is checked against: the SQLite catalog file this cluster mirrors, or the catalog's serving
        part on PostgreSQL (KORPUS_CATALOG_URL). None only for a cluster used without a catalog (the backend's own
        tests)."""
        self.retry = retry or RetryPolicy()
        self.prefix = prefix
        self.alias = f"{prefix}-chunks"
        self._dims: int | None = None
        self._version: tuple[int, int] | None = None
        self._statistics = Statistics(self)

    named_terms = False
    """Whether a prefetched BM25 carries each query term as a named clause of weight 0, so that each hit lists the
    terms it holds (until session 39). Off: the routing measure reads the terms a hit holds from its text, analysed
    as the cluster analyses it (tasks/text/analysis.py is Lucene's `russian` analyzer, pinned against `_analyze`),
    and BM25 is asked as the plain query, which the cluster ranks faster (benchmarks/opensearch_search.py)."""

    def with_knn_candidates(self, candidates: int) -> OpenSearchIndex:
        """The same cluster and catalog, searched with another kNN beam (KORPUS_OPENSEARCH_KNN_CANDIDATES)."""
        other = copy.copy(self)
        other.knn_candidates = candidates
        return other

    @property
    def version(self) -> tuple[int, int]:
        if self._version is None:
            self._version = server_version(self.client.info())
        return self._version

    # --- admin -----------------------------------------------------------------------------------------

    def ensure(self, model: str, dims: int, serving: list[str] | None = None) -> str:
        """Template, index for this model and dimension, alias. Refuses an alias already serving other vectors
        (`serving`: the indices behind it, when the caller just asked)."""
        name = index_name(self.prefix, model, dims)
        serving = self.serving() if serving is None else serving
        if serving:
            if serving != [name]:
                raise IndexMismatchError(
                    f"alias {self.alias} serves {', '.join(serving)}; the configured model is {model!r} ({dims} "
                    f"dims, index {name}). Use that model, or `korpus reindex` the catalog into it: the next sync "
                    "then fills that index and moves the alias."
                )
            # an index made before chunks had regions: add the field (the mapping is strict)
            self.client.indices.put_mapping(index=name, body={"properties": {"regions": REGIONS_FIELD}})
            return name
        self.made(model, dims)
        self.client.indices.update_aliases(body={"actions": [{"add": {"index": name, "alias": self.alias}}]})
        return name

    def serving(self) -> list[str]:
        """The indices behind the alias (none before the first sync)."""
        if not self.client.indices.exists_alias(name=self.alias):
            return []
        return sorted(self.client.indices.get_alias(name=self.alias))

    def made(self, model: str, dims: int) -> str:
        """The index for this model and dimension, made from the template (for `dims`) unless it exists; its name."""
        name = index_name(self.prefix, model, dims)
        self.client.indices.put_index_template(name=f"{self.prefix}-chunks", body=index_template(self.prefix, dims))
        if not self.client.indices.exists(index=name):
            from opensearchpy.exceptions import RequestError

            try:
                self.client.indices.create(index=name)
            except RequestError as exc:  # made meanwhile by another caller (`prepare`'s thread, another writer)
                if exc.error != "resource_already_exists_exception":
                    raise
        return name

    def moved_to(self, name: str) -> None:
        """The alias moved to the index `name` in one update, and the indices it served before deleted."""
        old = [index for index in self.serving() if index != name]
        actions = [{"remove": {"index": index, "alias": self.alias}} for index in old]
        self.client.indices.update_aliases(body={"actions": [*actions, {"add": {"index": name, "alias": self.alias}}]})
        for index in old:
            self.client.indices.delete(index=index, ignore=[404])
        self._dims = None

    # --- writes ----------------------------------------------------------------------------------------

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """`call()` with the configured retries on what a restart or overload looks like: a refused, dropped or
        timed-out connection, HTTP 429/502/503/504. Any other error (a 400: a mapping or query korpus got wrong)
        is raised at once. Every write korpus sends is idempotent (documents by chunk id, updates to fixed
        values), so a bulk that reached the cluster before the connection dropped is safe to send again."""
        from opensearchpy.exceptions import ConnectionError as Unreachable
        from opensearchpy.exceptions import TransportError

        def attempt() -> T:
            try:
                return call()
            except Unreachable as exc:
                raise TransientError(f"OpenSearch unreachable during {what}: {exc.error}") from exc
            except TransportError as exc:
                if exc.status_code in RETRY_STATUSES:
                    raise TransientError(f"OpenSearch answered {exc.status_code} to {what}") from exc
                raise

        return with_retries(attempt, self.retry, f"OpenSearch {what}")

    def _every(
        self, query: dict[str, Any], source: list[str] | bool, sort: Sequence[str] = ("chunk_id",)
    ) -> Iterator[dict[str, Any]]:
        """Every hit of `query`, 1,000 a page through `search_after` (each page retried like a write)."""
        after = None
        while True:
            body: dict[str, Any] = {
                "size": 1000,
                "_source": source,
                "query": query,
                "sort": [{field: "asc"} for field in sort],
            }
            if after is not None:
                body["search_after"] = after
            hits = self._retrying("search", _whole(partial(self._search_alias, body)))["hits"]["hits"]
            yield from hits
            if len(hits) < 1000:
                return
            after = hits[-1]["sort"]

    def _ids(self, query: dict[str, Any]) -> list[str]:
        return [hit["_id"] for hit in self._every(query, source=False)]

    def _bulk(
        self, actions: list[dict[str, Any]] | str, refresh: bool | str = False, absent_ok: bool = False
    ) -> list[dict[str, Any]]:
        """One bulk request: `actions` as dicts, or a body already serialized (tasks/index/opensearch_mirror.bulks);
        items refused under load are retried, all of them, any other refusal raised — except, with `absent_ok`, an
        update of a document the index lacks (`absent`), which the caller reads from the items returned (one per
        action, in order: `_id`, `status`, `result`, `error`)."""
        if not actions:
            return []

        def send() -> list[dict[str, Any]]:
            response = self.client.bulk(body=actions, refresh=refresh)
            items = [next(iter(item.values())) for item in response["items"]]
            failed = [item for item in items if item.get("error") and not (absent_ok and absent(item))]
            if failed:
                message = f"bulk request refused {len(failed)} of {len(items)} actions: {failed[:2]}"
                if all(item.get("status") in RETRY_STATUSES for item in failed):  # rejected under load: all again
                    raise TransientError(message)
                raise RuntimeError(message)
            return items

        return self._retrying("bulk", send)

    def publish_version(self, source: Source, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Stage the new version's chunks, then switch: one bulk of partial updates, refresh=wait_for."""
        actions: list[dict[str, Any]] = []
        for ordinal, (chunk, vector) in enumerate(zip(chunks, np.asarray(vectors, dtype=np.float32), strict=True)):
            header = {"index": {"_index": self.alias, "_id": chunk.chunk_id}}
            actions += [header, chunk_document(chunk, ordinal, vector, source.kind.value if source.kind else None)]
        self._bulk(actions)
        old = self._ids(
            {
                "bool": {
                    "filter": [
                        {"term": {"source_id": source.source_id}},
                        {"terms": {"lifecycle": ["current", "staged"]}},
                    ],
                    "must_not": [{"term": {"source_version": source.version}}],
                }
            }
        )
        switch: list[dict[str, Any]] = []
        for chunk_id in old:
            switch += [{"update": {"_index": self.alias, "_id": chunk_id}}, {"doc": {"lifecycle": "superseded"}}]
        for chunk in chunks:
            switch += [{"update": {"_index": self.alias, "_id": chunk.chunk_id}}, {"doc": {"lifecycle": "current"}}]
        self._bulk(switch, refresh="wait_for")

    def retire_source(self, source_id: str) -> None:
        ids = self._ids({"bool": {"filter": [{"term": {"source_id": source_id}}, {"term": {"lifecycle": "current"}}]}})
        self._bulk(self._updates(ids, {"lifecycle": "superseded"}), refresh="wait_for")

    def relabel_source(self, source: Source) -> None:
        ids = self._ids(
            {
                "bool": {
                    "filter": [{"term": {"source_id": source.source_id}}, {"term": {"source_version": source.version}}]
                }
            }
        )
        labels = {"owner": source.owner, "access": source.access, "tenant": source.tenant or "default"}
        self._bulk(self._updates(ids, labels), refresh="wait_for")

    def _updates(self, ids: Iterable[str], doc: dict[str, Any]) -> list[dict[str, Any]]:
        return [a for i in ids for a in ({"update": {"_index": self.alias, "_id": i}}, {"doc": doc})]

    # --- mirroring the embedded catalog ------------------------------------------------------------------

    def states(self) -> dict[str, tuple[Any, ...]]:
        """chunk id → (lifecycle, access, owner, tenant, exception) of every document behind the alias (all in
        memory: for tests and small indices; a reconcile walks `states_in_order`)."""
        return dict(self.states_in_order())

    def states_in_order(self, page: int = 1000) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """(chunk id, state) of every document behind the alias in chunk id order, `page` at a time from one
        point in time (a snapshot of the index the pages share: a write meanwhile neither shifts nor repeats a
        hit), which is deleted when the walk ends or stops."""
        fields = list(STATE_FIELDS)
        opened = self._retrying(
            "point in time", partial(self.client.create_pit, index=self.alias, params={"keep_alive": "5m"})
        )
        pit, after = opened["pit_id"], None
        try:
            while True:
                body: dict[str, Any] = {
                    "size": page,
                    "_source": fields,
                    "query": {"match_all": {}},
                    "sort": [{"chunk_id": "asc"}],
                    "pit": {"id": pit, "keep_alive": "5m"},
                }
                if after is not None:
                    body["search_after"] = after
                hits = self._retrying("search", _whole(partial(self.client.search, body=body)))["hits"]["hits"]
                for hit in hits:
                    yield hit["_id"], tuple(hit["_source"].get(f) for f in fields)
                if len(hits) < page:
                    return
                after = hits[-1]["sort"]
        finally:
            with contextlib.suppress(Exception):  # a PIT not deleted lapses after its keep-alive
                self.client.delete_pit(body={"pit_id": [pit]})

    def sync_from(self, catalog: SqliteIndex, batch: int = 500, full: bool = False) -> dict[str, int]:
        """Make the cluster serve exactly what the catalog serves: what changed since its last sync, or (`full`, and
        the first time) everything compared (tasks/index/opensearch_mirror.py)."""
        from tasks.index.opensearch_mirror import sync_from

        return sync_from(self, catalog, batch, full)

    # --- reads: the SearchBackend primitives (tasks/index/backend.py) ------------------------------------

    name = "opensearch"

    def snapshot(self) -> AbstractContextManager[Any]:
        """One search: what `prefetch` asked holds for its primitives (this thread's or task's only). A cluster has
        no read transaction; the hits come from the same requests as the ranking, under its filters, and the catalog
        is asked about them in the request that serves them."""
        return _one_search()

    def prefetch(
        self, query: str, vector: np.ndarray | None, scopes: Sequence[str], depth: int, identifiers: Sequence[str]
    ) -> None:
        """Ask in one `_msearch` what a hybrid search reads: BM25 over `text`, kNN when `vector` is given, the
        identifier matches, and how many documents hold each term and in all (those not kept since the last sync:
        `Statistics`); the hits' fields come with them.
        Inside `snapshot` only; a part the cluster refused is left for its primitive to ask (and raise)."""
        held = _PREFETCHED.get()
        if held is None:
            return
        terms, key = list(dict.fromkeys(analyse(query))), tuple(scopes)
        lexical = lexical_body(query, scopes, depth)
        if self.named_terms:
            lexical["query"]["bool"]["should"] = [
                {"term": {"text": {"value": term, "boost": 0.0, "_name": term}}} for term in terms
            ]
        asked: list[tuple[Any, dict[str, Any]]] = [(("lexical", query, key, depth), lexical)]
        if vector is not None:
            asked.append(
                # the hybrid's kNN keeps its depth as its beam: BM25 beside it finds what the graph search misses,
                # and a wider beam would cost every search (benchmarks/README, opensearch_search.py)
                (("vector", vector.tobytes(), key, depth), knn_body(vector, scopes, depth))
            )
        if identifiers:
            asked.append((("identifiers", tuple(identifiers), key, depth), identifier_body(identifiers, scopes, depth)))
        for body in (b for _, b in asked):
            body["_source"] = HIT_FIELDS
        known = self._statistics.current()
        counts = [(("df", term), count_body(term)) for term in [*terms, None]]  # documents holding each, and in all
        # whether a chunk the caller may see holds each term (typo variants are judged in scope)
        counts += [(("visible", term, key), visible_holds_body(term, scopes)) for term in terms]
        for name, body in counts:  # each count asked once between two syncs (`Statistics`)
            if (count := known.get(name)) is None:
                asked.append((name, body))
            else:
                held[name] = count
        lines = [line for _, body in asked for line in ({"index": self.alias}, body)]
        answers = self.client.msearch(body=lines)["responses"]
        sources = held.setdefault(("sources", key), {})
        for (name, _body), answer in zip(asked, answers, strict=True):
            if "error" in answer:
                continue
            if name[0] in ("df", "visible"):
                held[name] = self._statistics.keep(known, name, int(answer["hits"]["total"]["value"]))
                continue
            found = answer["hits"]["hits"]
            held[name] = [(h["_id"], float(h["_score"] or 0.0)) for h in found]
            sources.update((h["_id"], h["_source"]) for h in found)
            if name[0] == "lexical" and self.named_terms:
                held[("holds", key)] = {h["_id"]: set(h.get("matched_queries", ())) for h in found}

    def check_query_vector(self, vector: np.ndarray) -> None:
        """Refuse a query vector of another dimension than the alias serves (read again once a sync landed)."""
        self._statistics.current()
        if self._dims is None:
            serving = self.serving()
            self._dims = int(serving[0].rsplit("-", 1)[1]) if serving else 0
        if self._dims and self._dims != len(vector):
            raise IndexMismatchError(
                f"alias {self.alias} serves {self._dims}-dim vectors; the query vector has {len(vector)} dims. "
                "Query with the model the index was built with."
            )

    def _search_alias(self, body: dict[str, Any]) -> dict[str, Any]:
        """A search of the alias. An alias no sync has made yet — a cluster before the first refresh reached it —
        holds nothing: an empty answer, not an error."""
        from opensearchpy.exceptions import NotFoundError

        try:
            return self.client.search(index=self.alias, body=body)
        except NotFoundError as exc:
            if exc.error != "index_not_found_exception":
                raise
            return {"hits": {"hits": [], "total": {"value": 0}}}

    def _ranked(self, body: dict[str, Any], asked: tuple[Any, ...] | None = None) -> list[tuple[str, float]]:
        """The ranking `body` asks for — from this search's `prefetch` when it holds `asked`."""
        if (held := _prefetched(asked)) is not _MISSING:
            return held
        hits = self._search_alias(body)["hits"]["hits"]
        return [(h["_id"], float(h["_score"] or 0.0)) for h in hits]

    def lexical(
        self,
        query: str,
        scopes: Sequence[str],
        depth: int,
        stemmed: bool = True,
        variants: dict[str, list[str]] | None = None,
    ) -> list[tuple[str, float]]:
        extra = [v for found in (variants or {}).values() for v in found] if stemmed else []
        asked = ("lexical", query, tuple(scopes), depth) if stemmed and not extra else None
        return self._ranked(lexical_body(query, scopes, depth, stemmed, extra), asked)

    def vector(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[str, float]]:
        """Cosine similarity, as the embedded index gives it: the lucene engine scores `cosinesimil` as (1 + cos) / 2,
        and thresholds fitted on cosines (KORPUS_NO_ANSWER_THRESHOLD) must mean the same on both backends."""
        asked = ("vector", vector.tobytes(), tuple(scopes), depth)
        return [
            (key, 2.0 * score - 1.0)
            for key, score in self._ranked(knn_body(vector, scopes, depth, self.knn_candidates), asked)
        ]

    def identifiers(self, identifiers: Sequence[str], scopes: Sequence[str], depth: int) -> list[str]:
        """Chunks holding the identifiers, most identifiers matched first (a constant-score clause per identifier)."""
        if not identifiers:
            return []
        asked = ("identifiers", tuple(identifiers), tuple(scopes), depth)
        return [chunk_id for chunk_id, _ in self._ranked(identifier_body(identifiers, scopes, depth), asked)]

    def term_frequency(self, term: str) -> int:
        """Documents whose analysed text holds `term` (a stem, as tasks/text/analysis.py makes it)."""
        if (held := _prefetched(("df", term))) is not _MISSING:
            return held
        return self._statistics.asked(
            ("df", term), lambda: int(self._search_alias(count_body(term))["hits"]["total"]["value"])
        )

    def near(self, term: str) -> list[tuple[str, int]]:
        """Indexed terms sharing `term`'s first letter within two edits, with their document frequencies: the
        cluster's term suggester over the analysed field (the input is a stem already: not analysed again)."""
        spec = {
            "field": "text",
            "analyzer": "keyword",
            "suggest_mode": "always",
            "max_edits": 2,
            "prefix_length": 1,
            "min_word_length": MIN_LENGTH,
            "size": 50,
        }
        body = {"size": 0, "suggest": {"typo": {"text": term, "term": spec}}}

        def ask() -> list[tuple[str, int]]:
            found = self._search_alias(body).get("suggest", {}).get("typo", [])
            return [(o["text"], int(o.get("freq", 0))) for entry in found for o in entry.get("options", [])]

        return self._statistics.asked(("near", term), ask)

    def typo_variants(self, terms: Sequence[str], scopes: Sequence[str] | None = None) -> dict[str, list[str]]:
        """The embedded index's rule (tasks/text/typos.py) over the cluster's own vocabulary; with `scopes`, judged
        over the chunks they may see (the suggester knows no filters: its close candidates are checked each)."""
        holds = None if scopes is None else (lambda term: self.visible_holds(term, scopes))
        return expand(terms, self.term_frequency, self.near, holds)

    def visible_holds(self, term: str, scopes: Sequence[str]) -> bool:
        """Whether a chunk the scopes may see holds the analysed term."""
        name = ("visible", term, tuple(scopes))
        if (held := _prefetched(name)) is not _MISSING:
            return held > 0
        body = visible_holds_body(term, scopes)
        return self._statistics.asked(name, lambda: int(self._search_alias(body)["hits"]["total"]["value"])) > 0

    def coverage(self, query: str, key: str, variants: dict[str, list[str]] | None = None) -> float:
        """The embedded index's measure from the cluster's own statistics: `_termvectors` of the hit gives its
        terms and their document frequencies."""
        terms = list(dict.fromkeys(analyse(query)))
        if not terms:
            return 0.0
        held = _PREFETCHED.get() or {}
        holds = next((h[key] for name, h in held.items() if name[0] == "holds" and key in h), None)
        if holds is None:  # the terms the hit holds: its text as the cluster analysed it (`named_terms`)
            source = next((h[key] for name, h in held.items() if name[0] == "sources" and key in h), None)
            holds = None if source is None or source.get("text") is None else set(analyse(source["text"]))
        if holds is not None and not variants and all(("df", t) in held for t in [*terms, None]):
            df = {t: held[("df", t)] for t in terms if t in holds}
            return idf_coverage(terms, holds, df, held[("df", None)] or 1)
        request = {"fields": ["text"], "term_statistics": True, "field_statistics": True}
        vectors = self.client.termvectors(index=self.alias, id=key, body=request)
        field = vectors.get("term_vectors", {}).get("text", {})
        held = field.get("terms", {})
        for term, found in (variants or {}).items():  # a mistyped term counts as held through a variant
            terms[terms.index(term)] = next((v for v in found if v in held), found[0])
        total = field.get("field_statistics", {}).get("doc_count", 1) or 1
        # A term the hit does not hold has no statistics here; it counts as rare (the most informative case).
        df = {t: held[t].get("doc_freq", 1) for t in terms if t in held}
        return idf_coverage(terms, held, df, total)

    def hits(
        self, scored: Sequence[tuple[str, float]], scopes: Sequence[str], regions: bool = True
    ) -> list[tuple[str, dict[str, Any]]]:
        """The ranked chunks' fields, fetched by id under the same filters as the ranking."""
        if not scored:
            return []
        ids = [chunk_id for chunk_id, _ in scored]
        fetched = (_PREFETCHED.get() or {}).get(("sources", tuple(scopes)), {})
        if all(chunk_id in fetched for chunk_id in ids):  # ranked in this search, under these filters
            found = {chunk_id: fetched[chunk_id] for chunk_id in ids}
        else:
            wanted = {"terms": {"chunk_id": ids}}
            query = {"bool": {"filter": [wanted, *visible(scopes)]}}
            body = {"size": len(ids), "_source": HIT_FIELDS, "query": query}
            found = {h["_id"]: h["_source"] for h in self._search_alias(body)["hits"]["hits"]}
        allowed = self._allowed(list(found), scopes)
        if allowed is not None:
            found = {c: source | {"access": allowed[c]} for c, source in found.items() if c in allowed}
        return [(c, self._hit(found[c], score, regions)) for c, score in scored if c in found]

    def cited(self, chunk_id: str, scopes: Sequence[str]) -> dict[str, Any] | None:
        """As the SQLite side's `cited`, without the catalog file: the chunk as `hits` fetches it (from the cluster,
        served only when the catalog holds it current and visible to the scopes), with its source version's kind,
        path and size from the catalog; None for any other id. (No neighbours: `source_chunks` gives them.)"""
        if self.catalog is None:
            raise ValueError("a chunk is cited from the cluster only with the catalog beside it (KORPUS_CATALOG_URL)")
        found = self.hits([(chunk_id, 0.0)], scopes)
        if not found:
            return None
        hit = found[0][1]
        source = self.catalog.visible_source(hit["source_id"], scopes)
        if source is None or source["version"] != hit["source_version"]:
            return None
        return hit | {"kind": source["kind"], "path": source["path"], "size": source["size"]}

    def source_chunks(self, source_id: str, version: str, scopes: Sequence[str]) -> list[dict[str, Any]]:
        """A source version's current chunks in order, as the viewer shows them (previous and next ids included),
        each checked against the catalog — what a replica without the catalog file reads instead of its rows."""
        query = {
            "bool": {
                "filter": [{"term": {"source_id": source_id}}, {"term": {"source_version": version}}, *visible(scopes)]
            }
        }
        fields = ["chunk_id", "page", "t_start", "t_end", "section_path", "text", "body", "exception", "regions"]
        found = [h["_source"] for h in self._every(query, source=[*fields, "ordinal"], sort=("ordinal", "chunk_id"))]
        allowed = self._allowed([c["chunk_id"] for c in found], scopes)
        if allowed is not None:
            found = [c | {"access": allowed[c["chunk_id"]]} for c in found if c["chunk_id"] in allowed]
        for at, chunk in enumerate(found):
            chunk["previous_id"] = found[at - 1]["chunk_id"] if at else None
            chunk["next_id"] = found[at + 1]["chunk_id"] if at + 1 < len(found) else None
            chunk["section_path"] = list(chunk.get("section_path") or [])
            chunk["regions"] = unpack(chunk.get("regions"))
        return found

    def _allowed(self, chunk_ids: list[str], scopes: Sequence[str]) -> dict[str, str] | None:
        """The catalog's say, read in this request: chunk id → access rule of those it holds current and visible to
        the caller (tasks/index/catalog_check.py); None when this cluster has no catalog to ask."""
        if self.catalog is None:
            return None
        return self.catalog.served(chunk_ids, scopes)

    @staticmethod
    def _hit(source: dict[str, Any], score: float, regions: bool = True) -> dict[str, Any]:
        hit = {field: source.get(field) for field in HIT_FIELDS}
        hit["section_path"] = list(hit["section_path"] or [])
        hit["exception"] = bool(hit["exception"])
        hit["regions"] = unpack(hit["regions"]) if regions else []
        hit["score"] = round(score, 6)
        return hit

    def health(self) -> dict[str, Any]:
        """What the alias serves; a cluster that does not answer is `unreachable`, with the reason."""
        from opensearchpy.exceptions import OpenSearchException

        body = {"size": 0, "track_total_hits": True, "query": {"term": {"lifecycle": "current"}}}
        try:
            served = int(self._search_alias(body)["hits"]["total"]["value"])  # no alias yet: nothing served
        except OpenSearchException as exc:
            return {"backend": self.name, "status": "unreachable", "error": str(exc)[:300]}
        try:
            lag = None if self.catalog is None else self.catalog.mirror_lag(self.alias, self.max_lag)
        except CatalogUnavailable as exc:
            return {"backend": self.name, "status": "unreachable", "chunks_served": served, "error": str(exc)}
        cluster = cluster_not_whole(self.client)
        if cluster is not None:
            return {"backend": self.name, "status": "degraded", "chunks_served": served, **cluster}
        if lag is not None:
            return {
                "backend": self.name,
                "status": "behind",
                "chunks_served": served,
                **lag,
                "error": "the OpenSearch mirror is behind the catalog (the catalog decides what is served; new "
                "and changed chunks are not found there yet): korpus sync-opensearch",
            }
        return {"backend": self.name, "status": "ok", "chunks_served": served}

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        """`search_exact` on the cluster: a phrase match on `text.exact`, then every occurrence located in the
        stored bodies exactly as the embedded index does."""
        tokens = words(text)
        if not tokens or not scopes:
            return no_occurrences(text)
        query = {"bool": {"must": [{"match_phrase": {"text.exact": " ".join(tokens)}}], "filter": visible(scopes)}}
        fields = ["source_id", "page", "t_start", "body", "chunk_id", "regions"]
        rows = [
            (
                h["_source"]["source_id"],
                h["_source"].get("page"),
                h["_source"].get("t_start"),
                h["_source"]["body"],
                h["_source"]["chunk_id"],
                h["_source"].get("regions"),
            )
            for h in self._every(query, source=fields, sort=("source_id", "page", "chunk_id"))
        ]
        allowed = self._allowed([row[4] for row in rows], scopes)
        if allowed is not None:
            rows = [row for row in rows if row[4] in allowed]
        return locate_occurrences(text, rows, limit)


_PREFETCHED: ContextVar[dict[Any, Any] | None] = ContextVar("korpus_opensearch_prefetched", default=None)
"""What this search's `prefetch` brought, by request: a context variable, so concurrent searches (the API's threads)
never read each other's."""


_MISSING = object()


def _prefetched(asked: Any) -> Any:
    """What this search's `prefetch` brought for `asked`, or _MISSING (none asked, or not that)."""
    held = _PREFETCHED.get()
    return _MISSING if held is None or asked is None else held.get(asked, _MISSING)


@contextmanager
def _one_search() -> Iterator[None]:
    token = _PREFETCHED.set({})
    try:
        yield
    finally:
        _PREFETCHED.reset(token)


def cluster_hosts(url: str) -> list[str]:
    """The nodes `KORPUS_OPENSEARCH_URL` names, comma-separated."""
    return [part.strip() for part in url.split(",") if part.strip()]


def client_security(settings: Settings) -> dict[str, Any]:
    """The client's credentials and TLS from the settings: basic auth with KORPUS_OPENSEARCH_USER and _PASSWORD, and
    an https:// cluster's certificate verified — against KORPUS_OPENSEARCH_CA when set, else the system's bundle."""
    options: dict[str, Any] = {}
    if settings.opensearch_user:
        if settings.opensearch_password is None:
            raise ValueError("KORPUS_OPENSEARCH_USER is set without KORPUS_OPENSEARCH_PASSWORD")
        # encoded as UTF-8 (RFC 7617, what OpenSearch's security plugin decodes): urllib3's own basic auth encodes
        # Latin-1 and fails on a Cyrillic password (found by the test)
        pair = f"{settings.opensearch_user}:{settings.opensearch_password.get_secret_value()}".encode()
        options["headers"] = {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
    if settings.opensearch_ca is not None:
        if not settings.opensearch_ca.is_file():
            raise ValueError(f"KORPUS_OPENSEARCH_CA: no CA bundle at {settings.opensearch_ca}")
        options["ca_certs"] = str(settings.opensearch_ca)
    if any(h.startswith("https://") for h in cluster_hosts(settings.opensearch_url or "")):
        options |= {"use_ssl": True, "verify_certs": True, "ssl_show_warn": True}
    return options


def opensearch_index(settings: Settings, embedder: Callable[[], Any] | None = None) -> OpenSearchIndex:
    """The configured cluster (KORPUS_OPENSEARCH_URL: one node's URL or several, comma-separated), or a clear error
    when the backend has no address. A process that mirrors gives `embedder` (the configured model, loaded when
    called: `OpenSearchIndex.embedder`)."""
    if not settings.opensearch_url or not cluster_hosts(settings.opensearch_url):
        raise ValueError("KORPUS_BACKEND=opensearch needs KORPUS_OPENSEARCH_URL=http://host:9200")
    from opensearchpy import OpenSearch

    # Every node is known: a request a node cannot take (refused, dropped, timed out) goes at once to the next one
    # (the client's own retries, one a node). korpus's retries with backoff come on top, for writes.
    hosts = cluster_hosts(settings.opensearch_url)
    client = OpenSearch(
        hosts=hosts,
        timeout=60,
        max_retries=len(hosts) - 1,
        retry_on_timeout=len(hosts) > 1,
        **client_security(settings),
    )
    return OpenSearchIndex(
        client,
        prefix=settings.opensearch_prefix,
        retry=RetryPolicy.from_settings(settings),
        catalog=PgCatalog(settings.catalog_url) if settings.catalog_url else settings.index_path,
        max_lag=settings.mirror_max_lag_seconds,
        knn_candidates=settings.opensearch_knn_candidates,
        embedder=embedder,
    )


def prepare(settings: Settings) -> threading.Thread | None:
    """The cluster's template, index and alias made now, in a thread, for a catalog that records no model yet (a
    first refresh): the first group's sync then sends only its documents — making the index on
    the topology's three nodes took ~4 s of the first letter's way to a search. The model is the configured one, its
    dimension from its manifest (an ONNX folder's `korpus-onnx.json`, a sentence-transformers folder's pooling
    config); one that states none is left to that sync, as is any failure here (it retries and reports)."""
    from tasks.index.sqlite import SqliteIndex

    with SqliteIndex(settings.index_path) as catalog:
        if catalog.embedding_model() is not None:  # the index exists since the catalog's first sync
            return None
    from korpus.core.model_store import ModelMissingError, declared_dims, embed_model_path

    try:
        path = embed_model_path(settings)
    except ModelMissingError:  # the refresh's embedding says so
        return None
    dims = declared_dims(path)
    if dims is None:
        return None

    def run() -> None:
        try:
            opensearch_index(settings).ensure(path.name, dims)
        except Exception as exc:
            log.info("the cluster's index is left to the first sync: %s", exc)

    thread = threading.Thread(target=run, name="korpus-prepare-cluster", daemon=True)
    thread.start()
    return thread


STATISTICS_SECONDS = 1.0
"""How often a serving process asks the catalog whether a sync landed (`Statistics`)."""
STATISTICS_HELD = 100_000
"""Counts a process keeps at most; past it, they are all dropped and asked again."""


class Statistics:
    """The counts a search routes by — documents holding a term, in all, and whether the caller's scopes see one
    that holds it — and a mistyped term's close indexed terms (the term suggester's answer), kept between searches
    until a sync changes what the cluster holds (#64 item 2: they were asked of the cluster with every search, up to
    2 × terms + 1 counts in its `_msearch`, and a typo's variants in requests of their own after it).

    They change only when a sync lands, and each sync moves the mirror's mark in the catalog (the catalog generation
    and outbox number it holds; `catalog_check.mark_synced`). The mark is read at most every `STATISTICS_SECONDS`, so
    a count is at most that long older than the sync that changed it. They steer routing and typo variants only: every
    hit is still ranked by the cluster under the caller's filters and checked against the catalog. Without a catalog
    (the backend's own tests), nothing is kept."""

    def __init__(self, index: OpenSearchIndex) -> None:
        self.index = index
        self.counts: dict[tuple[Any, ...], Any] = {}
        self.mark: tuple[int | None, int | None] | None = None
        self.checked = float("-inf")

    def current(self) -> dict[tuple[Any, ...], Any]:
        """The counts kept, emptied first when a sync landed since they were asked."""
        catalog = self.index.catalog
        if catalog is None:
            return {}
        now = time.monotonic()
        if now - self.checked >= STATISTICS_SECONDS:
            self.checked = now
            mark = catalog.synced_mark(self.index.alias)
            if mark != self.mark:
                self.counts, self.mark = {}, mark
                self.index._dims = None  # a sync after `korpus reindex` may have moved the alias to other vectors
        return self.counts

    def asked(self, name: tuple[Any, ...], ask: Callable[[], Any]) -> Any:
        """The answer kept under `name`, else `ask()`'s, kept (a primitive asked outside a search's `_msearch`)."""
        counts = self.current()
        if (known := counts.get(name)) is not None:
            return known
        return self.keep(counts, name, ask())

    def keep(self, counts: dict[tuple[Any, ...], Any], name: tuple[Any, ...], count: Any) -> Any:
        """`count`, kept in `counts` — what `current` gave before it was asked: if a sync landed meanwhile, `counts`
        is already dropped, and so is a count the sync may have changed."""
        if self.mark is not None:
            if len(counts) >= STATISTICS_HELD:
                counts.clear()
            counts[name] = count
        return count


def _whole(search: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """`search` that raises `TransientError` when a shard did not answer: a walk of the index that a sync or a
    switch trusts to hold every document must not take a lost node's shards for empty ones."""

    def call() -> dict[str, Any]:
        answer = search()
        shards = answer.get("_shards") or {}
        if shards.get("failed"):
            reasons = [f.get("reason") for f in shards.get("failures") or []][:1]
            raise TransientError(f"{shards['failed']} of {shards.get('total')} shards did not answer: {reasons}")
        return answer

    return call


def mirror_or_pending(
    settings: Settings, catalog: SqliteIndex, embedder: Callable[[], Any] | None, full: bool = False
) -> dict[str, Any]:
    """One sync of the catalog to the configured cluster (`sync_from`, its requests retried; `full`: a reconcile);
    a cluster that stays down leaves the mirror pending — `{"pending": True, "error": …}` — for the next sync to
    complete. What every caller that mirrors after its own write runs: a refresh, a review decision, `korpus gc`.
    `embedder`: the configured model, loaded only to give a chunk the cluster lost its vector again."""
    try:
        return opensearch_index(settings, embedder).sync_from(catalog, full=full)
    except TransientError as exc:
        return {"pending": True, "error": str(exc)}

"""The OpenSearch backend (opensearch-py): the embedded index's behaviour on a cluster.

- An index template for `<prefix>-chunks-*`: `text` analysed by the built-in `russian` analyzer with an unstemmed
  `text.exact` sub-field, `identifiers` and the filter fields as keywords, `embedding` a `knn_vector` (HNSW, lucene
  engine, cosine), `dynamic: strict`. Index names carry the embedding model and dimension
  (`korpus-chunks-e5-small-384`); readers and writers use the alias `korpus-chunks`.
- A version switch: the new version's chunks are bulk-indexed as `staged` (never served), then one bulk of partial
  updates makes them `current` and the old ones `superseded`, with `refresh=wait_for`. Retire and relabel are
  bulk partial updates too. Filters — lifecycle `current` and the caller's access scopes — sit inside every query.
- Hybrid: the RRF `score-ranker-processor` search pipeline on 2.19+ (filters inside each sub-query on 2.19, the
  hybrid query's own `filter` on 3.x), client-side RRF over two requests before 2.19. Routing as in the embedded
  index: BM25 joins only when its best hit covers `min_coverage` of the query, measured from `_termvectors`
  document frequencies. Identifier matches rank first.

What ran where: the lexical and admin paths are tested against osmem-server (an in-memory server speaking the
OpenSearch REST API; it answers 400 to kNN, hybrid and pipelines); the kNN, hybrid and pipeline requests are
checked as JSON against the OpenSearch documentation (tests/fixtures/opensearch/); `make test-opensearch` runs the
backend suite against a real cluster when KORPUS_OPENSEARCH_URL is set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

import numpy as np

from korpus.datamodel import Chunk, Locator, Source
from korpus.settings import Settings
from tasks.analysis import analyse, words
from tasks.identifiers import extract_identifiers
from tasks.index_sqlite import (
    HYBRID_MODES,
    SEARCH_MODES,
    IndexMismatchError,
    SqliteIndex,
    idf_coverage,
    locate_occurrences,
    rrf_fuse,
)
from tasks.retry import RetryPolicy, TransientError, with_retries

HIT_FIELDS = ["chunk_id", "source_id", "source_version", "page", "t_start", "t_end", "section_path", "text",
              "lifecycle", "access", "exception"]  # fmt: skip
_SLUG = re.compile(r"[^a-z0-9]+")
# A cluster restarting, overloaded or behind a restarting proxy: worth trying again (with backoff).
RETRY_STATUSES = frozenset({429, 502, 503, 504})
T = TypeVar("T")


def server_version(info: dict[str, Any]) -> tuple[int, int]:
    major, minor, *_ = (int(p) for p in re.findall(r"\d+", info["version"]["number"]))
    return major, minor


def index_name(prefix: str, model: str, dims: int) -> str:
    return f"{prefix}-chunks-{_SLUG.sub('-', model.lower()).strip('-')}-{dims}"


def index_template(prefix: str, dims: int) -> dict[str, Any]:
    keyword = {"type": "keyword"}
    return {
        "index_patterns": [f"{prefix}-chunks-*"],
        "template": {
            "settings": {
                "index": {"knn": True, "refresh_interval": "1s"},
                "analysis": {
                    "analyzer": {"korpus_exact": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase"]}}
                },
            },
            "mappings": {
                "dynamic": "strict",
                "properties": {
                    "chunk_id": keyword,
                    "source_id": keyword,
                    "source_version": keyword,
                    "ordinal": {"type": "integer"},
                    "page": {"type": "integer"},
                    "t_start": {"type": "float"},
                    "t_end": {"type": "float"},
                    "section_path": keyword,
                    "text": {
                        "type": "text",
                        "analyzer": "russian",
                        "fields": {"exact": {"type": "text", "analyzer": "korpus_exact"}},
                    },
                    "body": {"type": "text", "index": False},
                    "identifiers": keyword,
                    "owner": keyword,
                    "access": keyword,
                    "tenant": keyword,
                    "lifecycle": keyword,
                    "doc_type": keyword,
                    "language": keyword,
                    "policy_version": keyword,
                    "exception": {"type": "boolean"},
                    "embedding": {
                        "type": "knn_vector",
                        "dimension": dims,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                },
            },
        },
    }


def rrf_pipeline(rrf_k: int) -> dict[str, Any]:
    return {
        "description": "korpus: reciprocal rank fusion of the hybrid query's lexical and kNN clauses",
        "phase_results_processors": [
            {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": rrf_k}}}
        ],
    }


def visible(scopes: Sequence[str]) -> list[dict[str, Any]]:
    """The filters every read carries: current chunks whose access rule is among the caller's scopes."""
    return [{"term": {"lifecycle": "current"}}, {"terms": {"access": list(scopes)}}]


def lexical_query(query: str, stemmed: bool = True) -> dict[str, Any]:
    return {"match": {"text" if stemmed else "text.exact": {"query": query}}}


def lexical_body(query: str, scopes: Sequence[str], depth: int, stemmed: bool = True) -> dict[str, Any]:
    return {"size": depth, "_source": HIT_FIELDS,
            "query": {"bool": {"must": [lexical_query(query, stemmed)], "filter": visible(scopes)}}}  # fmt: skip


def identifier_body(identifiers: Sequence[str], scopes: Sequence[str], depth: int) -> dict[str, Any]:
    wanted = {"terms": {"identifiers": list(identifiers)}}
    return {"size": depth, "_source": HIT_FIELDS, "query": {"bool": {"filter": [wanted, *visible(scopes)]}}}


def knn_query(vector: np.ndarray, depth: int, scopes: Sequence[str] | None) -> dict[str, Any]:
    """Lucene-engine efficient filtering: the filter goes inside the knn clause, applied during the graph search
    (not after it, which could return fewer than k)."""
    clause: dict[str, Any] = {"vector": [round(float(x), 7) for x in vector], "k": depth}
    if scopes is not None:
        clause["filter"] = {"bool": {"filter": visible(scopes)}}
    return {"knn": {"embedding": clause}}


def knn_body(vector: np.ndarray, scopes: Sequence[str], depth: int) -> dict[str, Any]:
    return {"size": depth, "_source": HIT_FIELDS, "query": knn_query(vector, depth, scopes)}


def hybrid_body(
    query: str, vector: np.ndarray, scopes: Sequence[str], depth: int, version: tuple[int, int]
) -> dict[str, Any]:
    """One hybrid query for the RRF pipeline. 3.x: the hybrid query's own `filter` pre-filters every sub-query.
    2.19 has no such parameter: each sub-query carries the filters itself (bool filter; knn efficient filter)."""
    if version >= (3, 0):
        hybrid = {"filter": {"bool": {"filter": visible(scopes)}},
                  "queries": [lexical_query(query), knn_query(vector, depth, None)]}  # fmt: skip
    else:
        hybrid = {"queries": [{"bool": {"must": [lexical_query(query)], "filter": visible(scopes)}},
                              knn_query(vector, depth, scopes)]}  # fmt: skip
    return {"size": depth, "_source": HIT_FIELDS, "query": {"hybrid": hybrid}}


def chunk_document(
    chunk: Chunk, ordinal: int, vector: np.ndarray, doc_type: str | None, exception: bool = False
) -> dict[str, Any]:
    """A chunk as the template's document, `staged` until a switch makes it current."""
    loc = chunk.locator
    return {
        "chunk_id": chunk.chunk_id, "source_id": chunk.source_id, "source_version": chunk.source_version,
        "ordinal": ordinal, "page": loc.page, "t_start": loc.t_start, "t_end": loc.t_end,
        "section_path": chunk.section_path, "text": chunk.text, "body": chunk.body,
        "identifiers": extract_identifiers(chunk.body), "owner": chunk.owner, "access": chunk.access_rule,
        "tenant": chunk.tenant, "lifecycle": "staged", "doc_type": doc_type, "language": chunk.language,
        "policy_version": chunk.policy_version, "exception": exception,
        "embedding": [float(x) for x in vector],
    }  # fmt: skip


class OpenSearchIndex:
    """Chunks on an OpenSearch cluster behind the alias `<prefix>-chunks`.

    >>> index = OpenSearchIndex(OpenSearch(hosts=["http://localhost:9200"]))
    >>> index.ensure("e5-small", 384)
    >>> index.search("договор поставки", vector, scopes=["public"], k=5)
    """

    def __init__(self, client: Any, prefix: str = "korpus", rrf_k: int = 60, retry: RetryPolicy | None = None) -> None:
        self.client = client
        self.retry = retry or RetryPolicy()
        self.prefix = prefix
        self.alias = f"{prefix}-chunks"
        self.pipeline = f"{prefix}-rrf"
        self.rrf_k = rrf_k
        self._version: tuple[int, int] | None = None

    @property
    def version(self) -> tuple[int, int]:
        if self._version is None:
            self._version = server_version(self.client.info())
        return self._version

    # --- admin -----------------------------------------------------------------------------------------

    def ensure(self, model: str, dims: int) -> str:
        """Template, index for this model and dimension, alias. Refuses an alias already serving other vectors."""
        name = index_name(self.prefix, model, dims)
        if self.client.indices.exists_alias(name=self.alias):
            serving = sorted(self.client.indices.get_alias(name=self.alias))
            if serving != [name]:
                raise IndexMismatchError(
                    f"alias {self.alias} serves {', '.join(serving)}; the configured model is {model!r} ({dims} "
                    f"dims, index {name}). Use that model, or reindex into {name} and move the alias."
                )
            return name
        self.client.indices.put_index_template(name=f"{self.prefix}-chunks", body=index_template(self.prefix, dims))
        if not self.client.indices.exists(index=name):
            self.client.indices.create(index=name)
        self.client.indices.update_aliases(body={"actions": [{"add": {"index": name, "alias": self.alias}}]})
        return name

    def ensure_pipeline(self) -> None:
        self.client.transport.perform_request(
            "PUT", f"/_search/pipeline/{self.pipeline}", body=rrf_pipeline(self.rrf_k)
        )

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
            body: dict[str, Any] = {"size": 1000, "_source": source, "query": query,
                                    "sort": [{field: "asc"} for field in sort]}  # fmt: skip
            if after is not None:
                body["search_after"] = after
            hits = self._retrying("search", partial(self.client.search, index=self.alias, body=body))["hits"]["hits"]
            yield from hits
            if len(hits) < 1000:
                return
            after = hits[-1]["sort"]

    def _ids(self, query: dict[str, Any]) -> list[str]:
        return [hit["_id"] for hit in self._every(query, source=False)]

    def _bulk(self, actions: list[dict[str, Any]], refresh: bool | str = False) -> None:
        if not actions:
            return

        def send() -> None:
            response = self.client.bulk(body=actions, refresh=refresh)
            if response.get("errors"):
                failed = [next(iter(item.values())) for item in response["items"]]
                failed = [item for item in failed if item.get("error")]
                message = f"bulk request refused {len(failed)} of {len(response['items'])} actions: {failed[:2]}"
                if all(item.get("status") in RETRY_STATUSES for item in failed):  # rejected under load: all again
                    raise TransientError(message)
                raise RuntimeError(message)

        self._retrying("bulk", send)

    def publish_version(self, source: Source, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Stage the new version's chunks, then switch: one bulk of partial updates, refresh=wait_for."""
        actions: list[dict[str, Any]] = []
        for ordinal, (chunk, vector) in enumerate(zip(chunks, np.asarray(vectors, dtype=np.float32), strict=True)):
            header = {"index": {"_index": self.alias, "_id": chunk.chunk_id}}
            actions += [header, chunk_document(chunk, ordinal, vector, source.kind.value if source.kind else None)]
        self._bulk(actions)
        old = self._ids({"bool": {"filter": [{"term": {"source_id": source.source_id}},
                                             {"terms": {"lifecycle": ["current", "staged"]}}],
                                  "must_not": [{"term": {"source_version": source.version}}]}})  # fmt: skip
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
        ids = self._ids({"bool": {"filter": [{"term": {"source_id": source.source_id}},
                                             {"term": {"source_version": source.version}}]}})  # fmt: skip
        labels = {"owner": source.owner, "access": source.access, "tenant": source.tenant or "default"}
        self._bulk(self._updates(ids, labels), refresh="wait_for")

    def _updates(self, ids: Iterable[str], doc: dict[str, Any]) -> list[dict[str, Any]]:
        return [a for i in ids for a in ({"update": {"_index": self.alias, "_id": i}}, {"doc": doc})]

    # --- mirroring the embedded catalog ------------------------------------------------------------------

    def states(self) -> dict[str, tuple[Any, ...]]:
        """chunk id → (lifecycle, access, owner, tenant, exception) of every document behind the alias."""
        fields = ["lifecycle", "access", "owner", "tenant", "exception"]
        return {
            hit["_id"]: tuple(hit["_source"].get(f) for f in fields)
            for hit in self._every({"match_all": {}}, source=fields)
        }

    def sync_from(self, catalog: SqliteIndex, batch: int = 500) -> dict[str, int]:
        """Make the cluster serve exactly what the embedded catalog serves: index the current chunks it lacks (as
        `staged`, from the stored text and vectors — nothing re-parsed or re-embedded), then one bulk of partial
        updates switches lifecycles and labels and supersedes what the catalog no longer holds. Idempotent: a sync
        interrupted anywhere is completed by the next one."""
        meta = dict(catalog.conn.execute("SELECT key, value FROM index_meta"))
        if "embed_model" not in meta:
            return {"indexed": 0, "updated": 0, "superseded": 0}
        self._retrying("setup", partial(self.ensure, meta["embed_model"], int(meta["embed_dims"])))
        want = {
            row[0]: (row[1], row[2], row[3], row[4], bool(row[5]))
            for row in catalog.conn.execute("SELECT chunk_id, lifecycle, access, owner, tenant, exception FROM chunks")
        }
        have = self.states()
        missing = [c for c, state in want.items() if state[0] == "current" and c not in have]
        table = catalog._vector_table()
        for start in range(0, len(missing), batch):
            part = missing[start : start + batch]
            marks = ", ".join("?" for _ in part)
            cursor = catalog.conn.execute(
                "SELECT c.chunk_id, c.source_id, c.source_version, c.ordinal, c.page, c.t_start, c.t_end, "
                "c.section_path, c.text, c.body, c.owner, c.access, c.tenant, c.language, c.policy_version, "
                f"c.exception, s.kind, v.embedding FROM chunks c JOIN {table} v ON v.rowid = c.rowid "
                "LEFT JOIN sources s ON s.source_id = c.source_id AND s.version = c.source_version "
                f"WHERE c.chunk_id IN ({marks})",
                part,
            )
            actions: list[dict[str, Any]] = []
            for row in cursor:
                (chunk_id, source_id, version, ordinal, page, t0, t1, section, text, body, owner, access, tenant,
                 language, policy, exception, kind, blob) = row  # fmt: skip
                chunk = Chunk(chunk_id=chunk_id, source_id=source_id, source_version=version,
                              section_path=json.loads(section), locator=Locator(page=page, t_start=t0, t_end=t1),
                              text=text, body=body, owner=owner, access_rule=access, tenant=tenant,
                              policy_version=policy, language=language)  # fmt: skip
                doc = chunk_document(chunk, ordinal, np.frombuffer(blob, dtype=np.float32), kind, bool(exception))
                actions += [{"index": {"_index": self.alias, "_id": chunk_id}}, doc]
            self._bulk(actions)
            for chunk_id in part:
                have[chunk_id] = ("staged", None, None, None, None)
        switch: list[dict[str, Any]] = []
        staged, updated, superseded = set(missing), 0, 0
        for chunk_id, state in have.items():
            target = want.get(chunk_id)
            if target is None:
                if state[0] != "superseded":
                    switch += self._updates([chunk_id], {"lifecycle": "superseded"})
                    superseded += 1
            elif tuple(state) != target:  # labels or lifecycle moved, or just staged above
                lifecycle, access, owner, tenant, exception = target
                switch += self._updates([chunk_id], {"lifecycle": lifecycle, "access": access, "owner": owner,
                                                     "tenant": tenant, "exception": exception})  # fmt: skip
                updated += chunk_id not in staged
        self._bulk(switch, refresh="wait_for")
        return {"indexed": len(missing), "updated": updated, "superseded": superseded}

    # --- reads -----------------------------------------------------------------------------------------

    def _search(self, body: dict[str, Any], **params: Any) -> list[tuple[dict[str, Any], float]]:
        hits = self.client.search(index=self.alias, body=body, params=params or None)["hits"]["hits"]
        return [(h["_source"], float(h["_score"] or 0.0)) for h in hits]

    def lexical_coverage(self, query: str, chunk_id: str) -> float:
        """The embedded index's measure from the cluster's own statistics: `_termvectors` of the best lexical
        hit gives its terms and their document frequencies."""
        terms = list(dict.fromkeys(analyse(query)))
        if not terms:
            return 0.0
        request = {"fields": ["text"], "term_statistics": True, "field_statistics": True}
        vectors = self.client.termvectors(index=self.alias, id=chunk_id, body=request)
        field = vectors.get("term_vectors", {}).get("text", {})
        held = field.get("terms", {})
        total = field.get("field_statistics", {}).get("doc_count", 1) or 1
        # A term the hit does not hold has no statistics here; it counts as rare (the most informative case).
        df = {t: held[t].get("doc_freq", 1) for t in terms if t in held}
        return idf_coverage(terms, held, df, total)

    def search(
        self,
        query: str,
        vector: np.ndarray | None,
        scopes: Sequence[str],
        k: int = 10,
        depth: int = 50,
        mode: str = "hybrid",
        min_coverage: float = 0.35,
    ) -> list[dict[str, Any]]:
        if mode not in SEARCH_MODES or mode == "hybrid+rerank":
            raise ValueError(f"unknown search mode {mode!r} for OpenSearch")
        if mode in (*HYBRID_MODES, "dense") and vector is None:
            raise ValueError("dense and hybrid search need a query vector")
        if not scopes:
            return []
        docs: dict[str, dict[str, Any]] = {}

        def run(body: dict[str, Any], **params: Any) -> list[tuple[str, float]]:
            found = self._search(body, **params)
            docs.update((source["chunk_id"], source) for source, _ in found)
            return [(source["chunk_id"], score) for source, score in found]

        if mode in ("bm25", "bm25-nostem"):
            fused = run(lexical_body(query, scopes, depth, stemmed=mode == "bm25"))
        elif mode == "dense":
            fused = run(knn_body(vector, scopes, depth))
        else:
            lexical = run(lexical_body(query, scopes, depth))
            if mode == "hybrid" and lexical and self.lexical_coverage(query, lexical[0][0]) < min_coverage:
                fused = run(knn_body(vector, scopes, depth))  # routed: a paraphrase, dense ranks alone
            elif self.version >= (2, 19):
                self.ensure_pipeline()
                fused = run(hybrid_body(query, vector, scopes, depth, self.version), search_pipeline=self.pipeline)
            else:  # no score-ranker-processor before 2.19: the same RRF as the embedded index, client-side
                dense = run(knn_body(vector, scopes, depth))
                ids = list(dict.fromkeys([c for c, _ in lexical] + [c for c, _ in dense]))
                position = {c: i for i, c in enumerate(ids)}
                rankings = [[position[c] for c, _ in side] for side in (lexical, dense)]
                fused = [(ids[i], score) for i, score in rrf_fuse(rankings, self.rrf_k)]
        identifiers = extract_identifiers(query)
        if mode != "dense" and identifiers:
            exact = [c for c, _ in run(identifier_body(identifiers, scopes, depth))]
            pinned = set(exact)
            fused = [(c, 1.0 + 1.0 / (rank + 1)) for rank, c in enumerate(exact)] + [
                (c, s) for c, s in fused if c not in pinned
            ]
        return [self._hit(docs[c], s) for c, s in fused[:k]]

    @staticmethod
    def _hit(source: dict[str, Any], score: float) -> dict[str, Any]:
        hit = {field: source.get(field) for field in HIT_FIELDS}
        hit["section_path"] = list(hit["section_path"] or [])
        hit["exception"] = bool(hit["exception"])
        hit["score"] = round(score, 6)
        return hit

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        """`search_exact` on the cluster: a phrase match on `text.exact`, then every occurrence located in the
        stored bodies exactly as the embedded index does."""
        tokens = words(text)
        if not tokens or not scopes:
            return {"query": text, "total": 0, "by_source": {}, "occurrences": []}
        query = {"bool": {"must": [{"match_phrase": {"text.exact": " ".join(tokens)}}], "filter": visible(scopes)}}
        fields = ["source_id", "page", "t_start", "body", "chunk_id"]
        rows = [
            (h["_source"]["source_id"], h["_source"].get("page"), h["_source"].get("t_start"), h["_source"]["body"],
             h["_source"]["chunk_id"])
            for h in self._every(query, source=fields, sort=("source_id", "page", "chunk_id"))
        ]  # fmt: skip
        return locate_occurrences(text, rows, limit)

    def count_mentions(self, text: str, scopes: Sequence[str]) -> dict[str, Any]:
        found = self.exact_occurrences(text, scopes, limit=0)
        return {"query": text, "total": found["total"], "by_source": found["by_source"]}


def opensearch_index(settings: Settings) -> OpenSearchIndex:
    """The configured cluster (KORPUS_OPENSEARCH_URL), or a clear error when the backend has no address."""
    if not settings.opensearch_url:
        raise ValueError("KORPUS_BACKEND=opensearch needs KORPUS_OPENSEARCH_URL=http://host:9200")
    from opensearchpy import OpenSearch

    # korpus retries itself (with backoff, counted); the client's own immediate retries are switched off.
    client = OpenSearch(hosts=[settings.opensearch_url], timeout=60, max_retries=0)
    return OpenSearchIndex(
        client, prefix=settings.opensearch_prefix, rrf_k=settings.rrf_k, retry=RetryPolicy.from_settings(settings)
    )

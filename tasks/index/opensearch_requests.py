"""The JSON korpus sends to OpenSearch: the index template, the filters every read carries, the BM25, kNN and
identifier queries, and a chunk as the template's document. Pure functions; what the cluster does with them is
tested on a real node (tests/integration/test_opensearch_backend.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from korpus.core.datamodel import Chunk, tenant_and_access
from tasks.text.identifiers import extract_identifiers
from tasks.text.regions import pack

HIT_FIELDS = [
    "chunk_id",
    "source_id",
    "source_version",
    "page",
    "t_start",
    "t_end",
    "section_path",
    "text",
    "lifecycle",
    "access",
    "exception",
    "regions",
]
REGIONS_FIELD = {"type": "text", "index": False}
"""A chunk's regions (tasks/text/regions.py `pack`): stored, never searched."""
_SLUG = re.compile(r"[^a-z0-9]+")


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
                    "regions": REGIONS_FIELD,
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


def visible(scopes: Sequence[str]) -> list[dict[str, Any]]:
    """The filters every read carries: current chunks whose scope is among the caller's — `public` is the access
    rule `public` in the default tenant, `acme/public` that rule in tenant `acme` (korpus/core/datamodel.scope_of)."""
    by_tenant: dict[str, list[str]] = {}
    for scope in scopes:
        tenant, access = tenant_and_access(scope)
        by_tenant.setdefault(tenant, []).append(access)
    either = [
        {"bool": {"filter": [{"term": {"tenant": tenant}}, {"terms": {"access": rules}}]}}
        for tenant, rules in by_tenant.items()
    ]
    return [{"term": {"lifecycle": "current"}}, {"bool": {"should": either, "minimum_should_match": 1}}]


def count_body(term: str | None) -> dict[str, Any]:
    """How many documents hold the analysed `term` (None: how many there are)."""
    query = {"match_all": {}} if term is None else {"term": {"text": term}}
    return {"size": 0, "track_total_hits": True, "query": query}


def visible_holds_body(term: str, scopes: Sequence[str]) -> dict[str, Any]:
    """Whether a chunk the scopes may see holds the analysed `term` (a count that stops at the first)."""
    query = {"bool": {"filter": [{"term": {"text": term}}, *visible(scopes)]}}
    return {"size": 0, "track_total_hits": 1, "query": query}


def lexical_query(query: str, stemmed: bool = True) -> dict[str, Any]:
    return {"match": {"text" if stemmed else "text.exact": {"query": query}}}


def lexical_body(
    query: str, scopes: Sequence[str], depth: int, stemmed: bool = True, extra_terms: Sequence[str] = ()
) -> dict[str, Any]:
    """BM25 on `text` (or `text.exact`); `extra_terms` (analysed typo variants) are matched as terms beside it."""
    match = lexical_query(query, stemmed)
    if extra_terms:
        match = {"bool": {"should": [match, {"terms": {"text": list(extra_terms)}}], "minimum_should_match": 1}}
    return {"size": depth, "_source": False, "query": {"bool": {"must": [match], "filter": visible(scopes)}}}


def identifier_body(identifiers: Sequence[str], scopes: Sequence[str], depth: int) -> dict[str, Any]:
    """Chunks holding any of the identifiers, scored by how many (one constant-score clause each)."""
    each = [{"constant_score": {"filter": {"term": {"identifiers": i}}, "boost": 1.0}} for i in identifiers]
    query = {"bool": {"should": each, "minimum_should_match": 1, "filter": visible(scopes)}}
    return {"size": depth, "_source": False, "query": query, "sort": [{"_score": "desc"}, {"chunk_id": "asc"}]}


def knn_query(vector: np.ndarray, depth: int, scopes: Sequence[str] | None, candidates: int = 0) -> dict[str, Any]:
    """Lucene-engine efficient filtering: the filter goes inside the knn clause, applied during the graph search
    (not after it, which could return fewer than k). The lucene engine's `k` is also its beam (how many candidates
    the graph search keeps, per segment): `candidates` widens it past `depth` (KORPUS_OPENSEARCH_KNN_CANDIDATES);
    the request's size still takes `depth`."""
    clause: dict[str, Any] = {"vector": [round(float(x), 7) for x in vector], "k": max(depth, candidates)}
    if scopes is not None:
        clause["filter"] = {"bool": {"filter": visible(scopes)}}
    return {"knn": {"embedding": clause}}


def knn_body(vector: np.ndarray, scopes: Sequence[str], depth: int, candidates: int = 0) -> dict[str, Any]:
    return {"size": depth, "_source": False, "query": knn_query(vector, depth, scopes, candidates)}


STATE_FIELDS = ("lifecycle", "access", "owner", "tenant", "exception")
"""What a document carries of who sees it: the mirror's state, compared with the catalog's `chunk_states`."""


def absent(item: dict[str, Any]) -> bool:
    """A bulk item that updated nothing because the index lacks the document (not a refusal of the update)."""
    return item.get("status") == 404 and (item.get("error") or {}).get("type") == "document_missing_exception"


def chunk_document(
    chunk: Chunk, ordinal: int, vector: np.ndarray, doc_type: str | None, exception: bool = False
) -> dict[str, Any]:
    """A chunk as the template's document, `staged` until a switch makes it current."""
    loc = chunk.locator
    return {
        "chunk_id": chunk.chunk_id,
        "source_id": chunk.source_id,
        "source_version": chunk.source_version,
        "ordinal": ordinal,
        "page": loc.page,
        "t_start": loc.t_start,
        "t_end": loc.t_end,
        "section_path": chunk.section_path,
        "text": chunk.text,
        "body": chunk.body,
        "identifiers": extract_identifiers(chunk.body),
        "owner": chunk.owner,
        "access": chunk.access_rule,
        "tenant": chunk.tenant,
        "lifecycle": "staged",
        "doc_type": doc_type,
        "language": chunk.language,
        "policy_version": chunk.policy_version,
        "exception": exception,
        "regions": pack(chunk.regions),
        "embedding": [float(x) for x in vector],
    }


SETTLE_SECONDS = 3
"""How long a cluster that is not green may take to become green before it counts as not whole (`cluster_not_whole`):
a node lost stays so; a new index's shard copies start within it (on the topology, /health answered 503 twice
while a first refresh made its index, until session 36)."""


def settled_health(client: Any, seconds: float) -> dict[str, Any] | None:
    """The cluster's health once it is green, or as it stands after `seconds` (OpenSearch answers a wait that runs
    out with 408 and the health then); None when it does not answer."""
    from opensearchpy.exceptions import OpenSearchException, TransportError

    try:
        # the wait's own `timeout` as a query parameter: given as a keyword, the client takes it for its HTTP timeout
        return client.cluster.health(
            params={"wait_for_status": "green", "timeout": f"{seconds:g}s"}, request_timeout=seconds + 30
        )
    except TransportError as exc:
        if exc.status_code == 408 and isinstance(exc.info, dict):
            return exc.info
        return None
    except OpenSearchException:
        return None


def cluster_not_whole(client: Any) -> dict[str, Any] | None:
    """Why the cluster is not whole, or None: red (a primary shard lost), or yellow on a cluster of several nodes (a
    node down or recovering: a shard copy unassigned), and still so after SETTLE_SECONDS. A single node is yellow by
    design (its replicas have nowhere to go) and is not counted."""
    from opensearchpy.exceptions import OpenSearchException

    try:
        state = client.cluster.health()
    except OpenSearchException:
        return None  # the search answered; a cluster that hides its health is not judged by it
    status, nodes = state.get("status"), state.get("number_of_nodes", 1)
    if status == "green" or (status == "yellow" and nodes < 2):
        return None
    state = settled_health(client, SETTLE_SECONDS)  # an index just made is red, then yellow, for a second
    if state is None:
        return None
    status, nodes = state.get("status"), state.get("number_of_nodes", 1)
    if status == "green":
        return None
    return {
        "cluster": status,
        "nodes": nodes,
        "unassigned_shards": state.get("unassigned_shards"),
        "error": f"the OpenSearch cluster is {status}: {state.get('unassigned_shards')} shard copies unassigned "
        f"on {nodes} nodes (a node down or recovering)",
    }

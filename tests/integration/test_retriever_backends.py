"""The same retriever-level tests over every search backend: the embedded SQLite index and the OpenSearch backend
on the session's real node (tests/integration/conftest.py `opensearch_url`). One `Retriever` composes both backends'
primitives, so routing, pins,
typo variants, scopes and lifecycle behave the same by construction; these tests hold each backend to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import page_chunks
from tasks.index.backend import SearchBackend
from tasks.index.opensearch import OpenSearchIndex
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import Retriever
from tests.unit.test_index_sqlite import DIMS as CATALOG_DIMS
from tests.unit.test_index_sqlite import _publish as publish_into

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]
DIMS = 4


@dataclass
class Store:
    """A backend and the writes that fill it (each backend's own publish and retire)."""

    backend: SearchBackend
    publish: Callable[[Source, list[Any], np.ndarray], None]
    retire: Callable[[str], None]


@pytest.fixture(params=["sqlite", "opensearch"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        index = SqliteIndex(tmp_path / "korpus.db")
        yield Store(
            index.searcher, lambda s, c, v: index.publish_version(s, c, v, 1, embed_model="m"), index.retire_source
        )
        index.close()
        return
    from opensearchpy import OpenSearch

    cluster = OpenSearchIndex(
        OpenSearch(hosts=[request.getfixturevalue("opensearch_url")], timeout=60),
        prefix=request.getfixturevalue("os_prefix"),
    )
    cluster.ensure("m", DIMS)
    yield Store(cluster, cluster.publish_version, cluster.retire_source)


def _publish(
    store: Store, source_id: str, version: str, text: str, access: str = "public", vector: list[float] | None = None
) -> None:
    source = Source(
        source_id=source_id,
        version=version,
        path="/x",
        kind=SourceKind.text,
        owner="o",
        access=access,
        tenant="default",
    )
    page = PageResult(source_id=source_id, source_version=version, page=1, text=text, method="plain-text")
    chunks, _ = page_chunks(source, [page])
    vectors = np.tile(np.asarray(vector or [1.0] * DIMS, dtype=np.float32), (len(chunks), 1))
    store.publish(source, chunks, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def _files(hits: list[dict[str, Any]]) -> list[str]:
    return [h["source_id"] for h in hits]


def _archive(store: Store) -> Retriever:
    _publish(store, "кровля.txt", "v1", "Служебная записка: прошу организовать ремонт кровли склада до зимы.")
    _publish(store, "огнетушители.txt", "v1", "Акт проверки: огнетушители с истёкшим сроком поверки заменить.")
    _publish(store, "договор.txt", "v1", "Договор поставки насосов. Поставщик ООО «Ромашка», ИНН 7707083893.")
    _publish(store, "премия.txt", "v1", "Приказ о премировании: премировать Смирнову за ремонт кровли.", access="hr")
    return Retriever(store.backend)


def test_scopes_are_enforced_and_no_scopes_find_nothing(store: Store) -> None:
    retriever = _archive(store)
    assert "премия.txt" not in _files(retriever.search("ремонт кровли", None, ["public"], mode="bm25"))
    assert "премия.txt" in _files(retriever.search("ремонт кровли", None, ["public", "hr"], mode="bm25"))
    assert retriever.search("ремонт кровли", None, [], mode="bm25") == []
    assert all(h["access"] == "public" for h in retriever.search("ремонт кровли", None, ["public"], mode="bm25-nostem"))


def test_a_new_version_replaces_the_old_and_a_retired_source_is_never_served(store: Store) -> None:
    retriever = _archive(store)
    _publish(store, "кровля.txt", "v2", "Служебная записка: ремонт кровли отменён.")
    hits = retriever.search("ремонт кровли", None, ["public"], mode="bm25")
    versions = {h["source_version"] for h in hits if h["source_id"] == "кровля.txt"}
    assert versions == {"v2"} and all(h["lifecycle"] == "current" for h in hits)
    store.retire("кровля.txt")
    assert "кровля.txt" not in _files(retriever.search("ремонт кровли", None, ["public"], mode="bm25"))


def test_an_identifier_in_the_query_ranks_its_document_first(store: Store) -> None:
    retriever = _archive(store)
    explain: dict[str, Any] = {}
    hits = retriever.search("ремонт кровли и ИНН 7707083893", None, ["public"], mode="bm25", explain=explain)
    assert _files(hits)[0] == "договор.txt" and explain["identifier_pins"] == 1
    assert hits[0]["explain"]["bm25_rank"] is not None  # the pinned chunk also matched the words


def test_a_mistyped_word_is_found_through_its_typo_variant(store: Store) -> None:
    retriever = _archive(store)
    explain: dict[str, Any] = {}
    hits = retriever.search("огнетушитли поверки", None, ["public"], mode="bm25", explain=explain)
    assert _files(hits)[0] == "огнетушители.txt"
    assert explain["typo_variants"] == {"огнетушитл": ["огнетушител"]}
    assert explain["backend"] == store.backend.name


def test_exact_occurrences_and_counts_honour_scopes(store: Store) -> None:
    retriever = _archive(store)
    found = retriever.exact_occurrences("ремонт кровли", ["public"])
    assert found["by_source"] == {"кровля.txt": 1} and found["occurrences"][0]["page"] == 1
    assert retriever.count_mentions("ремонт кровли", ["public", "hr"])["by_source"] == {
        "кровля.txt": 1,
        "премия.txt": 1,
    }
    assert retriever.count_mentions("ремонт кровли", [])["total"] == 0


def test_health_counts_what_the_backend_serves(store: Store) -> None:
    retriever = _archive(store)
    assert store.backend.health() == {"backend": store.backend.name, "status": "ok", "chunks_served": 4}
    _publish(store, "кровля.txt", "v2", "Служебная записка: ремонт кровли отменён.")
    store.retire("договор.txt")
    assert store.backend.health()["chunks_served"] == 3  # the new version replaced the old; the retired one is out
    assert retriever.search("насосов", None, ["public"], mode="bm25") == []


def test_convex_fusion_weighs_a_low_coverage_match_by_alpha_low(store: Store) -> None:
    """KORPUS_HYBRID_FUSION=convex with KORPUS_HYBRID_ALPHA_LOW: a paraphrase whose only BM25 hit is a stray word
    («складе») is fused with BM25 at alpha_low — at 0 the answer dense ranks first leads — and a question BM25 covers
    keeps alpha; on both backends, since the coverage is each backend's own."""
    roof = "Прошу организовать ремонт кровли административного здания."
    _publish(store, "roof.txt", "v1", roof, vector=[1, 0.1, 0, 0])
    _publish(store, "stray.txt", "v1", "Инвентаризация товаров на складе номер три.", vector=[1, 0.3, 0, 0])
    _publish(store, "other.txt", "v1", "Приказ о летнем режиме работы офиса.", vector=[0, 1, 0, 0])
    query = np.asarray([1, 0, 0, 0], dtype=np.float32)
    plain, low = Retriever(store.backend, fusion="convex"), Retriever(store.backend, fusion="convex", alpha_low=0.0)
    assert _files(plain.search("Когда починят крышу на складе?", query, ["public"]))[0] == "stray.txt"
    decided: dict[str, Any] = {}
    hits = low.search("Когда починят крышу на складе?", query, ["public"], explain=decided)
    assert _files(hits)[0] == "roof.txt" and decided["alpha"] == 0.0
    covered: dict[str, Any] = {}
    low.search("инвентаризация на складе", query, ["public"], explain=covered)
    assert covered["alpha"] == 0.5


def test_a_hybrid_search_on_the_cluster_is_one_round_trip_with_the_primitives_own_answers(
    opensearch_url: str, os_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prefetch` asks BM25, kNN, identifiers and the terms' counts in one `_msearch`, the hits' fields with them:
    the ranking, scores, coverage and hits are those the primitives get asking one at a time."""
    from opensearchpy import OpenSearch

    cluster = OpenSearchIndex(OpenSearch(hosts=[opensearch_url], timeout=60), prefix=os_prefix)
    cluster.ensure("m", DIMS)
    store = Store(cluster, cluster.publish_version, cluster.retire_source)
    _archive(store)
    _publish(
        store, "roof.txt", "v1", "Прошу организовать ремонт кровли административного здания.", vector=[1, 0.1, 0, 0]
    )
    query = np.asarray([1, 0, 0, 0], dtype=np.float32)
    cluster.check_query_vector(query)  # the alias's dimension, read once per process
    asked: list[str] = []
    perform = cluster.client.transport.perform_request
    monkeypatch.setattr(
        cluster.client.transport,
        "perform_request",
        lambda method, url, *a, **kw: asked.append(url) or perform(method, url, *a, **kw),
    )
    for text in ("ремонт кровли склада", "договор поставки ИНН 7707083893", "огнетушитли поверки"):
        for mode in ("hybrid", "hybrid-rrf", "bm25"):
            one: dict[str, Any] = {}
            asked.clear()
            prefetched = Retriever(cluster, fusion="convex", alpha_low=0.3).search(
                text, query, ["public"], mode=mode, explain=one
            )
            trips = list(asked)
            with monkeypatch.context() as alone:
                alone.setattr(cluster, "prefetch", lambda *_a: None)
                each: dict[str, Any] = {}
                asked.clear()
                primitives = Retriever(cluster, fusion="convex", alpha_low=0.3).search(
                    text, query, ["public"], mode=mode, explain=each
                )
            assert [(h["chunk_id"], h["score"]) for h in prefetched] == [
                (h["chunk_id"], h["score"]) for h in primitives
            ]
            assert prefetched == primitives and one.get("coverage") == pytest.approx(each.get("coverage"), abs=0.02)
            if "огнетушитли" in text:  # a typo: its variants are asked, and BM25 again with them
                assert trips[0].endswith("/_msearch") and len(trips) < len(asked), (trips, asked)
            else:
                assert trips == [trips[0]] and trips[0].endswith("/_msearch"), trips
                assert len(asked) >= 4, asked  # one request a primitive


def _roof_and_pipes(
    opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[SqliteIndex, OpenSearchIndex]:
    """A catalog of two one-chunk sources (a roof repair, pipes) mirrored to the node, its mark read at every search
    (the kept counts dropped the moment a sync lands)."""
    from opensearchpy import OpenSearch

    import tasks.index.opensearch as opensearch_module

    monkeypatch.setattr(opensearch_module, "STATISTICS_SECONDS", 0.0)
    path = tmp_path / "catalog.db"
    catalog = SqliteIndex(path)
    catalog.bind_embedding("m", CATALOG_DIMS)
    publish_into(catalog, "roof.txt", "v1", ["Прошу организовать ремонт кровли здания."], axis=0)
    publish_into(catalog, "pipes.txt", "v1", ["Акт о замене труб отопления."], axis=1)
    cluster = OpenSearchIndex(OpenSearch(hosts=[opensearch_url], timeout=60), prefix=os_prefix, catalog=path)
    cluster.sync_from(catalog)
    return catalog, cluster


def test_the_routing_counts_are_asked_once_between_two_syncs(
    opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#64 item 2: a term's document count, the total and whether the caller's scopes see a chunk holding it are
    asked of the cluster once and kept (tasks/index/opensearch.py `Statistics`) until a sync lands: the next search
    asks none of them and ranks the same; after a sync that adds a chunk holding the term, they are asked again and
    the count has grown. Without a catalog to say when a sync lands, nothing is kept."""
    catalog, cluster = _roof_and_pipes(opensearch_url, os_prefix, tmp_path, monkeypatch)
    client = cluster.client
    counts: list[dict[str, int]] = []  # each search: its counts asked, by term (None: all documents)
    sent = client.msearch

    def recording(*args: Any, **kwargs: Any) -> Any:
        answer = sent(*args, **kwargs)
        asked = {}
        for body, response in zip(kwargs["body"][1::2], answer["responses"], strict=True):
            if body.get("size") == 0 and body.get("track_total_hits") is True:
                term = body["query"].get("term", {}).get("text")
                asked[term] = response["hits"]["total"]["value"]
        counts.append(asked)
        return answer

    monkeypatch.setattr(client, "msearch", recording)
    vector = np.eye(CATALOG_DIMS, dtype=np.float32)[0]

    def search(on: OpenSearchIndex = cluster) -> list[tuple[str, float]]:
        hits = Retriever(on, fusion="convex", alpha_low=0.3).search("ремонт кровли", vector, ["public"], k=5)
        return [(h["chunk_id"], round(h["score"], 6)) for h in hits]

    first = search()
    assert counts[-1] and counts[-1][None] == 2, counts  # asked: the terms' counts and the total
    assert search() == first and counts[-1] == {}  # kept: nothing asked again
    held = dict(counts[0])
    publish_into(catalog, "roof-2.txt", "v1", ["Ремонт кровли склада назначен на май."], axis=2)
    cluster.sync_from(catalog)
    search()
    grown = counts[-1]
    assert grown[None] == held[None] + 1 and all(grown[t] == held[t] + 1 for t in held if t), (held, grown)
    assert search() and counts[-1] == {}
    bare = OpenSearchIndex(client, prefix=os_prefix)  # no catalog: no sync mark to trust
    search(bare)
    search(bare)
    assert counts[-1] and counts[-2], counts
    catalog.close()


def test_a_typos_variants_are_asked_once_between_two_syncs(
    opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#64 item 2: a mistyped term's close indexed terms (the term suggester) and whether the caller's scopes see a
    chunk holding each are kept with the routing counts until a sync lands: the same typo searched again asks the
    cluster for neither and finds the same; after a sync they are asked again."""
    catalog, cluster = _roof_and_pipes(opensearch_url, os_prefix, tmp_path, monkeypatch)
    client = cluster.client
    asked: list[str] = []  # each request outside a search's _msearch: a suggester's, a count's, or a search
    sent = client.search

    def recording(*args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("body") or {}
        asked.append("suggest" if "suggest" in body else "count" if body.get("size") == 0 else "search")
        return sent(*args, **kwargs)

    monkeypatch.setattr(client, "search", recording)
    vector = np.eye(CATALOG_DIMS, dtype=np.float32)[1]  # the pipes' vector: the roof is found by its words alone

    def search() -> list[tuple[str, str, float]]:
        hits = Retriever(cluster, fusion="convex", alpha_low=0.3).search("ремонт кравли", vector, ["public"], k=5)
        return [(h["source_id"], h["chunk_id"], round(h["score"], 6)) for h in hits]

    first = search()
    assert "suggest" in asked and "count" in asked, asked  # the typo's close terms, each judged in scope
    assert first and first[0][0] == "roof.txt", first
    asked.clear()
    assert search() == first
    assert "suggest" not in asked and "count" not in asked, asked  # kept: only the searches themselves
    publish_into(catalog, "roof-2.txt", "v1", ["Ремонт кровли склада назначен на май."], axis=2)
    cluster.sync_from(catalog)
    asked.clear()
    search()
    assert "suggest" in asked, asked  # a sync landed: asked again
    catalog.close()

"""The OpenSearch backend on a real node (OpenSearch 2.19.1 with the k-NN plugin's lucene engine, started once per
test session by tests/integration/conftest.py `opensearch_url`; KORPUS_OPENSEARCH_URL runs them on a user's cluster):
admin (template, alias, strict mapping), the `russian` analyzer, BM25, kNN with efficient filtering under access and
lifecycle, identifiers, routing statistics from `_termvectors`, the version switch, relabel, retire, exact and count.
Each test works under its own index prefix."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import page_chunks
from tasks.index.backend import IndexMismatchError
from tasks.index.opensearch import OpenSearchIndex
from tasks.retrieval.retriever import Retriever, retrieve
from tasks.text.analysis import analyse

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]
DIMS = 4


@pytest.fixture
def index(opensearch_url: str, os_prefix: str) -> Iterator[OpenSearchIndex]:
    from opensearchpy import OpenSearch

    idx = OpenSearchIndex(OpenSearch(hosts=[opensearch_url], timeout=60), prefix=os_prefix)
    idx.ensure("e5-small", DIMS)
    yield idx


def _publish(
    index: OpenSearchIndex,
    source_id: str,
    version: str,
    texts: list[str],
    access: str = "public",
    vector: np.ndarray | None = None,
    tenant: str = "default",
) -> Source:
    source = Source(
        source_id=source_id, version=version, path="/x", kind=SourceKind.text, owner="o", access=access, tenant=tenant
    )
    pages = [
        PageResult(source_id=source_id, source_version=version, page=i + 1, text=t, method="plain-text")
        for i, t in enumerate(texts)
    ]
    chunks, _ = page_chunks(source, pages)
    row = np.ones(DIMS, dtype=np.float32) if vector is None else np.asarray(vector, dtype=np.float32)
    index.publish_version(source, chunks, np.stack([row] * len(chunks)))
    return source


def test_admin_template_alias_strict_mapping_and_dimension_refusal(index: OpenSearchIndex) -> None:
    client = index.client
    name = f"{index.prefix}-chunks-e5-small-4"
    assert client.indices.get_alias(name=index.alias) == {name: {"aliases": {index.alias: {}}}}
    mapping = client.indices.get_mapping(index=name)[name]["mappings"]
    assert mapping["dynamic"] == "strict" and mapping["properties"]["text"]["analyzer"] == "russian"
    assert index.ensure("e5-small", DIMS) == name  # idempotent
    with pytest.raises(IndexMismatchError, match=name):
        index.ensure("bge-m3", 1024)
    from opensearchpy.exceptions import RequestError

    with pytest.raises(RequestError, match="strict"):
        client.index(index=index.alias, id="x", body={"unmapped": 1})


def test_lexical_search_is_filtered_and_never_serves_superseded(index: OpenSearchIndex) -> None:
    _publish(index, "a.txt", "v1", ["Стороны заключили договоры поставки насосов."])
    _publish(index, "hr.txt", "v1", ["Договоры, договоры и ещё раз договоры о премии."], access="hr")
    hits = retrieve(index, "договоры", None, ["public"], mode="bm25")
    assert [h["source_id"] for h in hits] == ["a.txt"]
    assert hits[0]["lifecycle"] == "current" and hits[0]["access"] == "public"
    assert retrieve(index, "договоры", None, [], mode="bm25") == []
    assert {h["source_id"] for h in retrieve(index, "договоры", None, ["public", "hr"], mode="bm25")} == {
        "a.txt",
        "hr.txt",
    }
    # A new version switches in: the old one's chunks are superseded and never returned.
    _publish(index, "a.txt", "v2", ["Стороны расторгли договоры поставки насосов."])
    hits = retrieve(index, "договоры", None, ["public"], mode="bm25")
    assert [h["source_version"] for h in hits] == ["v2"]
    assert "расторгли" in hits[0]["text"]


def test_failed_switch_leaves_the_old_version_serving(index: OpenSearchIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    _publish(index, "a.txt", "v1", ["Первая редакция приказа о пропускном режиме."])
    real = index._bulk

    def switch_fails(actions: list, refresh: bool | str = False) -> None:
        if refresh:
            raise RuntimeError("switch refused (injected)")
        real(actions, refresh)

    monkeypatch.setattr(index, "_bulk", switch_fails)
    with pytest.raises(RuntimeError, match="injected"):
        _publish(index, "a.txt", "v2", ["Вторая редакция приказа о пропускном режиме."])
    monkeypatch.undo()
    hits = retrieve(index, "приказ пропускном режиме", None, ["public"], mode="bm25")
    assert [h["source_version"] for h in hits] == ["v1"]  # v2 stays staged: stored, never served


def test_identifier_ranks_first_and_exact_field_is_unstemmed(index: OpenSearchIndex) -> None:
    _publish(index, "many.txt", "v1", ["Договор поставки, договор аренды, договор подряда: договор, договор."])
    _publish(index, "inn.txt", "v1", ["Поставщик ООО «Северный ветер», ИНН 7708123450."])
    hits = retrieve(index, "договор ИНН 7708123450", None, ["public"], mode="bm25")
    assert hits[0]["source_id"] == "inn.txt" and hits[0]["score"] > 1.0
    unstemmed = retrieve(index, "договора", None, ["public"], mode="bm25-nostem")
    assert unstemmed == []  # the exact field holds «договор», not «договора»


def test_exact_and_count_honour_access(index: OpenSearchIndex) -> None:
    _publish(index, "a.txt", "v1", ["Подписала Смирнова А. В.\nСогласовано: Смирнова А. В."])
    _publish(index, "hr.txt", "v1", ["Премировать Смирнову? Нет: премировать Смирнова А. В."], access="hr")
    found = index.exact_occurrences("Смирнова А. В.", ["public"])
    assert found["total"] == 2 and found["by_source"] == {"a.txt": 2}
    assert found["occurrences"][1]["line"] == "Согласовано: Смирнова А. В."
    assert Retriever(index).count_mentions("Смирнова А. В.", ["public", "hr"])["by_source"] == {"a.txt": 2, "hr.txt": 1}


def test_a_tenant_sees_only_its_own_scopes_on_every_mode(index: OpenSearchIndex) -> None:
    """#46 item 5: `public` is the default tenant's; `acme/public` the same rule in tenant `acme` — never each other's,
    on BM25, kNN, hybrid, exact and count (the cluster's filter; the catalog check is tested in test_mirror)."""
    _publish(index, "ours.txt", "v1", ["Договор поставки насосов, Смирнова А. В."], vector=_axis(0))
    _publish(index, "acme.txt", "v1", ["Договор поставки насосов, Смирнова А. В."], vector=_axis(0), tenant="acme")
    for scopes, seen in (
        (["public"], {"ours.txt"}),
        (["acme/public"], {"acme.txt"}),
        (["acme/hr"], set()),
        (["public", "acme/public"], {"ours.txt", "acme.txt"}),
    ):
        for mode in ("bm25", "dense", "hybrid-rrf"):
            hits = retrieve(index, "договор поставки насосов", _axis(0), scopes, mode=mode, k=5)
            assert {h["source_id"] for h in hits} == seen, (scopes, mode)
        assert set(index.exact_occurrences("Смирнова А. В.", scopes)["by_source"]) == seen, scopes


def test_relabel_and_retire_are_partial_updates(index: OpenSearchIndex) -> None:
    source = _publish(index, "a.txt", "v1", ["Служебная записка о ремонте кровли."])
    index.relabel_source(source.model_copy(update={"access": "hr"}))
    assert retrieve(index, "кровли", None, ["public"], mode="bm25") == []
    assert retrieve(index, "кровли", None, ["hr"], mode="bm25")[0]["access"] == "hr"
    index.retire_source("a.txt")
    assert retrieve(index, "кровли", None, ["hr"], mode="bm25") == []


def test_lexical_coverage_from_termvectors(index: OpenSearchIndex) -> None:
    _publish(index, "roof.txt", "v1", ["Прошу организовать ремонт кровли склада."])
    _publish(index, "other.txt", "v1", ["Инвентаризация товаров на складе."])
    top = retrieve(index, "ремонт кровли", None, ["public"], mode="bm25")[0]
    assert top["source_id"] == "roof.txt"
    assert index.coverage("ремонт кровли", top["chunk_id"]) == pytest.approx(1.0)
    partial = index.coverage("когда починят крышу склада", top["chunk_id"])
    assert 0.0 < partial < 0.35


def _axis(i: int, j: int | None = None, w: float = 0.2) -> np.ndarray:
    v = np.zeros(DIMS, dtype=np.float32)
    v[i] = 1.0
    if j is not None:
        v[j] = w
    return v / np.linalg.norm(v)


def test_knn_filters_inside_the_graph_search(index: OpenSearchIndex) -> None:
    _publish(index, "secret.txt", "v1", ["Премия сотруднику."], access="hr", vector=_axis(0))
    _publish(index, "near.txt", "v1", ["Ремонт кровли."], vector=_axis(0, 1))
    _publish(index, "far.txt", "v1", ["Приказ о режиме."], vector=_axis(2))
    hits = retrieve(index, "крыша", _axis(0), ["public"], mode="dense", k=5)
    assert [h["source_id"] for h in hits] == ["near.txt", "far.txt"]
    assert retrieve(index, "крыша", _axis(0), ["hr"], mode="dense", k=1)[0]["source_id"] == "secret.txt"


def test_hybrid_fuses_both_sides_and_filters(index: OpenSearchIndex) -> None:
    _publish(index, "lexical.txt", "v1", ["Договор поставки насосов."], vector=_axis(2))
    _publish(index, "dense.txt", "v1", ["Соглашение о закупке помп."], vector=_axis(0))
    _publish(index, "secret.txt", "v1", ["Договор поставки насосов, секретный."], access="hr", vector=_axis(0))
    hits = retrieve(index, "договор поставки насосов", _axis(0), ["public"], mode="hybrid-rrf", k=5)
    assert {h["source_id"] for h in hits} == {"lexical.txt", "dense.txt"}
    assert all(h["access"] == "public" and h["lifecycle"] == "current" for h in hits)


def test_hybrid_routes_a_paraphrase_to_dense(index: OpenSearchIndex) -> None:
    _publish(index, "roof.txt", "v1", ["Прошу организовать ремонт кровли."], vector=_axis(0, 1, 0.1))
    _publish(index, "stray.txt", "v1", ["Инвентаризация товаров на складе номер три."], vector=_axis(0, 1, 0.3))
    query, vector = "Когда починят крышу на складе?", _axis(0)
    assert retrieve(index, query, vector, ["public"], mode="hybrid")[0]["source_id"] == "roof.txt"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    documents=st.lists(
        st.tuples(st.sampled_from(("public", "hr")), st.sampled_from(("Кривошеин", "Остроумов"))),
        min_size=1,
        max_size=4,
    ),
    caller=st.sampled_from((["public"], ["hr"], ["public", "hr"])),
)
def test_typo_variants_come_only_from_what_the_callers_scopes_hold(
    opensearch_url: str, documents: list[tuple[str, str]], caller: list[str]
) -> None:
    """#61 item 4 on the cluster: a surname only `hr` holds is never offered to `public` as a "did you mean" (the
    term suggester knows no filters; each close candidate is checked under the caller's scopes)."""
    import uuid

    from opensearchpy import OpenSearch

    index = OpenSearchIndex(OpenSearch(hosts=[opensearch_url], timeout=60), prefix=f"t{uuid.uuid4().hex[:10]}")
    index.ensure("e5-small", DIMS)
    try:
        for n, (access, surname) in enumerate(documents):
            _publish(index, f"d{n}.txt", "v1", [f"Характеристика на сотрудника {surname} утверждена."], access=access)
        visible = {t for access, surname in documents if access in caller for t in analyse(surname)}
        for mistyped in ("Кривошейн", "Остроумав"):
            variants = index.typo_variants(analyse(mistyped), caller)
            offered = {v for found in variants.values() for v in found}
            assert offered <= visible, (offered, caller, documents)
            wanted = analyse(mistyped.replace("й", "и").replace("ав", "ов"))[0]
            assert (wanted in offered) == (wanted in visible), (wanted, offered, visible)
    finally:
        index.client.indices.delete(index=f"{index.prefix}-chunks-*", ignore=[404])
        index.client.indices.delete_index_template(name=f"{index.prefix}-chunks", ignore=[404])


def test_a_wider_knn_beam_finds_more_of_the_exact_neighbours(opensearch_url: str, os_prefix: str) -> None:
    """KORPUS_OPENSEARCH_KNN_CANDIDATES: a search kNN ranks alone keeps more candidates in its graph search and
    finds at least as many of the exact top 10 (over 2,000 random vectors: all 300 against 266 at the depth when
    written); a hybrid keeps its depth as its beam."""
    from opensearchpy import OpenSearch

    dims, rng = 32, np.random.default_rng(64)
    narrow = OpenSearchIndex(OpenSearch(hosts=[opensearch_url], timeout=120), prefix=os_prefix)
    narrow.ensure("e5-small", dims)
    vectors = rng.normal(size=(2000, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    source = Source(source_id="r.txt", version="v1", path="/x", kind=SourceKind.text, owner="o", access="public")
    pages = [
        PageResult(source_id="r.txt", source_version="v1", page=i + 1, text=f"страница {i}", method="plain-text")
        for i in range(len(vectors))
    ]
    chunks, _ = page_chunks(source, pages)
    assert len(chunks) == len(vectors)
    narrow.publish_version(source, chunks, vectors)
    wide = narrow.with_knn_candidates(500)
    ids = [c.chunk_id for c in chunks]
    found = {"narrow": 0, "wide": 0}
    for query in rng.normal(size=(30, dims)).astype(np.float32):
        query /= np.linalg.norm(query)
        exact = {ids[i] for i in np.argsort(-(vectors @ query))[:10]}
        for name, backend in (("narrow", narrow), ("wide", wide)):
            found[name] += len(exact & {key for key, _ in backend.vector(query, ["public"], 10)})
    assert found["wide"] >= found["narrow"] and found["wide"] >= 0.97 * 300, found
    with wide.snapshot():  # the hybrid's prefetch asks the depth as its beam, whatever the setting
        sent: list[dict] = []
        msearch = wide.client.msearch
        wide.client.msearch = lambda body, **kw: sent.append(body) or msearch(body=body, **kw)  # type: ignore[method-assign]
        try:
            wide.prefetch("страница", vectors[0], ["public"], 10, [])
        finally:
            wide.client.msearch = msearch  # type: ignore[method-assign]
    beams = [q["query"]["knn"]["embedding"]["k"] for body in sent for q in body if "knn" in q.get("query", {})]
    assert beams == [10], sent

"""Access holds on every query path, whoever asks and whatever they pass (hypothesis over principals, requested
scopes, extra parameters, queries and modes): the API's /search, /exact, /count, /sources and /meta (each scope's
meta-documents name only that scope's people), the viewer's /view, the CLI's search and exact search, and eval.
Zero hits outside the caller's granted scopes; superseded and withdrawn chunks never returned; asking for more
scopes than granted is a 403, never a wider answer. A second tenant (`acme`) holds documents under the same access
rules (`public`, `hr`): a key granted `public` never sees `acme`'s `public`, one granted `acme/public` sees only
that (#46 item 5: tenants enforced on every read path). The same catalog mirrored to a real OpenSearch node holds
to it too, through the API and through the cluster's own filters alone (#64 item 6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchmarks.api_load import page_chunks
from korpus.apps.api import create_app
from korpus.apps.cli import app as cli
from korpus.core.datamodel import Chunk, PageResult, Source, SourceKind, scope_of
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.index.backend import SEARCH_MODES
from tasks.index.sqlite import SqliteIndex
from tasks.meta.facts import FactCache
from tasks.meta.publish import meta_kind, refresh_meta
from tasks.retrieval.embedding import shared_embedder
from tasks.retrieval.evaluation import Expected, Question, evaluate

pytestmark = pytest.mark.integration
SCOPES = ("public", "hr", "finance", "legal")
TENANT_SCOPES = ("acme/public", "acme/hr")  # tenant `acme`, access rules named as the default tenant's
KEYS = {
    "k-pub": ["public"],
    "k-hr": ["public", "hr"],
    "k-fin": ["finance"],
    "k-all": list(SCOPES),
    "k-acme": ["acme/public"],
    "k-acme-all": list(TENANT_SCOPES),
    "k-both": ["public", "acme/public"],
}
TOPICS = (
    "приказ о премировании сотрудников",
    "договор поставки насосов",
    "протокол заседания комиссии",
    "служебная записка об отпусках",
)
WORDS = [
    "приказ",
    "премировании",
    "договор",
    "поставки",
    "насосов",
    "протокол",
    "комиссии",
    "записка",
    "отпусках",
    "сотрудников",
    "устаревший",
    "отозванный",
    *SCOPES,
]
SIGNED = {
    "public": "Смирнов А. Б.",
    "hr": "Кузнецова Е. В.",
    "finance": "Попов И. И.",
    "legal": "Лебедева О. П.",
    "acme/public": "Орлов П. С.",
    "acme/hr": "Зайцева М. Н.",
}
ACCESS: dict[str, str] = {}  # source id → the scope that may see it (access rule; tenant/access outside the default)
RETIRED: set[str] = set()  # chunk ids that must never come back


@pytest.fixture(scope="module")
def served(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Settings:
    data = tmp_path_factory.mktemp("access") / "data"
    settings = Settings(data=data, api_keys=KEYS, default_scopes=["public"])
    embedder = shared_embedder(str(embed_model_path(settings)))
    with SqliteIndex(settings.index_path) as index:

        def publish(source: Source, texts: list[str]) -> list[Chunk]:
            chunks = page_chunks(source, texts)
            pages = [
                PageResult(
                    source_id=source.source_id, source_version=source.version, page=n, text=text, method="plain-text"
                )
                for n, text in enumerate(texts, start=1)
            ]
            index.publish_version(
                source, chunks, embedder.embed_passages([c.text for c in chunks]), pages, embed_model=embedder.name
            )
            return chunks

        for scope in (*SCOPES, *TENANT_SCOPES):
            tenant, _, access = scope.rpartition("/")
            for n, topic in enumerate(TOPICS):
                source_id = f"{scope}/документ_{n}.txt"
                ACCESS[source_id] = scope
                source = Source(
                    source_id=source_id,
                    version=f"{scope}{n}".replace("/", "").ljust(64, "0"),
                    path="/x",
                    kind=SourceKind.text,
                    owner="Архив",
                    access=access,
                    tenant=tenant or None,
                )
                signed = f"Подписал(а) {SIGNED[scope]}."
                publish(
                    source, [f"{topic.capitalize()} ({scope}), раздел {i}. Номер 7{n}{i}. {signed}" for i in range(3)]
                )
        # a public document's old version, superseded by a new one; a chunk withdrawn by a reviewer
        old = Source(
            source_id="public/меняется.txt",
            version="a" * 64,
            path="/x",
            kind=SourceKind.text,
            owner="Архив",
            access="public",
        )
        RETIRED.update(c.chunk_id for c in publish(old, ["Устаревший приказ о премировании сотрудников."]))
        publish(old.model_copy(update={"version": "b" * 64}), ["Новый приказ о премировании сотрудников."])
        ACCESS["public/меняется.txt"] = "public"
        pulled = Source(
            source_id="public/отозван.txt",
            version="c" * 64,
            path="/x",
            kind=SourceKind.text,
            owner="Архив",
            access="public",
        )
        withdrawn = publish(pulled, ["Отозванный протокол заседания комиссии."])
        index.withdraw_chunk(withdrawn[0].chunk_id)
        RETIRED.add(withdrawn[0].chunk_id)
        ACCESS["public/отозван.txt"] = "public"
        # The meta-documents of each scope, built from that scope's sources (their registers name its signer).
        refresh_meta(
            index,
            FactCache(settings.meta_cache_dir),
            lambda chunks: embedder.embed_passages([c.text for c in chunks]),
            embedder.name,
        )
        for row in index.sources():
            if row["kind"] == "meta" and row["lifecycle"] == "current":
                ACCESS[row["source_id"]] = scope_of(row["access"], row["tenant"])
    assert sum(meta_kind(s) is not None for s in ACCESS) == 4 * (len(SCOPES) + len(TENANT_SCOPES))
    return settings


@pytest.fixture(scope="module")
def client(served: Settings) -> TestClient:
    return TestClient(create_app(served))


_queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
_scope_params = st.one_of(
    st.none(),
    st.lists(
        st.sampled_from(
            [*SCOPES, *TENANT_SCOPES, "HR", " hr ", "рublic", "*", "", "acme", "acme/*", "public,hr,finance,legal"]
        ),
        max_size=3,
    ).map(",".join),
)
_extras = st.dictionaries(
    st.sampled_from(["access", "access_rule", "tenant", "filter", "scope", "lifecycle"]),
    st.sampled_from(["hr", "legal", "*", "superseded", "quarantined"]),
    max_size=2,
)
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _get(client: TestClient, path: str, key: str | None, params: dict[str, str]) -> tuple[int, object]:
    query = "&".join(f"{quote(k)}={quote(v)}" for k, v in params.items())
    headers = {} if key is None else ({"X-API-Key": key} if len(key) % 2 else {"Authorization": f"Bearer {key}"})
    response = client.get(f"{path}?{query}", headers=headers)
    return response.status_code, response.json()


def _allowed(key: str | None, requested: str | None) -> tuple[int, set[str]]:
    """What the server must answer: (status, scopes the answer may draw on)."""
    if key not in KEYS:
        return 401, set()
    granted = set(KEYS[key])
    if requested is None:
        return 200, granted
    wanted = {s.strip() for s in requested.split(",") if s.strip()}
    return (403, set()) if wanted - granted else (200, wanted)


def _searched(
    client: TestClient, key: str | None, requested: str | None, extras: dict, q: str, mode: str
) -> tuple[int, set[str], dict[str, str]]:
    """/search, /exact and /count asked as `key` with `requested` scopes: each answers the status it must, and only
    from what the caller may see — never a superseded or withdrawn text; (status, scopes seen, params)."""
    expected_status, may_see = _allowed(key, requested)
    params = {**extras, "q": q, "mode": mode, "text": q, "k": "50", **({"scopes": requested} if requested else {})}
    if requested == "":  # an empty scopes= narrows to nothing at all
        params["scopes"] = ""
        expected_status, may_see = (200, set()) if key in KEYS else (401, set())
    for path in ("/search", "/exact", "/count"):
        status, body = _get(client, path, key, params)
        assert status == expected_status, (path, status, body)
        if status != 200:
            continue
        if path == "/search":
            assert all(ACCESS[h["source_id"]] in may_see and h["lifecycle"] == "current" for h in body)
            assert not {h["chunk_id"] for h in body} & RETIRED
        else:
            seen = {*body["by_source"], *(o["source_id"] for o in body.get("occurrences", []))}
            assert all(ACCESS[s] in may_see for s in seen), (path, seen, may_see)
            found = json.dumps(body.get("occurrences", []), ensure_ascii=False).lower()
            assert "устаревший" not in found and "отозванный" not in found
    return expected_status, may_see, params


@FUZZ
@given(
    key=st.sampled_from([*KEYS, None, "wrong-key"]),
    requested=_scope_params,
    extras=_extras,
    q=_queries,
    mode=st.sampled_from([m for m in SEARCH_MODES if m != "hybrid+rerank"]),
)
def test_api_never_answers_beyond_the_granted_scopes(
    client: TestClient, key: str | None, requested: str | None, extras: dict, q: str, mode: str
) -> None:
    expected_status, may_see, params = _searched(client, key, requested, extras, q, mode)
    for kind in ("toc", "chronology", "persons", "organisations"):
        status, body = _get(client, f"/meta/{kind}", key, {k: v for k, v in params.items() if k != "q"})
        assert status == expected_status, (kind, status, body)
        if status == 200:
            assert {ACCESS[d["source_id"]] for d in body} == may_see & {ACCESS[s] for s in ACCESS}, (kind, body)
            text = json.dumps(body, ensure_ascii=False)
            assert not any(name.split()[0][:-1] in text for scope, name in SIGNED.items() if scope not in may_see)
    for source_id, access in ACCESS.items():
        visible = expected_status == 200 and access in may_see
        scoped = {k: v for k, v in params.items() if k == "scopes"}
        status, _ = _get(client, f"/sources/{quote(source_id)}", key, scoped)
        assert status == (200 if visible else expected_status if expected_status != 200 else 404), (source_id, status)
        if meta_kind(source_id) is None and key in (None, *KEYS):
            viewed = client.get(f"/view/{quote(source_id)}", params=scoped, headers={"X-API-Key": key} if key else {})
            assert (viewed.status_code == 200) == visible, (source_id, viewed.status_code)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scopes=st.lists(st.sampled_from([*SCOPES, *TENANT_SCOPES]), min_size=1, max_size=3, unique=True),
    q=_queries,
    mode=st.sampled_from(["bm25", "hybrid", "dense"]),
)
def test_cli_search_and_exact_stay_inside_the_scopes_given(
    served: Settings, scopes: list[str], q: str, mode: str
) -> None:
    runner = CliRunner()
    given_scopes = ",".join(scopes)
    found = runner.invoke(
        cli, ["search", q, "--scopes", given_scopes, "--mode", mode, "-k", "50", "--json", "--data", str(served.data)]
    )
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)
    assert all(ACCESS[h["source_id"]] in scopes for h in hits) and not {h["chunk_id"] for h in hits} & RETIRED


def test_eval_counts_no_leaks_for_any_question_scopes(served: Settings) -> None:
    questions = [
        Question(
            id=f"q{i}",
            question=f"{TOPICS[i % 4]} {SCOPES[j]}",
            scopes=[SCOPES[j]],
            expected=[Expected(source_id=f"{SCOPES[j]}/документ_{i % 4}.txt")],
        )
        for i in range(4)
        for j in range(4)
    ]
    embedder = shared_embedder(str(embed_model_path(served)))
    with SqliteIndex(served.index_path) as index:
        for retriever in ("bm25", "dense", "hybrid"):
            report = evaluate(questions, index.searcher, embedder, retriever, ["public"], 0.8)
            assert report["leaks"] == {"denied_access": 0, "superseded": 0}
            assert report["recall@10"] == 1.0  # each question finds its own scope's document


@pytest.fixture(scope="module")
def cluster_client(served: Settings, opensearch_url: str) -> Iterator[tuple[TestClient, object]]:
    """The same catalog mirrored to the session's real OpenSearch node, served from it (#64 item 6: tenants on the
    cluster): every hit the cluster finds is also checked against the catalog, and this test holds both to it."""
    import uuid

    from tasks.index.opensearch import OpenSearchIndex, opensearch_index

    prefix = f"access{uuid.uuid4().hex[:8]}"
    on_cluster = served.model_copy(
        update={"backend": "opensearch", "opensearch_url": opensearch_url, "opensearch_prefix": prefix}
    )
    cluster = opensearch_index(on_cluster)
    try:
        with SqliteIndex(on_cluster.index_path) as index:
            assert cluster.sync_from(index)["indexed"] > 0
        # the cluster's own filters, without the catalog's check behind them (what a hit must pass first)
        raw = OpenSearchIndex(cluster.client, prefix=prefix)
        yield TestClient(create_app(on_cluster)), raw
    finally:
        cluster.client.indices.delete(index=f"{prefix}-chunks-*", ignore=[404])
        cluster.client.indices.delete_index_template(name=f"{prefix}-chunks", ignore=[404])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from([*KEYS, None, "wrong-key"]),
    requested=_scope_params,
    extras=_extras,
    q=_queries,
    mode=st.sampled_from(["bm25", "hybrid", "dense", "bm25-nostem"]),
)
@pytest.mark.opensearch
def test_the_cluster_never_answers_beyond_the_granted_scopes(
    cluster_client: tuple[TestClient, object], key: str | None, requested: str | None, extras: dict, q: str, mode: str
) -> None:
    """On OpenSearch, tenant `acme`'s public documents never reach a caller granted the default tenant's `public`
    (nor the reverse), on /search, /exact and /count, whatever scopes, parameters and mode are passed — and the
    cluster's own filters hold without the catalog's check behind them."""
    from tasks.retrieval.retriever import retrieve

    client, raw = cluster_client
    _, may_see, _ = _searched(client, key, requested, extras, q, mode)
    if may_see:
        hits = retrieve(raw, q, None, sorted(may_see), k=50, mode="bm25")
        assert all(ACCESS[h["source_id"]] in may_see for h in hits), (may_see, [h["source_id"] for h in hits])
        assert not {h["chunk_id"] for h in hits} & RETIRED
        found = raw.exact_occurrences(q, sorted(may_see))
        assert all(ACCESS[s] in may_see for s in found["by_source"]), (may_see, found["by_source"])

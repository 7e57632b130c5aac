"""KORPUS_BACKEND=opensearch: the session's SQLite catalog mirrored to the session's real OpenSearch node, and the HTTP
API answering from the mirror with the same server-side scopes."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from korpus.apps.api import create_app
from tasks.index.opensearch import opensearch_index
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import configured_embedder
from tasks.retrieval.retriever import retrieve

from .conftest import Refreshed

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]
HR_ORDER = "кадры/приказ_17-к.txt"


def test_mirror_serves_what_the_catalog_serves(
    refreshed: Refreshed, opensearch_url: str, os_prefix: str, tmp_path: Path
) -> None:
    data = refreshed.copy_index(tmp_path / "data")
    settings = refreshed.settings.model_copy(
        update={
            "data": data,
            "backend": "opensearch",
            "opensearch_url": opensearch_url,
            "opensearch_prefix": os_prefix,
            "api_keys": {"k-public": ["public"], "k-hr": ["public", "hr"]},
        }
    )
    cluster = opensearch_index(settings)
    with SqliteIndex(settings.index_path) as catalog:
        first = cluster.sync_from(catalog)
        current = catalog.chunk_count()
        assert first["indexed"] == current > 0
        assert sum(state[0] == "current" for state in cluster.states().values()) == current
        # idempotent, and a sync with nothing changed compares nothing (it reads the outbox, not the corpus)
        assert cluster.sync_from(catalog) == {"indexed": 0, "updated": 0, "deleted": 0, "compared": 0}
        embedded_exact = catalog.searcher.exact_occurrences("Смирновой", ["public", "hr"])

    client = TestClient(create_app(settings))
    public, hr = {"X-API-Key": "k-public"}, {"X-API-Key": "k-hr"}
    assert client.get("/health").json()["backend"] == "opensearch"
    # search_exact and count_mentions from the cluster equal the embedded index's answers.
    assert client.get("/exact", params={"text": "Смирновой"}, headers=hr).json() == embedded_exact
    assert HR_ORDER not in client.get("/count", params={"text": "Смирновой"}, headers=public).json()["by_source"]
    assert client.get("/search", params={"q": "премия", "scopes": "hr"}, headers=public).status_code == 403
    hits = client.get("/search", params={"q": "премия Смирновой", "mode": "bm25"}, headers=public).json()
    assert all(h["access"] == "public" and h["lifecycle"] == "current" for h in hits)
    assert (
        client.get("/search", params={"q": "премия Смирновой", "mode": "bm25"}, headers=hr).json()[0]["source_id"]
        == HR_ORDER
    )

    # A change in the catalog reaches the cluster at the next sync: relabelled, then retired.
    with SqliteIndex(settings.index_path) as catalog:
        source, _ = catalog.current_source("договоры/договор_поставки_45-17.pdf")
        catalog.relabel_source(source.model_copy(update={"access": "hr"}))
        relabelled = len(catalog.source_chunks(source.source_id))
        report = cluster.sync_from(catalog)
        assert report["updated"] == report["compared"] == relabelled > 0  # that source's chunks, nothing else
        query = {"q": "договор поставки", "mode": "bm25", "k": 20}
        assert all(h["access"] == "public" for h in client.get("/search", params=query, headers=public).json())
        assert "договоры/договор_поставки_45-17.pdf" not in {
            h["source_id"] for h in client.get("/search", params=query, headers=public).json()
        }
        catalog.retire_source("договоры/договор_поставки_45-17.pdf")
        cluster.sync_from(catalog)
        assert "договоры/договор_поставки_45-17.pdf" not in {
            h["source_id"] for h in client.get("/search", params=query, headers=hr).json()
        }
        retired = {c for c, state in cluster.states().items() if state[0] != "current"}
        assert retired  # kept in the cluster as superseded while the catalog keeps the version (retention)

    # korpus gc removes the expired versions from the catalog; the next sync deletes them from the cluster.
    import time

    from tasks.index.retention import collect_garbage

    time.sleep(1.1)  # the catalog's times have whole seconds: past the retirement's second
    assert collect_garbage(settings, retention_days=0)["chunks"] >= len(retired)
    with SqliteIndex(settings.index_path) as catalog:
        assert cluster.sync_from(catalog)["deleted"] == len(retired)
        assert set(cluster.states()) == set(catalog.chunk_states())

        # Changes behind korpus's back — a document lost, one relabelled, one the catalog never held: the outbox
        # knows nothing of them, a reconcile (both sides walked in order, two ids a page: every page boundary
        # crossed) repairs them.
        current = [c for c, state in catalog.chunk_states().items() if state[0] == "current"]
        lost, tampered = current[0], current[1]
        stray = cluster.client.get(index=cluster.alias, id=tampered)["_source"] | {"chunk_id": "0-stray"}
        cluster.client.delete(index=cluster.alias, id=lost)
        cluster.client.update(index=cluster.alias, id=tampered, body={"doc": {"access": "tampered"}})
        cluster.client.index(index=cluster.alias, id="0-stray", body=stray, refresh=True)
        assert cluster.sync_from(catalog)["compared"] == 0
        report = cluster.sync_from(catalog, batch=2, full=True)
        assert (report["indexed"], report["updated"], report["deleted"]) == (1, 1, 1), report
        assert report["compared"] == 2 * len(catalog.chunk_states())
        assert cluster.states() == {c: tuple(s) for c, s in catalog.chunk_states().items()}
        assert cluster.client.get_all_pits().get("pits", []) == []  # the walk's point in time is closed


def test_cli_syncs_and_reads_through_the_mirror(
    refreshed: Refreshed, opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from korpus.apps.cli import app

    data = refreshed.copy_index(tmp_path / "data")
    runner = CliRunner()
    monkeypatch.setenv("KORPUS_OPENSEARCH_URL", opensearch_url)
    monkeypatch.setenv("KORPUS_OPENSEARCH_PREFIX", "c")
    synced = runner.invoke(app, ["sync-opensearch", "--data", str(data)])
    assert synced.exit_code == 0 and "c-chunks:" in synced.stdout and " indexed," in synced.stdout
    reconciled = runner.invoke(app, ["opensearch", "reconcile", "--data", str(data)])
    assert reconciled.exit_code == 0 and "0 indexed, 0 updated, 0 deleted" in reconciled.stdout, reconciled.output
    embedded = json.loads(runner.invoke(app, ["exact", "Смирновой", "--json", "--data", str(data)]).stdout)
    monkeypatch.setenv("KORPUS_BACKEND", "opensearch")
    mirrored = runner.invoke(app, ["exact", "Смирновой", "--json", "--data", str(data)])
    assert mirrored.exit_code == 0 and json.loads(mirrored.stdout) == embedded
    monkeypatch.delenv("KORPUS_OPENSEARCH_URL")
    refused = runner.invoke(app, ["sync-opensearch", "--data", str(data)])
    assert refused.exit_code == 2 and "KORPUS_OPENSEARCH_URL" in refused.output


def test_refresh_flow_mirrors_each_run(models, opensearch_url: str, os_prefix: str, tmp_path: Path) -> None:
    from flows.corpus_refresh import run_refresh
    from korpus.core.settings import Settings

    root = tmp_path / "root"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    (root / "записка.txt").write_text("Служебная записка о ремонте кровли склада.\n", encoding="utf-8")
    settings = Settings(
        data=tmp_path / "data", backend="opensearch", opensearch_url=opensearch_url, opensearch_prefix=os_prefix
    )
    first = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as catalog:
        # the document went to the cluster as it was published (streamed); the refresh's own sync at its end sent
        # only the meta-documents built after it
        assert first["opensearch"]["indexed"] == catalog.chunk_count() - first["chunks_indexed"] > 0
        assert 0 < first["opensearch_first_searchable_seconds"] < first["seconds"], first
        assert opensearch_index(settings).states() == {c: tuple(s) for c, s in catalog.chunk_states().items()}
    (root / "записка.txt").write_text("Служебная записка: ремонт кровли отменён.\n", encoding="utf-8")
    second = run_refresh(root, settings)
    assert second["opensearch_first_searchable_seconds"] is not None and second["opensearch"].get("pending") is None
    with SqliteIndex(settings.index_path) as catalog:  # the new version current, the old one superseded, as served
        assert opensearch_index(settings).states() == {c: tuple(s) for c, s in catalog.chunk_states().items()}
    hits = retrieve(opensearch_index(settings), "кровли", None, ["public"], mode="bm25", k=10)
    files = [h for h in hits if h["source_id"] == "записка.txt"]
    assert len(files) == 1 and "отменён" in files[0]["text"]
    # The table of contents lists the new title, and only its new build is served from the mirror.
    toc = [h for h in hits if h["source_id"] == "korpus://meta/public/Оглавление коллекции"]
    assert len(toc) == 1 and "отменён" in toc[0]["text"]
    # The cluster holds the search terms and the vectors; the catalog file no terms, and no vector of a chunk the
    # cluster holds but the meta-documents' parts (their next build reuses them), until a refresh on the embedded
    # backend builds them again from the stored text.
    with SqliteIndex(settings.index_path) as catalog:
        assert not catalog.keeps_search_terms() and not catalog.keeps_vectors()
        assert catalog.conn.execute("SELECT count(*) FROM chunk_tokens").fetchall() == [(0,)]
        assert catalog.conn.execute("SELECT count(*) FROM chunk_terms_docsize").fetchall() == [(0,)]
        held = catalog.conn.execute(
            f"SELECT c.source_id LIKE 'korpus://meta/%', count(*) FROM chunks c JOIN {catalog.vector_table()} v "
            "ON v.rowid = c.rowid GROUP BY 1"
        ).fetchall()
        metas = catalog.conn.execute("SELECT count(*) FROM chunks WHERE source_id LIKE 'korpus://meta/%'").fetchall()
        assert held == [(1, metas[0][0])] and metas[0][0] > 0
    query = configured_embedder(settings).embed_query("ремонт кровли")
    dense = retrieve(opensearch_index(settings), "ремонт кровли", query, ["public"], mode="dense", k=10)
    embedded = settings.model_copy(update={"backend": "sqlite"})
    run_refresh(root, embedded)
    with SqliteIndex(settings.index_path) as catalog:
        assert catalog.keeps_search_terms() and catalog.keeps_vectors()
        rows = catalog.conn.execute("SELECT count(*) FROM chunks").fetchall()
        assert catalog.conn.execute(f"SELECT count(*) FROM {catalog.vector_table()}").fetchall() == rows
        held = retrieve(catalog.searcher, "кровли", None, ["public"], mode="bm25", k=10)
        assert {h["source_id"] for h in held} == {h["source_id"] for h in hits}
        again = retrieve(catalog.searcher, "ремонт кровли", query, ["public"], mode="dense", k=10)
        assert [h["chunk_id"] for h in again] == [h["chunk_id"] for h in dense]
        assert [round(h["score"], 4) for h in again] == [round(h["score"], 4) for h in dense]


def test_the_viewer_and_cite_follow_a_hit_the_cluster_found(
    refreshed: Refreshed, opensearch_url: str, os_prefix: str, tmp_path: Path
) -> None:
    """KORPUS_BACKEND=opensearch: a hit /search found on the cluster links to /view, which shows its page with its
    words highlighted (the viewer reads the catalog, the authority), and `korpus cite` finds it; the access rule holds
    on both."""
    from typer.testing import CliRunner

    from korpus.apps.cli import app as cli

    data = refreshed.copy_index(tmp_path / "data")
    settings = refreshed.settings.model_copy(
        update={
            "data": data,
            "backend": "opensearch",
            "opensearch_url": opensearch_url,
            "opensearch_prefix": os_prefix,
            "api_keys": {"k-public": ["public"], "k-hr": ["public", "hr"]},
        }
    )
    with SqliteIndex(settings.index_path) as catalog:
        opensearch_index(settings).sync_from(catalog)
    client = TestClient(create_app(settings))
    hits = client.get("/search", params={"q": "ремонт кровли склада", "k": 3}, headers={"X-API-Key": "k-public"})
    scan = next(h for h in hits.json() if h["source_id"] == "сканы/протокол_1998.pdf")
    page = client.get(scan["view"], headers={"X-API-Key": "k-public"})
    assert page.status_code == 200 and page.text.count('class="region"') == len(scan["regions"]) > 0
    hr = client.get("/search", params={"q": "премия Смирновой", "mode": "bm25"}, headers={"X-API-Key": "k-hr"}).json()
    hr_hit = next(h for h in hr if h["source_id"] == HR_ORDER)
    assert client.get(hr_hit["view"], headers={"X-API-Key": "k-public"}).status_code == 404
    runner = CliRunner()
    env = {
        "KORPUS_BACKEND": "opensearch",
        "KORPUS_OPENSEARCH_URL": opensearch_url,
        "KORPUS_OPENSEARCH_PREFIX": os_prefix,
    }
    cited = runner.invoke(cli, ["cite", scan["chunk_id"], "--json", "--data", str(data)], env=env)
    assert cited.exit_code == 0 and '"page"' in cited.stdout, cited.output
    refused = runner.invoke(cli, ["cite", hr_hit["chunk_id"], "--data", str(data)], env=env)
    assert refused.exit_code == 2


def test_a_first_refresh_makes_the_cluster_index_before_its_first_group(
    models, opensearch_url: str, os_prefix: str, tmp_path: Path
) -> None:
    """`prepare` (at a refresh's start) makes the template, index and alias for a catalog with no model yet, from
    the configured model's manifest; a sync making the same index at the same time does not fail on it; a catalog
    that has its model already is left to its syncs."""
    import threading

    from korpus.core.model_store import declared_dims, embed_model_path
    from korpus.core.settings import Settings
    from tasks.index.opensearch import prepare

    settings = Settings(
        data=tmp_path / "data", backend="opensearch", opensearch_url=opensearch_url, opensearch_prefix=os_prefix
    )
    cluster = opensearch_index(settings)
    model = embed_model_path(settings)
    errors: list[Exception] = []

    def race() -> None:
        try:
            cluster.ensure(model.name, declared_dims(model) or 0)
        except Exception as exc:  # a create that lost the race must not fail the sync
            errors.append(exc)

    racing = threading.Thread(target=race)
    thread = prepare(settings)
    racing.start()
    assert thread is not None
    thread.join(60)
    racing.join(60)
    assert not errors, errors
    assert cluster.client.indices.exists_alias(name=cluster.alias)
    (index,) = cluster.client.indices.get_alias(name=cluster.alias)
    assert index.endswith(f"-{declared_dims(model)}")
    with SqliteIndex(settings.index_path) as catalog:
        catalog.bind_embedding(model.name, 384)
    assert prepare(settings) is None


def test_an_outbox_sync_writes_each_change_without_reading_the_cluster(
    opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision's sync is one bulk of partial updates and an index refresh, nothing read first; a chunk written
    since the last sync began is indexed at once; an update the cluster answers "document missing" (a document lost
    behind korpus's back, or a chunk whose rowid is not past the mirror's mark) is indexed in its catalog state."""
    import json

    from korpus.core.settings import Settings
    from tasks.index import catalog_check
    from tests.unit.test_index_sqlite import DIMS, _publish

    settings = Settings(data=tmp_path / "data", opensearch_url=opensearch_url, opensearch_prefix=os_prefix)
    settings.data.mkdir()
    cluster = opensearch_index(settings)
    sent: list[tuple[str, str]] = []  # (action, chunk id) of every bulk action, in order
    reads: list[str] = []
    client = cluster.client

    def recording(name: str):
        call = getattr(client, name)

        def recorded(*args, **kwargs):
            if name != "bulk":
                reads.append(name)
            else:
                body = kwargs["body"]
                lines = [json.loads(line) for line in body.splitlines()] if isinstance(body, str) else body
                sent.extend(
                    (kind, meta["_id"])
                    for line in lines
                    if len(line) == 1 and (kind := next(iter(line))) in ("index", "update", "delete")
                    for meta in line.values()
                )
            return call(*args, **kwargs)

        return recorded

    for name in ("bulk", "mget", "search", "get", "count", "msearch"):
        monkeypatch.setattr(client, name, recording(name))

    def synced(catalog: SqliteIndex) -> dict[str, int]:
        sent.clear()
        reads.clear()
        return cluster.sync_from(catalog)

    def mirrored(catalog: SqliteIndex) -> bool:
        return cluster.states() == {c: tuple(s) for c, s in catalog.chunk_states().items()}

    with SqliteIndex(settings.index_path) as catalog:
        catalog.bind_embedding("m", DIMS)
        letter = _publish(catalog, "письмо.txt", "v1", ["Письмо о поставке насосов.", "Приложение: спецификация."])
        act = _publish(catalog, "акт.txt", "v1", ["Акт приёмки работ.", "Подписи сторон."])
        first = synced(catalog)  # the first sync compares everything, reading the cluster
        assert first["indexed"] == len(catalog.chunk_states()) > 0 and reads

        # a review decision: the letter's chunks relabelled — one bulk of updates, nothing read
        letters = [row["chunk_id"] for row in catalog.source_chunks("письмо.txt")]
        catalog.relabel_source(letter.model_copy(update={"access": "hr"}))
        n = len(letters)
        assert synced(catalog) == {"indexed": 0, "updated": n, "deleted": 0, "compared": n}
        assert sorted(sent) == sorted(("update", c) for c in letters) and reads == []
        assert mirrored(catalog)

        # a new version: its chunks indexed at once (no update tried first), the old ones' lifecycle updated
        _publish(catalog, "письмо.txt", "v2", ["Письмо о поставке насосов, исправленное."], access="hr")
        new = {row["chunk_id"] for row in catalog.source_chunks("письмо.txt")}
        report = synced(catalog)
        assert (report["indexed"], report["updated"]) == (len(new), n), report
        assert {c for kind, c in sent if kind == "index"} == new and not {
            c for kind, c in sent if kind == "update"
        } & new
        assert reads == [] and mirrored(catalog)

        # a document lost behind korpus's back, then its source relabelled: the update finds it missing, and it is
        # indexed again in its catalog state
        acts = [row["chunk_id"] for row in catalog.source_chunks("акт.txt")]
        client.delete(index=cluster.alias, id=acts[0], refresh=True)
        catalog.relabel_source(act.model_copy(update={"access": "hr"}))
        report = synced(catalog)
        assert (report["indexed"], report["updated"]) == (1, len(acts) - 1), report
        assert ("update", acts[0]) in sent and ("index", acts[0]) in sent and reads == []
        assert mirrored(catalog)

        # a new chunk not past the mirror's rowid mark (as when SQLite gives a deleted last row's rowid again): tried
        # as an update, found missing, indexed
        with catalog.write_transaction():
            catalog_check.mark_synced(catalog.conn, cluster.alias, catalog_check.generation(catalog.conn), None, 10**9)
        _publish(catalog, "акт.txt", "v2", ["Акт приёмки работ, второй экземпляр."], access="hr")
        second = {row["chunk_id"] for row in catalog.source_chunks("акт.txt")}
        report = synced(catalog)
        assert report["indexed"] == len(second) and {("update", c) for c in second} <= set(sent), report
        assert {("index", c) for c in second} <= set(sent) and reads == []
        assert mirrored(catalog)


def test_a_chunk_the_cluster_lost_gets_its_vector_again_from_the_model(
    models, opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KORPUS_BACKEND=opensearch: the catalog keeps a chunk's vector only until the cluster holds it. A document the
    cluster loses behind korpus's back is indexed again by the next sync (a decision's, or a reconcile) with its
    stored text embedded again by the configured model — the vector the refresh gave it. A mirror without the model
    says so and stays pending; nothing is marked synced that the cluster lacks."""
    import numpy as np

    from korpus.core.datamodel import PageResult, Source, SourceKind
    from korpus.core.settings import Settings
    from tasks.contract.chunking import page_chunks
    from tasks.index import catalog_check
    from tasks.index.backend import IndexMismatchError
    from tasks.index.opensearch import OpenSearchIndex
    from tasks.index.registry import keep_vectors

    settings = Settings(
        data=tmp_path / "data", backend="opensearch", opensearch_url=opensearch_url, opensearch_prefix=os_prefix
    )
    embedder = configured_embedder(settings)
    cluster = opensearch_index(settings, partial(configured_embedder, settings))  # as a refresh or a decision mirrors
    texts = {
        "письмо.txt": "Письмо о поставке насосов для котельной. Срок поставки — март.",
        "акт.txt": "Акт приёмки работ по ремонту кровли склада № 3. Замечаний нет.",
    }
    sources = {}
    with SqliteIndex(settings.index_path) as catalog:
        assert keep_vectors(settings, catalog, partial(configured_embedder, settings)) == 0
        assert not catalog.keeps_vectors()
        for name, text in texts.items():
            source = Source(
                source_id=name, version="v1", path="/x", kind=SourceKind.text, owner="o", access="public", tenant="t"
            )
            page = PageResult(source_id=name, source_version="v1", page=1, text=text, method="plain-text")
            chunks, _ = page_chunks(source, [page])
            vectors = embedder.embed_passages([c.text for c in chunks])
            catalog.publish_version(source, chunks, vectors, 1, embed_model=embedder.name)
            sources[name] = source
        table = catalog.vector_table()
        assert catalog.conn.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0] == catalog.chunk_count() > 1
        assert cluster.sync_from(catalog)["indexed"] == catalog.chunk_count()
        assert catalog.conn.execute(f"SELECT count(*) FROM {table}").fetchall() == [(0,)]  # handed to the cluster

        def vector_of(chunk_id: str) -> np.ndarray:
            got = cluster.client.get(index=cluster.alias, id=chunk_id, _source_includes=["embedding"])
            return np.asarray(got["_source"]["embedding"], dtype=np.float32)

        letter = next(row["chunk_id"] for row in catalog.source_chunks("письмо.txt"))
        act = next(row["chunk_id"] for row in catalog.source_chunks("акт.txt"))
        given = {c: vector_of(c) for c in (letter, act)}

        # lost, then its source relabelled: the mirror without the model cannot give it a vector, and says so
        cluster.client.delete(index=cluster.alias, id=letter, refresh=True)
        catalog.relabel_source(sources["письмо.txt"].model_copy(update={"access": "hr"}))
        mark = catalog_check.synced_outbox(catalog.conn, cluster.alias)
        blind = OpenSearchIndex(cluster.client, prefix=os_prefix, catalog=settings.index_path)
        with pytest.raises(IndexMismatchError, match="needs the embedding model"):
            blind.sync_from(catalog)
        assert catalog_check.synced_outbox(catalog.conn, cluster.alias) == mark  # pending, not marked synced
        report = cluster.sync_from(catalog)
        assert report["indexed"] == 1, report
        assert np.allclose(vector_of(letter), given[letter], atol=1e-5)
        assert cluster.states() == {c: tuple(s) for c, s in catalog.chunk_states().items()}

        # lost with no change in the catalog: the reconcile finds it, and embeds it again too
        cluster.client.delete(index=cluster.alias, id=act, refresh=True)
        assert cluster.sync_from(catalog)["indexed"] == 0  # nothing in the outbox
        assert cluster.sync_from(catalog, full=True)["indexed"] == 1
        assert np.allclose(vector_of(act), given[act], atol=1e-5)
        assert catalog.conn.execute(f"SELECT count(*) FROM {table}").fetchall() == [(0,)]

    # the same repair by hand: `korpus opensearch reconcile` loads the configured model for it
    from typer.testing import CliRunner

    from korpus.apps.cli import app

    cluster.client.delete(index=cluster.alias, id=letter, refresh=True)
    monkeypatch.setenv("KORPUS_OPENSEARCH_URL", opensearch_url)
    monkeypatch.setenv("KORPUS_OPENSEARCH_PREFIX", os_prefix)
    done = CliRunner().invoke(app, ["opensearch", "reconcile", "--data", str(settings.data)])
    assert done.exit_code == 0 and "1 indexed, 0 updated, 0 deleted" in done.stdout, done.output
    assert np.allclose(vector_of(letter), given[letter], atol=1e-5)

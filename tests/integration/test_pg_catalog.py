"""The catalog's serving part on a real PostgreSQL (tasks/index/pg_catalog.py): never wider than the SQLite catalog
at any step, exact once caught up, and what `korpus serve` checks every cluster hit against without a file.

The label-derivation machine (tests/unit/test_label_derivation.py: publishes, relabels by either path, reviewers'
releases of chunks stored with stale labels, retires) runs again with its file bound to the server behind a TCP
proxy that cuts the connection between a write's narrowing and its widening — the outage that matters, since the
SQLite commit lands between them. After every step: every chunk the server calls visible is visible the same way in
the file, and when the server applied the file's last change the two agree exactly, for every scope.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, rule

from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.settings import Settings
from tasks.contract.chunking import page_chunks
from tasks.index.pg_catalog import APPLIED_KEY, CatalogUnavailable, PgCatalog
from tasks.index.pg_schema import MIGRATIONS, migrate
from tasks.index.sqlite import SqliteIndex
from tests.integration.tcp_proxy import Cut, proxied_url, tcp_proxy
from tests.unit.test_label_derivation import SCOPES, Labels

pytestmark = pytest.mark.integration


def _source(name: str, access: str, version: str = "v1") -> Source:
    return Source(
        source_id=name, version=version, path="/x", kind=SourceKind.text, owner="o", access=access, tenant="default"
    )


def _archive(
    tmp_path: Path, files: dict[str, str], opensearch_url: str, os_prefix: str, catalog_url: str, **extra: Any
) -> tuple[Path, Settings]:
    """A public archive of these text files, and the settings of a writer refreshing it into the cluster with the
    catalog on PostgreSQL."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    writer = Settings(
        data=tmp_path / "data",
        backend="opensearch",
        opensearch_url=opensearch_url,
        opensearch_prefix=os_prefix,
        catalog_url=catalog_url,
        **extra,
    )
    return root, writer


def _publish(index: SqliteIndex, name: str, access: str, version: str = "v1") -> list[str]:
    source = _source(name, access, version)
    page = PageResult(source_id=name, source_version=version, page=1, text="Договор поставки насосов", method="x")
    chunks, _ = page_chunks(source, [page])
    vectors = np.ones((len(chunks), 8), dtype=np.float32)
    index.publish_version(source, chunks, vectors, 1)
    return [c.chunk_id for c in chunks]


def test_migrations_apply_once_and_are_recorded(catalog_url: str) -> None:
    import psycopg

    with psycopg.connect(catalog_url, autocommit=True) as conn:
        assert migrate(conn) == [m[0] for m in MIGRATIONS]
        assert migrate(conn) == []  # a second process opening the same server applies nothing
        recorded = conn.execute("SELECT version, name FROM korpus_schema ORDER BY version").fetchall()
    assert recorded == [(m[0], m[1]) for m in MIGRATIONS]


def test_a_write_the_server_cannot_narrow_is_not_made(catalog_url: str, tmp_path: Path, postgres_server: Any) -> None:
    """Bound, the file refuses a relabel while the server is cut off (it would go on serving the old scope); the
    write is rolled back whole, and made once the server answers again."""
    cut = Cut()
    with tcp_proxy(postgres_server.port, cut) as port, SqliteIndex(tmp_path / "k.db") as index:
        index.bind_serving_catalog(proxied_url(catalog_url, port))
        ids = _publish(index, "a.txt", "public")
        catalog = PgCatalog(catalog_url)
        assert set(catalog.served(ids, ["public"])) == set(ids)
        cut.set_down(True)
        moved = _source("a.txt", "hr")
        with pytest.raises(CatalogUnavailable):
            index.relabel_source(moved)
        assert index.source_version("a.txt", "v1")["access"] == "public"  # rolled back in the file too
        assert set(catalog.served(ids, ["public"])) == set(ids)
        cut.set_down(False)
        index.relabel_source(moved)
        assert catalog.served(ids, ["public"]) == {}
        assert set(catalog.served(ids, ["hr"])) == set(ids)
        catalog.close()


def test_a_server_holding_another_catalog_is_loaded_whole(catalog_url: str, tmp_path: Path) -> None:
    """Binding a second file to the same server empties it of the first one's chunks and loads the second's, in
    pages; the first file's next write takes it back the same way — one catalog a server, never a mix."""
    with SqliteIndex(tmp_path / "one.db") as one, SqliteIndex(tmp_path / "two.db") as two:
        first = _publish(one, "a.txt", "public")
        assert one.bind_serving_catalog(catalog_url) == len(first)
        second = _publish(two, "b.txt", "public", version="v9")
        assert two.bind_serving_catalog(catalog_url) == len(second)
        catalog = PgCatalog(catalog_url)
        assert catalog.served(first, ["public"]) == {}
        assert set(catalog.served(second, ["public"])) == set(second)
        third = _publish(one, "c.txt", "public")  # the first file writes again: the server is its own, whole
        assert catalog.served(second, ["public"]) == {}
        assert set(catalog.served(first + third, ["public"])) == {*first, *third}
        catalog.close()


class LabelsOnPostgres(Labels):
    """Labels, its file bound to the server; some writes lose the server between their narrowing and widening."""

    target: ClassVar[tuple[str, str, Cut] | None] = None
    """(the server's URL, the proxy's URL, the proxy's switch), set by the test."""
    lagged: ClassVar[int] = 0
    """Steps after which the server lagged the file (the test asserts some did: the outage was exercised)."""

    def __init__(self) -> None:
        super().__init__()
        assert self.target is not None
        self.direct, proxied, self.cut = self.target
        self.cut.set_down(False)
        self.index.bind_serving_catalog(proxied)
        self.cut_next = False
        writer = self.index.serving
        assert writer is not None
        narrow, widen = writer.narrow, writer.widen

        def narrow_then_maybe_cut() -> None:
            narrow()
            if self.cut_next:  # the SQLite commit follows; the widening will find no server
                self.cut.set_down(True)

        def widen_then_restore() -> int:
            try:
                return widen()
            finally:
                if self.cut_next:
                    self.cut_next = False
                    self.cut.set_down(False)

        writer.narrow, writer.widen = narrow_then_maybe_cut, widen_then_restore  # type: ignore[method-assign]
        self.catalog_reader = PgCatalog(self.direct)

    @rule()
    def lose_the_server_in_the_next_write(self) -> None:
        self.cut_next = True

    @rule()
    def catch_up(self) -> None:
        self.index.sync_serving_catalog()

    @invariant()
    def the_server_never_serves_wider_than_the_file(self) -> None:
        import psycopg

        in_file = {
            chunk_id: (visible, access)
            for chunk_id, visible, access in self.index.conn.execute(
                "SELECT c.chunk_id, v.visible, c.access FROM chunks c JOIN chunk_visibility v ON v.rowid = c.rowid"
            )
        }
        with psycopg.connect(self.direct, autocommit=True) as conn:
            on_server = {c: (v, a) for c, v, a in conn.execute("SELECT chunk_id, visible, access FROM chunk_access")}
            applied = dict(conn.execute("SELECT key, value FROM catalog_meta").fetchall()).get(APPLIED_KEY)
            server_sources = conn.execute(
                "SELECT source_id, version, access, tenant, lifecycle FROM catalog_sources"
            ).fetchall()
        for chunk_id, (visible, access) in on_server.items():
            if visible is not None:
                assert in_file.get(chunk_id) == (visible, access), (chunk_id, visible, access, in_file.get(chunk_id))
        file_sources = {
            (sid, version): (access, tenant, lifecycle)
            for sid, version, access, tenant, lifecycle in self.index.conn.execute(
                "SELECT source_id, version, access, tenant, lifecycle FROM sources"
            )
        }
        for sid, version, access, tenant, lifecycle in server_sources:  # what the viewer shows, as the file has it
            if lifecycle == "current":
                assert file_sources.get((sid, version)) == (access, tenant, lifecycle), (sid, version, access)
        head = self.index.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunk_outbox'").fetchall()
        caught_up = applied is not None and int(applied) >= (int(head[0][0]) if head else 0)
        if not caught_up:
            type(self).lagged += 1
            return
        served = {c: v for c, (v, _a) in in_file.items() if v is not None}
        assert {c: v for c, (v, _a) in on_server.items() if v is not None} == served
        for scope in SCOPES:  # and through the reads korpus serve makes
            expected = {c for c, v in served.items() if v == scope}
            assert set(self.catalog_reader.served(list(in_file), [scope])) == expected, scope

    def teardown(self) -> None:
        self.catalog_reader.close()
        super().teardown()


def test_the_label_machine_on_postgres_never_widens(
    catalog_url: str, postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = Cut()
    with tcp_proxy(postgres_server.port, cut) as port:
        monkeypatch.setattr(LabelsOnPostgres, "target", (catalog_url, proxied_url(catalog_url, port), cut))
        monkeypatch.setattr(LabelsOnPostgres, "lagged", 0)
        monkeypatch.setattr(
            LabelsOnPostgres.TestCase,
            "settings",
            settings(max_examples=30, stateful_step_count=10, deadline=None, suppress_health_check=list(HealthCheck)),
        )
        LabelsOnPostgres.TestCase().runTest()
        assert LabelsOnPostgres.lagged > 0  # the outage between narrowing and widening was among the steps


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    """A server nobody listens on: reads raise CatalogUnavailable (the API's 503), never an unchecked answer."""
    from tasks.runtime.postgres import free_port

    catalog = PgCatalog(f"postgresql://korpus@127.0.0.1:{free_port()}/korpus")
    with pytest.raises(CatalogUnavailable, match="cannot answer"):
        catalog.served(["x"], ["public"])
    with contextlib.suppress(CatalogUnavailable):
        catalog.close()


@pytest.mark.opensearch
def test_a_replica_without_a_file_checks_every_hit_on_postgres_and_says_503_while_it_is_down(
    models: Any, opensearch_url: str, os_prefix: str, catalog_url: str, postgres_server: Any, tmp_path: Path
) -> None:
    """#63 item 4: `korpus serve` with KORPUS_CATALOG_URL and the cluster reads no file of its own machine. Its hits
    are checked on the server (a relabel the cluster has not received yet is in force at once); while PostgreSQL is
    killed every search is a 503 that says the catalog cannot answer — never a hit served unchecked — and when it
    is back the same replica answers again."""
    from fastapi.testclient import TestClient

    from flows.corpus_refresh import run_refresh
    from korpus.apps.api import create_app
    from korpus.core.settings import Reviewer

    files = {
        "записка.txt": "Служебная записка о ремонте кровли склада.\n",
        "акт.txt": "Акт приёмки работ по замене труб отопления.\n",
    }
    root, writer = _archive(tmp_path, files, opensearch_url, os_prefix, catalog_url, meta_documents=False)
    replica_data = tmp_path / "replica"
    replica = TestClient(create_app(writer.model_copy(update={"data": replica_data})))
    # before the first refresh reached the cluster (no alias yet: a topology just brought up): nothing found, not
    # an error (a search there answered 500 on the topology until session 36)
    for path, params in (
        ("/search", {"q": "ремонт кровли"}),
        ("/exact", {"text": "кровли"}),
        ("/count", {"text": "кровли"}),
    ):
        empty = replica.get(path, params=params)
        assert empty.status_code == 200, (path, empty.text)
    assert replica.get("/search", params={"q": "ремонт кровли"}).json() == []
    empty = replica.get("/health")  # nothing to serve is nothing wrong
    assert empty.status_code == 200 and empty.json()["search"]["chunks_served"] == 0, empty.text
    run_refresh(root, writer)
    # the mirror's mark (a replica drops its kept routing counts when it moves): the server's equals the file's
    from tasks.index.catalog_check import SqliteCatalog

    server = PgCatalog(catalog_url)
    mark = server.synced_mark(f"{os_prefix}-chunks")
    server.close()
    assert mark == SqliteCatalog(writer.index_path).synced_mark(f"{os_prefix}-chunks") and None not in mark, mark
    for mode in ("bm25", "hybrid"):
        answer = replica.get("/search", params={"q": "ремонт кровли", "mode": mode})
        assert answer.status_code == 200, answer.text
        assert answer.json()[0]["source_id"] == "записка.txt", answer.json()
    cited = replica.get("/search", params={"q": "ремонт кровли", "mode": "bm25"}).json()[0]
    page = replica.get(f"/view/записка.txt?chunk={cited['chunk_id']}")  # the viewer, from PostgreSQL and the cluster
    assert page.status_code == 200 and "ремонте кровли" in page.text, page.text[:300]
    health = replica.get("/health")
    assert health.status_code == 200 and health.json()["catalog"] == "postgresql", health.json()
    assert health.json()["chunks_current"] == 2
    # /sources from PostgreSQL: what the writer's own server answers from the file
    from_file = TestClient(create_app(writer.model_copy(update={"catalog_url": None}))).get("/sources/записка.txt")
    assert from_file.status_code == 200
    assert replica.get("/sources/записка.txt").json() == from_file.json()
    assert replica.get("/sources/записка.txt", params={"scopes": "hr"}).status_code in (403, 404)
    reviewing = writer.model_copy(
        update={"data": replica_data, "review_keys": {"r": Reviewer(name="р", scopes=["public"])}}
    )
    review = TestClient(create_app(reviewing)).get("/review/api/items", headers={"X-API-Key": "r"})
    assert review.status_code == 503 and "review on the refreshing machine" in review.text, review.text[:300]

    with SqliteIndex(writer.index_path) as index:  # the writer's relabel; the cluster is not synced after it
        (version,) = index.indexed_versions()["записка.txt"]
        index.relabel_source(_source("записка.txt", "hr", version))
    answer = replica.get("/search", params={"q": "ремонт кровли", "mode": "bm25"})
    assert answer.status_code == 200 and "записка.txt" not in {h["source_id"] for h in answer.json()}
    assert replica.get(f"/view/записка.txt?chunk={cited['chunk_id']}").status_code == 404  # nor its page
    assert replica.get("/sources/записка.txt").status_code == 404  # nor its row

    postgres_server.kill()
    try:
        for path, params in (("/search", {"q": "замене труб", "mode": "bm25"}), ("/exact", {"text": "труб"})):
            refused = replica.get(path, params=params)
            assert refused.status_code == 503, refused.text
            assert "catalog cannot answer" in refused.json()["detail"]
        assert replica.get("/health").status_code == 503
    finally:
        postgres_server.start()
    answer = replica.get("/search", params={"q": "замене труб", "mode": "bm25"})
    assert answer.status_code == 200 and answer.json()[0]["source_id"] == "акт.txt"
    assert not [p for p in replica_data.rglob("*") if p.suffix in (".db", ".sqlite", ".db-wal")]


@pytest.mark.opensearch
def test_a_replica_reads_the_meta_documents_from_postgres(
    models: Any, opensearch_url: str, os_prefix: str, catalog_url: str, tmp_path: Path
) -> None:
    """/meta on a stateless replica: the meta-documents' parts travel with their rows, and the answer is the one the
    writer's file gives, for every kind; a relabel that takes a scope's sources away takes its registers away."""
    from fastapi.testclient import TestClient

    from flows.corpus_refresh import run_refresh
    from korpus.apps.api import create_app

    order = "Приказ от 12 марта 1998 года. Директор Иван Петрович Сидоров поручил ООО «Ромашка» ремонт склада.\n"
    root, writer = _archive(tmp_path, {"приказ.txt": order}, opensearch_url, os_prefix, catalog_url)
    run_refresh(root, writer)
    replica = TestClient(create_app(writer.model_copy(update={"data": tmp_path / "replica"})))
    from_file = TestClient(create_app(writer.model_copy(update={"catalog_url": None})))
    shown = {}
    for kind in ("toc", "chronology", "persons", "organisations"):
        answer = replica.get(f"/meta/{kind}")
        assert answer.status_code == 200, answer.text
        assert answer.json() == from_file.get(f"/meta/{kind}").json(), kind
        shown[kind] = answer.json()
    assert shown["toc"] and "приказ.txt" in "".join(shown["toc"][0]["parts"]), shown["toc"]
    assert replica.get("/meta/nothing").status_code == 404

    # the CLI on that machine: `korpus search` and `korpus cite` read what serve reads there, with no file
    from typer.testing import CliRunner

    from korpus.apps.cli import app

    env = {
        "KORPUS_BACKEND": "opensearch",
        "KORPUS_OPENSEARCH_URL": opensearch_url,
        "KORPUS_OPENSEARCH_PREFIX": os_prefix,
        "KORPUS_CATALOG_URL": catalog_url,
    }
    at = ["--data", str(tmp_path / "replica")]
    found = CliRunner().invoke(app, ["search", "ремонт склада", "--mode", "bm25", "--json", *at], env=env)
    assert found.exit_code == 0, found.output
    hit = next(h for h in json.loads(found.output) if h["source_id"] == "приказ.txt")
    cited = CliRunner().invoke(app, ["cite", hit["chunk_id"], "--json", *at], env=env)
    assert cited.exit_code == 0, cited.output
    assert json.loads(cited.output)["source_id"] == "приказ.txt" and json.loads(cited.output)["page"] == 1
    unknown = CliRunner().invoke(app, ["cite", "no-such-chunk", *at], env=env)
    assert unknown.exit_code == 2 and "no current chunk" in unknown.output

    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: hr\n", encoding="utf-8")
    run_refresh(root, writer)  # relabelled: the public registers are withdrawn, nothing public remains to list
    assert replica.get("/meta/toc").json() == from_file.get("/meta/toc").json() == []
    hidden = CliRunner().invoke(app, ["cite", hit["chunk_id"], *at], env=env)  # relabelled out of public
    assert hidden.exit_code == 2 and "no current chunk" in hidden.output
    assert not [p for p in (tmp_path / "replica").rglob("*") if p.suffix in (".db", ".sqlite", ".db-wal")]


def test_catalog_sync_and_status_through_the_cli(catalog_url: str, tmp_path: Path) -> None:
    """`korpus catalog sync` binds the file and loads the server; `status` reports it; both say plainly what is
    missing (no URL, no catalog, a server that does not answer: exit 3)."""
    import json

    from typer.testing import CliRunner

    from korpus.apps.cli import app
    from tasks.runtime.postgres import free_port

    data = tmp_path / "data"
    runner = CliRunner()
    no_file = runner.invoke(app, ["catalog", "sync", "--data", str(data)], env={"KORPUS_CATALOG_URL": catalog_url})
    assert no_file.exit_code != 0 and "no catalog" in no_file.output
    with SqliteIndex(data / "korpus.db") as index:
        ids = _publish(index, "a.txt", "public")
    no_url = runner.invoke(app, ["catalog", "sync", "--data", str(data)], env={"KORPUS_CATALOG_URL": ""})
    assert no_url.exit_code != 0 and "KORPUS_CATALOG_URL" in no_url.output
    synced = runner.invoke(app, ["catalog", "sync", "--data", str(data)], env={"KORPUS_CATALOG_URL": catalog_url})
    assert synced.exit_code == 0, synced.output
    assert f"{len(ids)} chunk state(s) written" in synced.output
    status = runner.invoke(app, ["catalog", "status", "--data", str(data)], env={"KORPUS_CATALOG_URL": catalog_url})
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["chunks_current"] == len(ids)
    gone = f"postgresql://korpus@127.0.0.1:{free_port()}/korpus"
    down = runner.invoke(app, ["catalog", "status", "--data", str(data)], env={"KORPUS_CATALOG_URL": gone})
    assert down.exit_code == 3 and "cannot answer" in down.output


def test_writers_in_parallel_leave_the_server_exact(catalog_url: str, tmp_path: Path) -> None:
    """Three connections to one bound file (a refresh's workers and a reviewer are such) relabel and retire at once:
    each write takes SQLite's lock, then the server's advisory lock, and widens after its commit under the latter —
    none waits on the other forever, none is lost, and the server ends exactly as the file."""
    import threading

    import psycopg

    path = tmp_path / "k.db"
    with SqliteIndex(path) as index:
        index.bind_serving_catalog(catalog_url)
        names = [f"f{n}.txt" for n in range(6)]
        for name in names:
            _publish(index, name, "public")
    failures: list[BaseException] = []

    def writer(seed: int) -> None:
        try:
            with SqliteIndex(path) as index:
                for step in range(25):
                    name = names[(seed * 7 + step) % len(names)]
                    access = ("public", "hr", "legal")[(seed + step) % 3]
                    if step % 11 == 10:
                        index.retire_source(name)
                    else:
                        index.relabel_source(_source(name, access))
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a writer is stuck"
    assert not failures, failures
    with SqliteIndex(path) as index:
        in_file = {
            c: (v, a)
            for c, v, a in index.conn.execute(
                "SELECT c.chunk_id, v.visible, c.access FROM chunks c JOIN chunk_visibility v ON v.rowid = c.rowid"
            )
        }
    with psycopg.connect(catalog_url, autocommit=True) as conn:
        on_server = {c: (v, a) for c, v, a in conn.execute("SELECT chunk_id, visible, access FROM chunk_access")}
    assert on_server == in_file

"""The production topology, run whole on one machine, one part killed at a time (issue «The production topology»;
`make test-topology`, which CI runs after `make test`).

Every part is a process of its own (tasks/runtime/topology.py): PostgreSQL, a Prefect server on it, a process worker
polling the `korpus` work pool with deployments/prefect.yaml deployed (the nightly schedule shortened to an interval
for the test), a Dask scheduler with two workers, a three-node OpenSearch cluster and two `korpus serve` replicas
with two API keys (public; public and hr). The tests run in order on one topology: the schedule refreshes a corpus
that changes between runs; then a serve replica is SIGKILLed while searches run, a Dask worker while it holds OCR
work, an OpenSearch node while the refresh writes and searches are asked, the Prefect server with PostgreSQL. After
each: the refresh completes (or the next does), every chunk the catalog holds as current is served, searches never
return a chunk out of the caller's scope, a superseded or a removed one, and `korpus status` says degraded while the
part is down and ok once it is back. The teardown leaves no process. Recovery times are printed (`-s`) for the
closing note."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pymupdf
import pytest
import yaml

from corpora.sample_archive import _scan_pdf
from korpus.core.model_store import ensure_models
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.runtime import opensearch_node
from tasks.runtime.topology import REPO, SERVE_REPLICAS, Topology

pytestmark = pytest.mark.topology
KEYS = {"k-public": ["public"], "k-hr": ["public", "hr"]}
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\nrules:\n  - {match: 'кадры/**', access: hr}\n"
TIMINGS: dict[str, float] = {}
REREAD: dict[str, dict] = {}
"""Per kill, what the refresh after it read (its recorded changes), printed for the closing note."""


def _write(root: Path, name: str, text: str) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")


def _scans(root: Path, names: list[str]) -> None:
    for name in names:
        doc = pymupdf.open()
        pages = [
            ["АКТ № 7", "приёмки задвижек", "Принято без замечаний."],
            ["Приложение 1", "Перечень задвижек", "Задвижка ЗД-1, задвижка ЗД-2"],
        ]
        for page, lines in enumerate(pages):
            doc.insert_pdf(pymupdf.open(stream=_scan_pdf(lines, seed=page + len(name))))
        doc.save(root / name)


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    ensure_models(Settings())
    base = tmp_path_factory.mktemp("topology")
    root = base / "archive"
    _write(root, "korpus.yaml", MANIFEST)
    _write(root, "протокол.txt", "Протокол заседания комиссии по списанию имущества от 5 мая 2022 года.")
    _write(root, "старое.txt", "Старое письмо о закупке бумаги для канцелярии.")
    _write(root, "новости.txt", "Новости учреждения: открыт читальный зал архива.")
    _write(root, "кадры/приказ.txt", "Приказ о приёме на работу Петрова Петра Петровича на должность архивиста.")
    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text(encoding="utf-8"))
    nightly = next(d for d in spec["deployments"] if d["name"] == "nightly")
    nightly["schedules"] = [{"interval": 45}]  # shortened: the scheduler fires a refresh every 45 s
    prefect_file = base / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    # shortened for the test: a run without a heartbeat (every 30 s, Prefect's least) for 75 s is lost (the recipe:
    # 120 s), and a dead run's concurrency slot lapses after 30 s (Prefect's default 300 s)
    settings = {
        "KORPUS_API_KEYS": json.dumps(KEYS),
        "PREFECT_SERVER_CONCURRENCY_INITIAL_DEPLOYMENT_LEASE_DURATION": "30",
    }
    topology = Topology(
        base / "home", root, base / "data", prefect_file=prefect_file, settings_env=settings, lost_after=75
    )
    started = time.monotonic()
    try:
        topology.up()
        TIMINGS["up"] = time.monotonic() - started
        yield topology
    finally:
        pids = [pid for part in topology.state["parts"] for pid in topology.pids(part)]
        topology.down()
        shutil.rmtree(topology.pg_dir, ignore_errors=True) if topology.state.get("pg_dir") else None
        print("\ntopology timings (s):", {k: round(v, 1) for k, v in TIMINGS.items()})
        print("read by the refresh after each kill:", json.dumps(REREAD, ensure_ascii=False))
        left = [pid for pid in pids if _alive(pid)]
        assert not left, f"processes left after down: {left}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone, waiting for its parent
        return stat.read().split(") ")[-1][:1] != "Z"


def _client(topology: Topology):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    with temporary_settings(
        updates={PREFECT_API_URL: topology.api_url, PREFECT_API_AUTH_STRING: topology.prefect_auth}
    ):
        return get_client(sync_client=True)


def _nightly(client) -> object:
    return client.read_deployment_by_name("corpus_refresh/nightly")


def _wait(topology: Topology, run_id: object, timeout: float = 480) -> object:
    with _client(topology) as client:
        deadline = time.monotonic() + timeout
        while not (state := client.read_flow_run(run_id).state).is_final():
            assert time.monotonic() < deadline, f"run {run_id} did not finish: {state}"
            time.sleep(2)
        return state


def _run_now(topology: Topology) -> object:
    with _client(topology) as client:
        return client.create_flow_run_from_deployment(_nightly(client).id).id


def _wait_running(topology: Topology, run_id: object, timeout: float = 240) -> None:
    with _client(topology) as client:
        deadline = time.monotonic() + timeout
        while not client.read_flow_run(run_id).state.is_running():
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.5)


def _cluster(topology: Topology, path: str) -> httpx.Response:
    """A request to the cluster's first node as korpus makes it: https, its user, the topology's CA."""
    secured = topology.opensearch_secured
    return httpx.get(
        f"{topology.opensearch_url}{path}",
        auth=(secured.user, secured.password),
        verify=secured.ssl_context(),
        timeout=10,
    )


def _search(topology: Topology, query: str, key: str, url: str | None = None) -> httpx.Response:
    return httpx.get(
        f"{url or topology.serve_url}/search", params={"q": query, "k": 10}, headers={"X-API-Key": key}, timeout=60
    )


def _sources(topology: Topology, query: str, key: str, url: str | None = None) -> set[str]:
    answer = _search(topology, query, key, url)
    assert answer.status_code == 200, answer.text
    hits = answer.json()
    assert all(h["lifecycle"] == "current" and h["access"] in KEYS[key] for h in hits), hits
    return {h["source_id"] for h in hits if not h["source_id"].startswith("korpus://")}


def _catalog(topology: Topology) -> tuple[set[str], int]:
    """(current sources, current chunks) as the catalog holds them."""
    with SqliteIndex(topology.data / "korpus.db") as index:
        sources = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
        return sources, index.stats()["chunks_current"]


def _status(topology: Topology) -> dict:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "korpus"), "status", "--json"],
        env=topology.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def _note(topology: Topology, kill: str) -> None:
    """What the last refresh read: its recorded changes (a file a lost run left unpublished is `new` again)."""
    with SqliteIndex(topology.data / "korpus.db") as index:
        REREAD[kill] = {"changes": (index.last_refresh() or {}).get("changes")}


def _served_equals_catalog(topology: Topology, timeout: float = 120) -> None:
    """Every chunk the catalog holds as current is served by the cluster: `korpus status` healthy, its count equal."""
    deadline = time.monotonic() + timeout
    while True:
        status = _status(topology)
        if status["health"] == "ok":
            break
        assert time.monotonic() < deadline, status
        time.sleep(3)
    from tasks.index.opensearch import opensearch_index

    secured = topology.opensearch_secured
    served = opensearch_index(
        Settings(
            data=topology.data,
            backend="opensearch",
            opensearch_url=topology.opensearch_urls,
            opensearch_user=secured.user,
            opensearch_password=secured.password,
            opensearch_ca=secured.ca,
        )
    ).health()
    assert served["status"] == "ok" and served["chunks_served"] == _catalog(topology)[1], served


def test_scheduled_refreshes_serve_a_changing_corpus(topology: Topology) -> None:
    with _client(topology) as client:
        nightly = _nightly(client)
        deadline = time.monotonic() + 300
        while not (
            runs := [
                r
                for r in client.read_flow_runs()
                if r.deployment_id == nightly.id and r.auto_scheduled and r.state.is_completed()
            ]
        ):
            assert time.monotonic() < deadline, "no scheduled refresh completed"
            time.sleep(3)
        artifacts = {a.key for a in client.read_artifacts() if a.flow_run_id == runs[0].id and a.key}
    assert {"corpus-refresh-summary", "corpus-refresh"} <= artifacts  # the summary and the progress milestone
    assert _sources(topology, "списание имущества", "k-public") >= {"протокол.txt"}
    assert "кадры/приказ.txt" not in _sources(topology, "приказ о приёме на работу архивиста", "k-public")
    assert "кадры/приказ.txt" in _sources(topology, "приказ о приёме на работу архивиста", "k-hr")

    changed_at = time.time()
    _write(topology.root, "протокол.txt", "Протокол заседания комиссии: списание имущества отложено до осени.")
    (topology.root / "старое.txt").unlink()
    _write(topology.root, "новое.txt", "Новое письмо о ремонте стеллажей в хранилище.")
    _write(topology.root, "korpus.yaml", MANIFEST + "  - {match: 'новости.txt', access: hr}\n")
    with _client(topology) as client:
        deadline = time.monotonic() + 300
        while not [
            r
            for r in client.read_flow_runs()
            if r.deployment_id == nightly.id
            and r.auto_scheduled
            and r.start_time
            and r.start_time.timestamp() > changed_at + 2
            and r.state.is_completed()
        ]:
            assert time.monotonic() < deadline, "no scheduled refresh after the change completed"
            time.sleep(3)
        client.pause_deployment(nightly.id)  # the kills below start their own runs
        for run in client.read_flow_runs():
            if run.deployment_id == nightly.id and run.state.is_scheduled():
                client.delete_flow_run(run.id)
    assert _sources(topology, "ремонт стеллажей в хранилище", "k-public") >= {"новое.txt"}
    assert "старое.txt" not in _sources(topology, "закупка бумаги для канцелярии", "k-hr")
    hits = _search(topology, "списание имущества 5 мая 2022", "k-hr").json()
    assert not any("от 5 мая 2022" in h["text"] for h in hits if h["source_id"] == "протокол.txt"), hits
    assert "новости.txt" not in _sources(topology, "читальный зал архива", "k-public")
    assert "новости.txt" in _sources(topology, "читальный зал архива", "k-hr")
    _served_equals_catalog(topology)


def test_the_parts_refuse_a_caller_without_credentials(topology: Topology) -> None:
    """#64 item 5: the Prefect API asks for its basic-auth string (generated, kept under the topology's home readable
    by its owner only), the Dask scheduler for a certificate its CA signed, and every OpenSearch node — behind its
    security plugin, https with the topology's certificate — for korpus's user and password."""
    from distributed import Client

    assert (topology.home / "secrets.json").stat().st_mode & 0o077 == 0
    assert topology.opensearch_url.startswith("https://")
    for url in topology.opensearch_urls.split(","):
        trusting = topology.opensearch_secured.ssl_context()
        assert httpx.get(f"{url}/_cluster/health", verify=trusting, timeout=30).status_code == 401
        wrong = ("korpus", "guess")
        assert httpx.get(f"{url}/_cluster/health", auth=wrong, verify=trusting, timeout=30).status_code == 401
        with pytest.raises(httpx.HTTPError):  # nor over plain http
            httpx.get(url.replace("https://", "http://") + "/_cluster/health", timeout=30)
        with pytest.raises(httpx.ConnectError):  # nor to a client that does not trust the topology's CA
            httpx.get(f"{url}/_cluster/health", auth=wrong, timeout=30)
    assert _cluster(topology, "/_cluster/health").json()["status"] in ("green", "yellow")
    for node in opensearch_node.recorded(topology.opensearch_home):  # the password only as the plugin's hash
        config = Path(node["home"]) / "config"
        assert config.stat().st_mode & 0o077 == 0
        assert topology.opensearch_secured.password not in "".join(
            p.read_text(encoding="utf-8") for p in config.rglob("*.yml")
        )
    assert (topology.dask_tls.key.stat().st_mode & 0o077) == 0
    flows = f"{topology.api_url}/flows/filter"
    assert httpx.post(flows, json={}, timeout=30).status_code == 401
    assert httpx.post(flows, json={}, auth=("korpus", "guess"), timeout=30).status_code == 401
    user, _, password = topology.prefect_auth.partition(":")
    assert httpx.post(flows, json={}, auth=(user, password), timeout=30).status_code == 200
    with Client(topology.dask_address, timeout=10, security=topology.dask_security()) as client:
        assert len(client.scheduler_info()["workers"]) == 2
    # a client that trusts the scheduler's CA but has no certificate of its own: the scheduler refuses it (TLS 1.3
    # says so at the first read) — distributed's own Client will not even try without one
    trusting = ssl.create_default_context(cafile=str(topology.dask_tls.ca))
    trusting.check_hostname = False
    port = int(topology.dask_address.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, trusting.wrap_socket(raw) as tls:
        with pytest.raises((ssl.SSLError, ConnectionError)):  # the alert, or the connection closed on it
            tls.sendall(b"\0" * 8)
            if not tls.recv(1):
                raise ConnectionResetError("the scheduler closed the connection")
    with pytest.raises((OSError, TimeoutError)):  # plain TCP to a TLS scheduler
        Client(topology.dask_address.replace("tls://", "tcp://"), timeout=10).close()


def test_a_serve_replica_killed_while_searches_run(topology: Topology) -> None:
    """Two `korpus serve` replicas: with serve-1 killed, serve-2 answers every search; serve-1 comes back with its
    port. `korpus topology status --json` names every part with its process and URL, and says which is down."""
    cli_home = topology.home.parent / "cli-home"  # the CLI finds a topology at KORPUS_HOME/topology
    cli_home.mkdir(exist_ok=True)
    if not (cli_home / "topology").exists():
        (cli_home / "topology").symlink_to(topology.home)
    (topology.home / "root.txt").write_text(str(topology.root), encoding="utf-8")
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "korpus"), "topology", "status", "--json"],
        env=dict(topology.env(), KORPUS_HOME=str(cli_home)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    parts = {p["name"]: p for p in json.loads(listed.stdout)}
    assert listed.returncode == 0 and {p["state"] for p in parts.values()} == {"running"}, listed.stdout
    assert {"serve-1", "serve-2", "postgres", "opensearch/node-1", "opensearch/node-3"} <= set(parts), parts
    assert [parts[name]["url"] for name in ("serve-1", "serve-2")] == topology.serve_urls
    for url in topology.serve_urls:
        assert _sources(topology, "списание имущества", "k-public", url) >= {"протокол.txt"}
        meta = httpx.get(f"{url}/meta/toc", headers={"X-API-Key": "k-public"}, timeout=30)
        assert meta.status_code == 200 and meta.json(), meta.text  # the table of contents too, from PostgreSQL
    for part in SERVE_REPLICAS:  # the replicas answered from PostgreSQL and the cluster: no catalog file of theirs
        data = topology.serve_data(part)
        assert data != topology.data and not [p for p in data.rglob("*") if p.suffix in (".db", ".db-wal")]

    topology.kill("serve-1")
    killed_at = time.monotonic()
    down = {p["name"]: p["state"] for p in topology.parts()}
    assert down["serve-1"] == "down" and down["serve-2"] == "running", down
    answers = []
    while time.monotonic() - killed_at < 5:
        response = _search(topology, "списание имущества", "k-public", topology.serve_urls[1])
        answers.append(response.status_code)
        assert response.status_code == 200, response.text
        assert all(h["access"] == "public" and h["lifecycle"] == "current" for h in response.json())
        time.sleep(0.2)
    with pytest.raises(httpx.ConnectError):
        _search(topology, "списание имущества", "k-public", topology.serve_urls[0])
    REREAD["serve-1 killed"] = {"serve-2 answers": answers}
    topology.start("serve-1")
    TIMINGS["serve-1 killed: back"] = time.monotonic() - killed_at
    assert _sources(topology, "списание имущества", "k-public", topology.serve_urls[0]) >= {"протокол.txt"}


def test_a_dask_worker_killed_while_it_holds_ocr_work(topology: Topology) -> None:
    from distributed import Client

    _scans(topology.root, ["акт_1.pdf", "акт_2.pdf"])
    killed: list[str] = []

    def kill_when_busy() -> None:
        with Client(topology.dask_address, security=topology.dask_security()) as client:
            deadline = time.monotonic() + 400
            while time.monotonic() < deadline and not killed:
                for worker, keys in client.processing().items():
                    name = client.scheduler_info()["workers"].get(worker, {}).get("name")
                    if str(name).startswith("dask-worker-") and any("ocr" in str(key) for key in keys):
                        topology.kill(str(name))
                        killed.append(str(name))
                        return
                time.sleep(0.05)

    watcher = threading.Thread(target=kill_when_busy, daemon=True)
    watcher.start()
    started = time.monotonic()
    state = _wait(topology, _run_now(topology))
    TIMINGS["dask worker killed: refresh"] = time.monotonic() - started
    watcher.join(5)
    assert killed, "no Dask worker was caught holding OCR work"
    assert state.is_completed(), state
    with SqliteIndex(topology.data / "korpus.db") as index:
        pages = {(name, c["page"]) for name in ("акт_1.pdf", "акт_2.pdf") for c in index.source_chunks(name)}
    assert pages == {(f"акт_{n}.pdf", p) for n in (1, 2) for p in (1, 2)}, pages  # every page read, none lost
    _note(topology, "dask worker")
    topology.start(killed[0])
    topology.wait_for_dask_workers(2)
    _served_equals_catalog(topology)


def _indexed(topology: Topology) -> int:
    """Documents the cluster's nodes have indexed so far (bulk items acknowledged), all nodes together."""
    stats = _cluster(topology, "/_nodes/stats/indices/indexing").json()
    return sum(node["indices"]["indexing"]["index_total"] for node in stats["nodes"].values())


def _search_while(topology: Topology, busy: Callable[[], bool]) -> list[int]:
    """Ask searches until `busy()` is false; each answers in scope, current, or fails with a clear error."""
    answers: list[int] = []
    while busy():
        response = _search(topology, "поставка насосов на склад", "k-public")
        answers.append(response.status_code)
        if response.status_code == 200:
            assert all(h["access"] == "public" and h["lifecycle"] == "current" for h in response.json())
        else:
            assert response.json().get("detail"), response.text  # a clear error, never a stale hit
        time.sleep(0.5)
    return answers


def _copy_holder(topology: Topology) -> str:
    """node-2 or node-3 — not node-1, which korpus asks — holding a copy of korpus's index: one shard and one replica
    lie on two of the three nodes, so a node chosen by name alone may hold none and its loss leave the cluster green."""
    shards = _cluster(topology, "/_cat/shards?format=json").json()
    held = {row.get("node") for row in shards if not row["index"].startswith(".")}
    return next(node for node in ("node-2", "node-3") if node in held)


def test_an_opensearch_node_killed_during_bulk_writes_and_again_during_searches(topology: Topology) -> None:
    for n in range(120):
        _write(topology.root, f"письма/письмо_{n:03d}.txt", f"Письмо {n} о поставке насосов марки НД-{n} на склад.")
    baseline = _indexed(topology)
    killed: list[float] = []

    def kill_mid_bulk() -> None:  # the first bulk items of this refresh acknowledged: a node holding a copy goes
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not killed:
            with contextlib.suppress(httpx.HTTPError):
                if _indexed(topology) > baseline:
                    topology.kill("opensearch", node=_copy_holder(topology))
                    killed.append(time.monotonic())
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_mid_bulk, daemon=True)
    watcher.start()
    run = _run_now(topology)
    with _client(topology) as client:
        answers = _search_while(topology, lambda: not client.read_flow_run(run).state.is_final())
    state = _wait(topology, run)
    watcher.join(5)
    assert killed, "the cluster indexed nothing during the refresh"
    TIMINGS["opensearch node killed mid-bulk: refresh end"] = time.monotonic() - killed[0]
    assert answers and all(code in (200, 503) for code in answers), answers
    # Once the cluster has seen the node go (its fault detection: at once for a closed connection, up to ~30 s when
    # not) and before it moves the lost copies elsewhere (a minute's delay by default), /status says degraded.
    deadline, status = time.monotonic() + 45, _status(topology)
    while status["health"] != "degraded" and time.monotonic() < deadline:
        time.sleep(1)
        status = _status(topology)
    assert status["health"] == "degraded" and any("OpenSearch" in r for r in status["degraded"]), status
    REREAD["opensearch node mid-bulk: that refresh"] = {"state": state.type.value}
    if not state.is_completed():  # the next refresh completes what this one could not write
        assert _wait(topology, _run_now(topology)).is_completed()
    _note(topology, "opensearch node mid-bulk")
    restarted = time.monotonic()
    topology.start("opensearch")
    _served_equals_catalog(topology, timeout=300)  # every bulk item once: served == the catalog's current chunks
    TIMINGS["opensearch node back: green and served"] = time.monotonic() - restarted
    assert len(_sources(topology, "письмо о поставке насосов марки НД-7", "k-public")) >= 1

    # again, while only searches are asked: node-1, the first node korpus is given (#64: korpus knows every node,
    # and a request node-1 cannot take goes to the next)
    topology.kill("opensearch", node="node-1")
    killed_at = time.monotonic()
    answers = _search_while(topology, lambda: time.monotonic() - killed_at < 10)
    REREAD["opensearch node-1 killed during searches"] = {"answers": answers}
    assert answers and all(code in (200, 503) for code in answers), answers
    assert answers.count(200) >= 0.9 * len(answers), answers  # the other two nodes hold every shard: they answer
    topology.start("opensearch")
    _served_equals_catalog(topology, timeout=300)
    TIMINGS["opensearch node-1 killed during searches: back and served"] = time.monotonic() - killed_at


def test_the_prefect_server_and_postgres_killed_and_restarted(topology: Topology) -> None:
    with _client(topology) as client:
        before = {r.id for r in client.read_flow_runs()}
    topology.kill("prefect-server")
    assert _sources(topology, "списание имущества", "k-public")  # searches do not need Prefect
    topology.kill("postgres")
    status = _status(topology)
    assert status["health"] == "degraded" and any("Prefect server" in r for r in status["degraded"]), status
    # ... but every hit is checked on the catalog's PostgreSQL: while it is down both replicas say so, and serve
    # nothing unchecked
    for url in topology.serve_urls:
        refused = _search(topology, "списание имущества", "k-public", url)
        assert refused.status_code == 503 and "catalog cannot answer" in refused.json()["detail"], refused.text
    restarted = time.monotonic()
    topology.start("postgres")
    for url in topology.serve_urls:  # the same replicas answer again (their dropped connections replaced)
        assert _sources(topology, "списание имущества", "k-public", url)
    topology.start("prefect-server")
    with _client(topology) as client:
        assert before <= {r.id for r in client.read_flow_runs()}  # the run history is on PostgreSQL
    _write(topology.root, "после_перезапуска.txt", "Письмо после перезапуска сервера о плане работ архива.")
    assert _wait(topology, _run_now(topology)).is_completed()  # the worker polls the server again
    TIMINGS["prefect server and postgres back: next refresh done"] = time.monotonic() - restarted
    _note(topology, "prefect server and postgres")
    assert "после_перезапуска.txt" in _sources(topology, "план работ архива после перезапуска", "k-public")
    _served_equals_catalog(topology)


def test_the_prefect_worker_killed_mid_run(topology: Topology) -> None:
    """The worker alone: its flow run is a process group of its own and completes. The worker with its flow run (the
    worker's machine lost): the run stops sending heartbeats, korpus-run-lost marks it Crashed, its concurrency slot
    lapses, and the next refresh — on the restarted worker — completes its work."""
    _scans(topology.root, ["акт_3.pdf"])
    run = _run_now(topology)
    _wait_running(topology, run)
    time.sleep(2)
    topology.kill("prefect-worker")
    assert _wait(topology, run).is_completed()
    topology.start("prefect-worker")

    _scans(topology.root, ["акт_4.pdf"])
    run = _run_now(topology)
    _wait_running(topology, run)
    time.sleep(2)
    killed = topology.kill("prefect-worker", with_children=True)
    killed_at = time.monotonic()
    time.sleep(1)
    assert len(killed) >= 2 and not any(_alive(pid) for pid in killed), killed  # the worker and its flow run
    topology.start("prefect-worker")
    state = _wait(topology, run, timeout=400)
    TIMINGS["prefect worker and its run killed: run marked lost"] = time.monotonic() - killed_at
    assert state.is_crashed(), state
    assert _wait(topology, _run_now(topology), timeout=400).is_completed()
    TIMINGS["prefect worker and its run killed: next refresh done"] = time.monotonic() - killed_at
    _note(topology, "prefect worker with its run")
    with SqliteIndex(topology.data / "korpus.db") as index:
        pages = {(name, c["page"]) for name in ("акт_3.pdf", "акт_4.pdf") for c in index.source_chunks(name)}
    assert pages == {(f"акт_{n}.pdf", p) for n in (3, 4) for p in (1, 2)}, pages
    _served_equals_catalog(topology)

"""korpus's production topology as separate processes on one machine's loopback (issue «The production topology,
run whole on one machine»): for trials, for the test that kills one part at a time, and as the recipe the many-machine
guide (docs/topology.md) moves apart.

Parts, started in this order, each a process of its own (its own session, its log under `<home>/logs/`):
- `postgres` — PostgreSQL from Debian's packages (tasks/runtime/postgres.py), its own data directory (initdb on first
  start, trust on loopback; as root it runs as the `postgres` user, which PostgreSQL requires), databases `prefect`
  and `korpus` — the catalog's serving part (KORPUS_CATALOG_URL, tasks/index/pg_catalog.py), which every hit the
  replicas serve is checked against;
- `opensearch` — a three-node OpenSearch cluster (tasks/runtime/opensearch_node.py; korpus's indices keep
  OpenSearch's default of one replica, so any one node may go);
- `prefect-server` — `prefect server start` on that database (PREFECT_API_DATABASE_CONNECTION_URL);
- `dask-scheduler`, `dask-worker-1`, `dask-worker-2` — `dask scheduler` and two single-thread `dask worker`
  processes (each with its nanny: a worker killed is restarted by it, as in production);
- `prefect-worker` — `prefect worker start --pool korpus`, after the work pool is created and deployments/prefect.yaml
  deployed (the nightly refresh and the rest); its flow runs reach Dask and OpenSearch through KORPUS_DASK_ADDRESS,
  KORPUS_BACKEND=opensearch and KORPUS_OPENSEARCH_URL;
- `serve-1`, `serve-2` — two `korpus serve` replicas on the same catalog and cluster, each on its own port (a load
  balancer in front of them is the operator's; either may go and the other answers). Their searches read no file:
  the cluster, and PostgreSQL for the check (while it is down they answer 503); each has its own data directory
  (`serve_data`), in which no catalog file appears.
`<home>/topology.json` records every part's ports and process; `down` stops them all (SIGTERM, SIGKILL after a grace)
and leaves no process behind; `kill` SIGKILLs one part and `start` brings it back with the same ports and data.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from tasks.runtime import opensearch_node, postgres
from tasks.runtime.processes import recorded_process
from tasks.runtime.tls import Credentials, loopback_credentials

REPO = Path(__file__).resolve().parents[2]
STATE = "topology.json"
SECRETS = "secrets.json"
SERVE_REPLICAS = ("serve-1", "serve-2")
ORDER = [
    "postgres",
    "opensearch",
    "prefect-server",
    "dask-scheduler",
    "dask-worker-1",
    "dask-worker-2",
    "prefect-worker",
    *SERVE_REPLICAS,
]
START_SECONDS = 180.0
DATABASES = ("prefect", "korpus")
"""On the topology's PostgreSQL: Prefect's, and the catalog's serving part (KORPUS_CATALOG_URL)."""


class TopologyError(RuntimeError):
    """A part did not start; the message names it and ends with its log's last lines."""


class Topology:
    """The topology under `home`, refreshing `root` into `data`. `prefect_file`: the deployments to deploy
    (deployments/prefect.yaml; a test passes a copy with a shorter schedule). `settings_env`: KORPUS_* settings every
    part shares (model paths, …)."""

    def __init__(
        self,
        home: Path,
        root: Path,
        data: Path,
        prefect_file: Path | None = None,
        settings_env: dict[str, str] | None = None,
        opensearch_heap_mb: int = 512,
        lost_after: int | None = None,
    ) -> None:
        self.home, self.root, self.data = home, root, data
        self.lost_after = lost_after
        self.prefect_file = prefect_file or REPO / "deployments" / "prefect.yaml"
        self.settings_env = settings_env or {}
        self.heap_mb = opensearch_heap_mb
        self.state = self._read()

    # --- state ----------------------------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads((self.home / STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"ports": {}, "parts": {}}

    def _write(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / STATE).write_text(json.dumps(self.state, indent=2), encoding="utf-8")

    @property
    def ports(self) -> dict[str, int]:
        ports = self.state["ports"]
        if "serve" in ports:  # recorded before the serve replicas: the one server's port is the first replica's
            ports.setdefault("serve-1", ports.pop("serve"))
        missing = [name for name in ("postgres", "prefect", "dask", *SERVE_REPLICAS) if name not in ports]
        if missing:
            ports.update(zip(missing, opensearch_node.free_ports(len(missing)), strict=True))
        return ports

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['prefect']}/api"

    @property
    def dask_address(self) -> str:
        return f"tls://127.0.0.1:{self.ports['dask']}"

    @property
    def prefect_auth(self) -> str:
        """The Prefect API's basic-auth string (`user:password`): the operator's PREFECT_SERVER_API_AUTH_STRING, else
        one made on first use and kept in `<home>/secrets.json`, readable by its owner only."""
        return os.environ.get("PREFECT_SERVER_API_AUTH_STRING") or self._secret(
            "prefect_auth", lambda: f"korpus:{secrets.token_urlsafe(24)}"
        )

    def _secret(self, name: str, make: Callable[[], str]) -> str:
        """A secret kept in `<home>/secrets.json` (mode 0600): made on first use, the same after."""
        path = self.home / SECRETS
        kept = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if name not in kept:
            self.home.mkdir(parents=True, exist_ok=True)
            kept[name] = make()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(kept, out)
        return kept[name]

    @property
    def opensearch_secured(self) -> opensearch_node.Secured:
        """The cluster behind its security plugin: TLS with the topology's own certificate (`dask_tls`), and the
        operator's KORPUS_OPENSEARCH_USER / KORPUS_OPENSEARCH_PASSWORD, else `korpus` with a password made once and
        kept in `<home>/secrets.json`. A request without them is refused (401)."""
        tls = self.dask_tls
        user = os.environ.get("KORPUS_OPENSEARCH_USER") or "korpus"
        password = os.environ.get("KORPUS_OPENSEARCH_PASSWORD") or self._secret(
            "opensearch_password", lambda: secrets.token_urlsafe(24)
        )
        return opensearch_node.Secured(tls.ca, tls.cert, tls.key, user, password)

    @property
    def dask_tls(self) -> Credentials:
        """The certificate the scheduler, the workers and every client present to each other (tasks/runtime/tls.py);
        a Dask client without it is refused."""
        return loopback_credentials(self.home / "tls")

    def dask_security(self) -> Any:
        """`distributed.Security` for a Dask client in this process (the topology's processes get the same from
        the DASK_DISTRIBUTED__COMM__* environment, `env`)."""
        from distributed import Security

        tls = self.dask_tls
        return Security(
            tls_ca_file=str(tls.ca), tls_client_cert=str(tls.cert), tls_client_key=str(tls.key), require_encryption=True
        )

    @property
    def serve_url(self) -> str:
        """The first serve replica's URL."""
        return self.serve_urls[0]

    @property
    def serve_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{self.ports[name]}" for name in SERVE_REPLICAS]

    def serve_data(self, part: str) -> Path:
        """A serve replica's own data directory, not the writer's: it answers from the catalog on PostgreSQL and the
        cluster, and holds no catalog file (what it renders from a source file may cache there)."""
        return self.home / part / "data"

    @property
    def opensearch_home(self) -> Path:
        return self.home / "opensearch"

    @property
    def opensearch_url(self) -> str:
        """The first node's URL (for a person's curl)."""
        nodes = opensearch_node.recorded(self.opensearch_home)
        return opensearch_node.node_url(nodes[0]) if nodes else ""

    @property
    def opensearch_urls(self) -> str:
        """Every node's URL, comma-separated: what korpus is given (KORPUS_OPENSEARCH_URL), so it asks whichever
        node answers."""
        nodes = opensearch_node.recorded(self.opensearch_home)
        return ",".join(opensearch_node.node_url(node) for node in nodes)

    @property
    def pg_dir(self) -> Path:
        return Path(self.state.get("pg_dir") or self.home / "postgres")

    def env(self) -> dict[str, str]:
        """What every korpus and Prefect process of the topology sees."""
        env, secured = dict(os.environ, **self.settings_env), self.opensearch_secured
        env.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "30")  # korpus-run-lost reads a lost run by them
        env.update(
            PREFECT_API_URL=self.api_url,
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            PREFECT_HOME=str(self.home / "prefect"),
            KORPUS_DATA=str(self.data),
            KORPUS_SOURCE_ROOT=str(self.root),
            KORPUS_REPO=str(REPO),
            KORPUS_DASK_ADDRESS=self.dask_address,
            KORPUS_BACKEND="opensearch",
            KORPUS_OPENSEARCH_URL=self.opensearch_urls,
            KORPUS_OPENSEARCH_USER=secured.user,
            KORPUS_OPENSEARCH_PASSWORD=secured.password,
            KORPUS_OPENSEARCH_CA=str(secured.ca),
            KORPUS_CATALOG_URL=self.catalog_url,
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            PREFECT_API_AUTH_STRING=self.prefect_auth,
        )
        tls = self.dask_tls  # every Dask connection mutually authenticated by certificate
        comm = "DASK_DISTRIBUTED__COMM__"
        env.update({f"{comm}REQUIRE_ENCRYPTION": "True", f"{comm}TLS__CA_FILE": str(tls.ca)})
        for role in ("SCHEDULER", "WORKER", "CLIENT"):
            env.update({f"{comm}TLS__{role}__CERT": str(tls.cert), f"{comm}TLS__{role}__KEY": str(tls.key)})
        return env

    # --- parts ----------------------------------------------------------------------------------------------------

    def _command(self, part: str) -> tuple[list[str], dict[str, str], str | None]:
        """(argv, environment, user) of a process part."""
        bin_dir, env = Path(sys.executable).parent, self.env()
        if part == "postgres":
            return postgres.server_argv(self.pg_dir, self.ports["postgres"]), env, postgres.server_user()
        if part == "prefect-server":
            env["PREFECT_SERVER_API_AUTH_STRING"] = self.prefect_auth
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = (
                f"postgresql+asyncpg://korpus@127.0.0.1:{self.ports['postgres']}/prefect"
            )
            env["PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS"] = env.get(
                "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS", "10"
            )
            return (
                [
                    sys.executable,
                    "-m",
                    "prefect",
                    "server",
                    "start",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.ports["prefect"]),
                ],
                env,
                None,
            )
        if part == "dask-scheduler":
            return (
                [
                    str(bin_dir / "dask"),
                    "scheduler",
                    "--protocol",
                    "tls",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.ports["dask"]),
                    "--no-dashboard",
                ],
                env,
                None,
            )
        if part.startswith("dask-worker-"):
            return (
                [
                    str(bin_dir / "dask"),
                    "worker",
                    self.dask_address,
                    "--nthreads",
                    "1",
                    "--name",
                    part,
                    "--no-dashboard",
                    "--memory-limit",
                    "0",
                    "--preload",  # tasks imported and the embedding model loaded as it starts, not at a first task
                    "flows.worker_warm",
                ],
                env,
                None,
            )
        if part == "prefect-worker":
            env.setdefault("PREFECT_WORKER_QUERY_SECONDS", "2")
            return ([sys.executable, "-m", "prefect", "worker", "start", "--pool", "korpus"], env, None)
        if part in SERVE_REPLICAS:
            return (
                [
                    str(bin_dir / "korpus"),
                    "serve",
                    "--port",
                    str(self.ports[part]),
                    "--data",
                    str(self.serve_data(part)),
                ],
                env,
                None,
            )
        raise ValueError(f"no such part: {part} (parts: {', '.join(ORDER)})")

    def _ready(self, part: str) -> Callable[[], bool]:
        def tcp(port: int) -> Callable[[], bool]:
            def probe() -> bool:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
                return False

            return probe

        def http(url: str, ok: tuple[int, ...] = (200,), auth: tuple[str, str] | None = None) -> Callable[[], bool]:
            def probe() -> bool:
                with contextlib.suppress(httpx.HTTPError):
                    return httpx.get(url, timeout=2, auth=auth).status_code in ok
                return False

            return probe

        if part == "postgres":  # ready when it accepts connections: an open port may still be in crash recovery
            return lambda: postgres.accepting(self.ports["postgres"])
        if part == "prefect-server":
            user, _, password = self.prefect_auth.partition(":")
            return http(f"{self.api_url}/health", auth=(user, password))
        if part == "dask-scheduler":
            return tcp(self.ports["dask"])
        if part in SERVE_REPLICAS:
            return http(f"http://127.0.0.1:{self.ports[part]}/health", ok=(200, 503))
        return lambda: True  # workers: their scheduler or server sees them (`wait_for_dask_workers`)

    def _log(self, part: str) -> Path:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        return self.home / "logs" / f"{part}.log"

    def start(self, part: str, timeout: float = START_SECONDS) -> None:
        """Start one part (again) with its recorded ports and data, and wait until it answers."""
        if part == "opensearch":
            self._start_opensearch()
            return
        if part == "postgres":
            self._init_postgres()
        argv, env, user = self._command(part)
        with open(self._log(part), "ab") as log:
            process = subprocess.Popen(
                argv,
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                user=user,
            )
        self.state["parts"][part] = {"pid": process.pid, "created": psutil.Process(process.pid).create_time()}
        self._write()
        ready, deadline = self._ready(part), time.monotonic() + timeout
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                self._stop_one(part)
                tail = self._log(part).read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
                raise TopologyError(f"{part} did not start ({process.poll()}):\n" + "\n".join(tail))
            time.sleep(0.5)
        if part == "postgres":
            self._create_database()

    def _init_postgres(self) -> None:
        if (self.pg_dir / "data" / "PG_VERSION").is_file():
            return
        if postgres.server_user():  # its user must reach the directory (not a 0700 pytest tmp)
            self.state["pg_dir"] = str(
                Path(os.environ.get("TMPDIR", "/tmp")) / f"korpus-pg-{os.getpid()}-{abs(hash(str(self.home))) % 10**8}"
            )
        postgres.init_cluster(self.pg_dir)
        self._write()

    def _create_database(self) -> None:
        try:
            for name in DATABASES:
                postgres.create_database(self.ports["postgres"], name)
        except postgres.PostgresError as exc:
            raise TopologyError(str(exc)) from exc

    @property
    def catalog_url(self) -> str:
        """The catalog's serving part (KORPUS_CATALOG_URL): a database beside Prefect's on the topology's PostgreSQL."""
        return f"postgresql://korpus@127.0.0.1:{self.ports['postgres']}/korpus"

    def _start_opensearch(self) -> None:
        secured = self.opensearch_secured
        running = opensearch_node.status(self.opensearch_home, secured)
        recorded = opensearch_node.recorded(self.opensearch_home)
        if not recorded:
            opensearch_node.start(
                self.opensearch_home, nodes=3, port=None, heap_mb=self.heap_mb, detach=True, secured=secured
            )
            return
        alive = {n["name"] for n in running}
        for node in recorded:
            if node["name"] not in alive:
                opensearch_node.restart_node(self.opensearch_home, node["name"], heap_mb=self.heap_mb, secured=secured)

    def up(self) -> None:
        """Start every part not running, in order, deploying before the Prefect worker starts."""
        for part in ORDER:
            if part == "prefect-worker":
                self.deploy()
            if self.running(part):
                continue
            self.start(part)
            if part == "dask-worker-2":
                self.wait_for_dask_workers(2)

    def deploy(self) -> None:
        """The work pool and every deployment of `prefect_file`, on this topology's server."""
        env = self.env()
        for args in (
            ["work-pool", "create", "korpus", "--type", "process", "--overwrite"],
            ["--no-prompt", "deploy", "--prefect-file", str(self.prefect_file), "--all"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "prefect", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
            )
            if done.returncode:
                raise TopologyError(f"prefect {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        self._lost_run_automation(env)

    def _lost_run_automation(self, env: dict[str, str]) -> None:
        """deployments/automations.yaml's korpus-run-lost (a run without heartbeats is marked Crashed), once, with
        `lost_after` seconds when the topology was given a shorter wait than the recipe's."""
        import yaml

        spec = yaml.safe_load((REPO / "deployments" / "automations.yaml").read_text(encoding="utf-8"))
        lost = next(a for a in spec["automations"] if a["name"] == "korpus-run-lost")
        if self.lost_after:
            lost["trigger"]["within"] = self.lost_after
        listed = subprocess.run(
            [sys.executable, "-m", "prefect", "automation", "ls"], env=env, capture_output=True, text=True, timeout=120
        )
        if "korpus-run-lost" in listed.stdout:
            return
        done = subprocess.run(
            [sys.executable, "-m", "prefect", "automation", "create", "--from-json", json.dumps(lost)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode:
            raise TopologyError(f"prefect automation create: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def wait_for_dask_workers(self, count: int, timeout: float = START_SECONDS) -> None:
        from distributed import Client

        deadline = time.monotonic() + timeout
        while True:
            with (
                contextlib.suppress(OSError, TimeoutError),
                Client(self.dask_address, timeout=5, security=self.dask_security()) as client,
            ):
                if len(client.scheduler_info()["workers"]) >= count:
                    return
            if time.monotonic() > deadline:
                raise TopologyError(f"{count} Dask workers did not join in {timeout:.0f} s")
            time.sleep(1)

    def running(self, part: str) -> bool:
        if part == "opensearch":
            return len(opensearch_node.status(self.opensearch_home)) == 3
        record = self.state["parts"].get(part)
        return bool(record) and recorded_process(record) is not None

    def pids(self, part: str) -> list[int]:
        """The process ids of a part: its process and its children (a nanny's worker, a server's subprocesses)."""
        record = self.state["parts"].get(part)
        process = recorded_process(record) if record else None
        if process is None:
            return []
        return [process.pid, *(c.pid for c in process.children(recursive=True))]

    def kill(self, part: str, node: str | None = None, with_children: bool = False) -> list[int]:
        """SIGKILL a part — its process group — or, for `opensearch`, one node (`node`, e.g. node-2). A Prefect
        worker's flow runs are process groups of their own and outlive it; `with_children` kills them too (the worker's
        machine lost)."""
        if part == "opensearch":
            record = next(n for n in opensearch_node.recorded(self.opensearch_home) if n["name"] == (node or "node-2"))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(record["pid"], signal.SIGKILL)
            return [record["pid"]]
        pids = self.pids(part)
        for pid in pids[: None if with_children else 1]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        return pids

    def _stop_one(self, part: str, grace: float = 20.0) -> None:
        pids = self.pids(part)
        if not pids:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pids[0], signal.SIGTERM)
        _, alive = psutil.wait_procs([p for p in map(_process, pids) if p], timeout=grace)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pids[0], signal.SIGKILL)

    def down(self) -> None:
        """Stop every part, the last started first; no process is left, the data stays for the next `up`."""
        for part in reversed(ORDER):
            if part == "opensearch":
                opensearch_node.stop(self.opensearch_home)
            else:
                self._stop_one(part)
        self.state["parts"] = {}
        self._write()

    def url(self, part: str) -> str | None:
        """Where a part answers (None: a worker, which answers nobody)."""
        if part == "postgres":
            return f"postgresql://korpus@127.0.0.1:{self.ports['postgres']}/prefect"
        if part == "prefect-server":
            return self.api_url
        if part == "dask-scheduler":
            return self.dask_address
        if part in SERVE_REPLICAS:
            return f"http://127.0.0.1:{self.ports[part]}"
        return None

    def parts(self) -> list[dict[str, Any]]:
        """Every part with its `name`, `pid` (None when down), `state` ('running' or 'down') and `url`: an OpenSearch
        node is a part of its own (`opensearch/node-1`), with its HTTP URL."""
        listed: list[dict[str, Any]] = []
        for part in ORDER:
            if part == "opensearch":
                alive = {node["name"] for node in opensearch_node.status(self.opensearch_home)}
                for node in opensearch_node.recorded(self.opensearch_home):
                    up = node["name"] in alive
                    listed.append(
                        {
                            "name": f"opensearch/{node['name']}",
                            "pid": node["pid"] if up else None,
                            "state": "running" if up else "down",
                            "url": opensearch_node.node_url(node),
                        }
                    )
                continue
            pids = self.pids(part)
            state = "running" if pids else "down"
            listed.append({"name": part, "pid": pids[0] if pids else None, "state": state, "url": self.url(part)})
        return listed


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None

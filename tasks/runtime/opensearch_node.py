"""A real OpenSearch node (or an N-node cluster) on loopback, owned by korpus: for tests, trials and one-machine use.

The node is assembled from Maven Central by `infra/opensearch/node` (`make setup` runs `mvn package` there once):
OpenSearch's server jar with its netty4, analysis-common and painless modules and the k-NN plugin, started in one
JVM per node by `org.korpus.opensearch.KorpusNode`. `start` waits for the cluster's health (green; yellow for one
node), records every node in `<home>/nodes.json` and returns them; `status` reads them back with each node's health;
`stop` stops them and removes what it recorded.

Ownership: a node's standard input is a leash (see KorpusNode.java). `start(detach=True)` — `korpus opensearch
start` — writes `detach` once the cluster is healthy, so the node outlives the command; a start that fails, times
out or is killed before that leaves no JVM, because the end of the leash stops it. A test session starts its node
with `detach=False`: the node ends when the session does, however it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from tasks.runtime.processes import recorded_process

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"
NODE_PROJECT = Path(__file__).resolve().parents[2] / "infra" / "opensearch" / "node"
MAIN_CLASS = "org.korpus.opensearch.KorpusNode"
STATE_FILE = "nodes.json"
STARTUP_SECONDS = 180.0  # a loaded 2-core machine; an idle one is healthy in ~7 s
JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-Dlog4j2.formatMsgNoLookups=true",
    "-Dio.netty.noUnsafe=true",
    "-Dio.netty.noKeySetOptimization=true",
    "-Dio.netty.recycler.maxCapacityPerThread=0",
    "-Djava.locale.providers=SPI,COMPAT",
    "-Dfile.encoding=UTF-8",
    "-XX:+ExitOnOutOfMemoryError",
)


class NodeError(RuntimeError):
    """The node could not be built or started; the message says why (a plugin's error, the log's last lines)."""


SECURITY_PLUGIN = "org.opensearch.security.OpenSearchSecurityPlugin"


@dataclass(frozen=True)
class Secured:
    """A cluster behind OpenSearch's security plugin: TLS on transport and on HTTP with `cert` (signed by `ca`; its
    subject is the DN every node is admitted by), and one internal user, `user`, with all access. The password is
    stored only as the plugin's bcrypt hash, in each node's config; the security index is made from that config at
    the cluster's first start."""

    ca: Path
    cert: Path
    key: Path
    user: str
    password: str

    def ssl_context(self) -> Any:
        import ssl

        return ssl.create_default_context(cafile=str(self.ca))


@dataclass
class NodeProcess:
    name: str
    pid: int
    created: float
    http_port: int
    transport_port: int
    home: str
    scheme: str = "http"

    @property
    def url(self) -> str:
        return node_url(asdict(self))


def node_url(record: dict[str, Any]) -> str:
    """A recorded node's HTTP URL (https when it was started secured)."""
    return f"{record.get('scheme', 'http')}://127.0.0.1:{record['http_port']}"


def java() -> str:
    """The JVM: KORPUS_JAVA, else JAVA_HOME's, else the one on PATH (17+; OpenSearch 2.19 runs on 17)."""
    for candidate in (
        os.environ.get("KORPUS_JAVA"),
        os.environ.get("JAVA_HOME") and str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"),
        shutil.which("java"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    raise NodeError("no java found: install a JDK 17+ (apt openjdk-17-jdk-headless) or set KORPUS_JAVA")


def classpath(project: Path = NODE_PROJECT, secured: bool = False) -> str:
    """The launcher's jar, the server's libraries and the k-NN plugin's jars, as `mvn package` left them; a secured
    node's, the security plugin's too."""
    target = project / "target"
    jars = sorted(target.glob("korpus-opensearch-node-*.jar"))
    parts = ["lib", *(["security"] if secured else []), "knn"]
    if not jars or not all((target / part).is_dir() for part in parts):
        raise NodeError(
            f"the OpenSearch node is not built under {target}: run `make opensearch` (mvn -q package in {project})"
        )
    return os.pathsep.join([str(jars[0]), *(str(target / part / "*") for part in parts)])


def password_hash(secured: Secured, project: Path = NODE_PROJECT) -> str:
    """The plugin's own bcrypt hash of the user's password (its `Hasher`, the password passed in the environment,
    never on a command line)."""
    done = subprocess.run(
        [java(), "-cp", classpath(project, secured=True), "org.opensearch.security.tools.Hasher", "-env", "KORPUS_PW"],
        env=dict(os.environ, KORPUS_PW=secured.password),
        capture_output=True,
        text=True,
        timeout=120,
    )
    hashed = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not hashed.startswith("$2"):
        raise NodeError(f"the security plugin's Hasher failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return hashed


def write_security_config(node_home: Path, secured: Secured, hashed: str, project: Path = NODE_PROJECT) -> None:
    """A secured node's config (its folder readable by its owner only): the certificate, its key and the CA beside
    opensearch.yml (the plugin reads them relative to it), and the security index's first content — the plugin's
    defaults with one internal user mapped to all_access (anonymous access off, as the defaults have it)."""
    from cryptography import x509

    config = node_home / "config"
    config.mkdir(parents=True, exist_ok=True)
    config.chmod(0o700)
    for source, name in ((secured.cert, "node.pem"), (secured.key, "node-key.pem"), (secured.ca, "ca.pem")):
        shutil.copyfile(source, config / name)
    (config / "node-key.pem").chmod(0o600)
    subject = x509.load_pem_x509_certificate(secured.cert.read_bytes()).subject.rfc4514_string()
    tls = {
        "pemcert_filepath": "node.pem",
        "pemkey_filepath": "node-key.pem",
        "pemtrustedcas_filepath": "ca.pem",
    }
    settings = {
        **{f"plugins.security.ssl.transport.{k}": v for k, v in tls.items()},
        "plugins.security.ssl.transport.enforce_hostname_verification": False,
        "plugins.security.ssl.http.enabled": True,
        **{f"plugins.security.ssl.http.{k}": v for k, v in tls.items()},
        "plugins.security.allow_default_init_securityindex": True,
        "plugins.security.nodes_dn": [subject],
        "plugins.security.audit.type": "noop",
    }
    (config / "opensearch.yml").write_text(json.dumps(settings, indent=2), encoding="utf-8")  # YAML reads JSON
    shipped = project / "target" / "security" / "config"
    own = config / "opensearch-security"
    own.mkdir(exist_ok=True)
    for path in shipped.glob("*.yml"):
        shutil.copyfile(path, own / path.name)
    users = {
        "_meta": {"type": "internalusers", "config_version": 2},
        secured.user: {"hash": hashed, "reserved": True, "backend_roles": ["admin"], "description": "korpus"},
    }
    (own / "internal_users.yml").write_text(json.dumps(users, indent=2, ensure_ascii=False), encoding="utf-8")


def free_ports(count: int, first: int | None = None) -> list[int]:
    """`count` loopback ports free now: from `first` on when given (consecutive if they are free), else any."""
    ports: list[int] = []
    candidate = first
    while len(ports) < count:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate or 0))
            except OSError:
                if candidate is None:
                    raise
                candidate += 1
                continue
            if (found := probe.getsockname()[1]) not in ports:  # the kernel may hand the same free port out twice
                ports.append(found)
        candidate = candidate + 1 if candidate else None
    return ports


def health(url: str, timeout: float = 2.0, secured: Secured | None = None) -> dict[str, Any] | None:
    """The cluster's `_cluster/health` as the node at `url` answers it, or None if it does not answer (a secured
    cluster is asked with its user, its certificate verified)."""
    import httpx

    extra: dict[str, Any] = {}
    if secured is not None:
        extra = {"auth": (secured.user, secured.password), "verify": secured.ssl_context()}
    try:
        response = httpx.get(f"{url}/_cluster/health", timeout=timeout, **extra)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def start(
    home: Path,
    nodes: int = 1,
    port: int | None = 9200,
    heap_mb: int = 1024,
    detach: bool = True,
    timeout: float = STARTUP_SECONDS,
    log: IO[str] | None = None,
    project: Path = NODE_PROJECT,
    secured: Secured | None = None,
) -> list[NodeProcess]:
    """Start `nodes` JVMs on loopback with their data under `home/node-N`, wait for the cluster's health, record
    them. HTTP ports from `port` (or free ones); the first node's URL is the cluster's. `secured`: behind the
    security plugin (https, one user). Raises NodeError with the failing node's log when a node exits or the cluster
    is not healthy in `timeout` s; nothing is left running."""
    running = status(home, secured)
    if running:
        raise NodeError(f"nodes are already running under {home} ({running[0]['url']}): `korpus opensearch stop`")
    cp, jvm = classpath(project, secured=secured is not None), java()
    hashed = password_hash(secured, project) if secured is not None else ""
    http_ports = free_ports(nodes, port)
    transport_ports = free_ports(nodes, (http_ports[-1] + 100) if port else None)
    names = [f"node-{n + 1}" for n in range(nodes)]
    started: list[NodeProcess] = []
    handles: list[subprocess.Popen[bytes]] = []
    try:
        for name, http_port, transport_port in zip(names, http_ports, transport_ports, strict=True):
            node_home = home / name
            (node_home / "logs").mkdir(parents=True, exist_ok=True)
            if secured is not None:
                write_security_config(node_home, secured, hashed, project)
            process = _launch(
                jvm,
                cp,
                heap_mb,
                node_home,
                name,
                http_port,
                transport_port,
                transport_ports,
                names,
                secured is not None,
            )
            handles.append(process)
            started.append(
                NodeProcess(
                    name,
                    process.pid,
                    psutil.Process(process.pid).create_time(),
                    http_port,
                    transport_port,
                    str(node_home),
                    "https" if secured is not None else "http",
                )
            )
        _wait_healthy(started, handles, nodes, timeout, log, secured)
    except BaseException:
        for node in started:
            _stop_pid(node.pid)
        raise
    home.mkdir(parents=True, exist_ok=True)
    (home / STATE_FILE).write_text(json.dumps([asdict(n) for n in started], indent=2), encoding="utf-8")
    for process in handles:
        if detach:
            process.stdin.write(b"detach\n")  # type: ignore[union-attr]
            process.stdin.close()  # type: ignore[union-attr]
        else:
            _LEASHES.append(process)  # kept open: the node ends with this process
    return started


_LEASHES: list[subprocess.Popen[bytes]] = []


def _launch(
    jvm: str,
    cp: str,
    heap_mb: int,
    node_home: Path,
    name: str,
    http_port: int,
    transport_port: int,
    transport_ports: list[int],
    names: list[str],
    secured: bool = False,
) -> subprocess.Popen[bytes]:
    """One node's JVM, leashed by its standard input, in a session of its own, its output in its log."""
    with open(node_home / "logs" / "node.log", "ab") as out:
        return subprocess.Popen(
            [
                jvm,
                f"-Xms{heap_mb}m",
                f"-Xmx{heap_mb}m",
                *JVM_OPTIONS,
                *([f"-Dkorpus.plugins={SECURITY_PLUGIN}"] if secured else []),
                f"-Djava.io.tmpdir={node_home}",
                "-cp",
                cp,
                MAIN_CLASS,
                str(node_home),
                name,
                str(http_port),
                str(transport_port),
                ",".join(map(str, transport_ports)),
                ",".join(names),
            ],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def restart_node(
    home: Path,
    name: str,
    heap_mb: int = 1024,
    timeout: float = STARTUP_SECONDS,
    project: Path = NODE_PROJECT,
    secured: Secured | None = None,
) -> NodeProcess:
    """Start one recorded node of a cluster again — after it was killed — with its ports, name, data and config,
    wait until the cluster counts every recorded node again (its shards may still be recovering), detach it and
    record it. A node started secured needs `secured` to be asked its health."""
    nodes = recorded(home)
    record = next(n for n in nodes if n["name"] == name)
    if recorded_process(record) is not None:
        raise NodeError(f"{name} is running (pid {record['pid']})")
    node_home, scheme = Path(record["home"]), record.get("scheme", "http")
    if scheme == "https" and secured is None:
        raise NodeError(f"{name} was started behind the security plugin: its user and CA are needed to restart it")
    process = _launch(
        java(),
        classpath(project, secured=scheme == "https"),
        heap_mb,
        node_home,
        name,
        record["http_port"],
        record["transport_port"],
        [n["transport_port"] for n in nodes],
        [n["name"] for n in nodes],
        scheme == "https",
    )
    node = NodeProcess(
        name,
        process.pid,
        psutil.Process(process.pid).create_time(),
        record["http_port"],
        record["transport_port"],
        str(node_home),
        scheme,
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            if process.poll() is not None:
                raise NodeError(
                    f"OpenSearch {name} exited ({process.returncode}) while restarting:\n" + _tail(node_home)
                )
            state = health(node.url, secured=secured)
            if state and state.get("number_of_nodes") == len(nodes):
                break
            if time.monotonic() > deadline:
                raise NodeError(f"OpenSearch {name} did not rejoin in {timeout:.0f} s:\n" + _tail(node_home))
            time.sleep(0.5)
    except BaseException:
        _stop_pid(process.pid)
        raise
    process.stdin.write(b"detach\n")  # type: ignore[union-attr]
    process.stdin.close()  # type: ignore[union-attr]
    record.update(pid=node.pid, created=node.created)
    (home / STATE_FILE).write_text(json.dumps(nodes, indent=2), encoding="utf-8")
    return node


def _wait_healthy(
    started: list[NodeProcess],
    handles: list[subprocess.Popen[bytes]],
    nodes: int,
    timeout: float,
    log: IO[str] | None,
    secured: Secured | None = None,
) -> None:
    wanted = {"green"} if nodes > 1 else {"green", "yellow"}
    deadline = time.monotonic() + timeout
    said = 0.0
    while True:
        for node, process in zip(started, handles, strict=True):
            if process.poll() is not None:
                raise NodeError(
                    f"OpenSearch {node.name} exited ({process.returncode}) while starting:\n" + _tail(Path(node.home))
                )
        state = health(started[0].url, secured=secured)
        if state and state.get("number_of_nodes") == nodes and state.get("status") in wanted:
            return
        if time.monotonic() > deadline:
            raise NodeError(
                f"OpenSearch was not healthy in {timeout:.0f} s (last answer: {state}):\n"
                + _tail(Path(started[0].home))
            )
        if log is not None and time.monotonic() - said > 10:
            said = time.monotonic()
            log.write(f"waiting for {nodes} node(s): {state['status'] if state else 'not answering yet'}\n")
            log.flush()
        time.sleep(0.5)


def _tail(node_home: Path, lines: int = 40) -> str:
    try:
        text = (node_home / "logs" / "node.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def recorded(home: Path) -> list[dict[str, Any]]:
    try:
        return json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def status(home: Path, secured: Secured | None = None) -> list[dict[str, Any]]:
    """Each recorded node that is still running: name, url, pid and the cluster health it reports (a secured
    cluster's, asked with `secured`)."""
    out = []
    for node in recorded(home):
        if recorded_process(node) is None:
            continue
        state = health(node_url(node), secured=secured)
        out.append(
            {
                "name": node["name"],
                "url": node_url(node),
                "pid": node["pid"],
                "health": state["status"] if state else "not answering",
            }
        )
    return out


def stop(home: Path) -> int:
    """Stop every recorded node (SIGTERM, then SIGKILL after 30 s); the number that were running."""
    nodes = [node for node in recorded(home) if recorded_process(node) is not None]
    for node in nodes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(node["pid"], signal.SIGTERM)
    for node in nodes:
        _stop_pid(node["pid"])
    (home / STATE_FILE).unlink(missing_ok=True)
    return len(nodes)


def stop_leashed() -> None:
    """Stop the nodes this process started with `detach=False` (a test session's), and wait for them."""
    while _LEASHES:
        process = _LEASHES.pop()
        _stop_pid(process.pid)
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _stop_pid(pid: int, grace: float = 30.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)  # the shutdown hook closes the node: its shards flushed
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.Error:
            break
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)

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


@dataclass
class NodeProcess:
    name: str
    pid: int
    created: float
    http_port: int
    transport_port: int
    home: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


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


def classpath(project: Path = NODE_PROJECT) -> str:
    """The launcher's jar, the server's libraries and the k-NN plugin's jars, as `mvn package` left them."""
    target = project / "target"
    jars = sorted(target.glob("korpus-opensearch-node-*.jar"))
    if not jars or not (target / "lib").is_dir() or not (target / "knn").is_dir():
        raise NodeError(
            f"the OpenSearch node is not built under {target}: run `make opensearch` (mvn -q package in {project})"
        )
    return os.pathsep.join([str(jars[0]), str(target / "lib" / "*"), str(target / "knn" / "*")])


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


def health(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The cluster's `_cluster/health` as the node at `url` answers it, or None if it does not answer."""
    import httpx

    try:
        response = httpx.get(f"{url}/_cluster/health", timeout=timeout)
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
) -> list[NodeProcess]:
    """Start `nodes` JVMs on loopback with their data under `home/node-N`, wait for the cluster's health, record
    them. HTTP ports from `port` (or free ones); the first node's URL is the cluster's. Raises NodeError with the
    failing node's log when a node exits or the cluster is not healthy in `timeout` s; nothing is left running."""
    running = status(home)
    if running:
        raise NodeError(f"nodes are already running under {home} ({running[0]['url']}): `korpus opensearch stop`")
    cp, jvm = classpath(project), java()
    http_ports = free_ports(nodes, port)
    transport_ports = free_ports(nodes, (http_ports[-1] + 100) if port else None)
    names = [f"node-{n + 1}" for n in range(nodes)]
    started: list[NodeProcess] = []
    handles: list[subprocess.Popen[bytes]] = []
    try:
        for name, http_port, transport_port in zip(names, http_ports, transport_ports, strict=True):
            node_home = home / name
            (node_home / "logs").mkdir(parents=True, exist_ok=True)
            process = _launch(jvm, cp, heap_mb, node_home, name, http_port, transport_port, transport_ports, names)
            handles.append(process)
            started.append(
                NodeProcess(
                    name,
                    process.pid,
                    psutil.Process(process.pid).create_time(),
                    http_port,
                    transport_port,
                    str(node_home),
                )
            )
        _wait_healthy(started, handles, nodes, timeout, log)
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
) -> subprocess.Popen[bytes]:
    """One node's JVM, leashed by its standard input, in a session of its own, its output in its log."""
    with open(node_home / "logs" / "node.log", "ab") as out:
        return subprocess.Popen(
            [
                jvm,
                f"-Xms{heap_mb}m",
                f"-Xmx{heap_mb}m",
                *JVM_OPTIONS,
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
    home: Path, name: str, heap_mb: int = 1024, timeout: float = STARTUP_SECONDS, project: Path = NODE_PROJECT
) -> NodeProcess:
    """Start one recorded node of a cluster again — after it was killed — with its ports, name and data, wait until
    the cluster counts every recorded node again (its shards may still be recovering), detach it and record it."""
    nodes = recorded(home)
    record = next(n for n in nodes if n["name"] == name)
    if recorded_process(record) is not None:
        raise NodeError(f"{name} is running (pid {record['pid']})")
    node_home = Path(record["home"])
    process = _launch(
        java(),
        classpath(project),
        heap_mb,
        node_home,
        name,
        record["http_port"],
        record["transport_port"],
        [n["transport_port"] for n in nodes],
        [n["name"] for n in nodes],
    )
    node = NodeProcess(
        name,
        process.pid,
        psutil.Process(process.pid).create_time(),
        record["http_port"],
        record["transport_port"],
        str(node_home),
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            if process.poll() is not None:
                raise NodeError(
                    f"OpenSearch {name} exited ({process.returncode}) while restarting:\n" + _tail(node_home)
                )
            state = health(node.url)
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
        state = health(started[0].url)
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


def status(home: Path) -> list[dict[str, Any]]:
    """Each recorded node that is still running: name, url, pid and the cluster health it reports."""
    out = []
    for node in recorded(home):
        if recorded_process(node) is None:
            continue
        state = health(f"http://127.0.0.1:{node['http_port']}")
        out.append(
            {
                "name": node["name"],
                "url": f"http://127.0.0.1:{node['http_port']}",
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

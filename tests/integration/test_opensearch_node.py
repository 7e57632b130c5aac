"""`korpus opensearch start|status|stop`: the real node korpus assembles from Maven Central, as a user runs it — started
and waited for, listed with its pid, stopped with nothing left; a start killed before the node was healthy leaves
no JVM; a plugin that cannot load is an error that names it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tasks.runtime.opensearch_node import NODE_PROJECT, NodeError, free_ports, start

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]
KORPUS = str(Path(sys.executable).with_name("korpus"))  # the console script, as a user runs it


def _korpus(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KORPUS_HOME=str(home))
    return subprocess.run([KORPUS, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _gone(pid: int, within: float = 60) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.3)
    return False


def test_start_status_stop_as_a_user_runs_them(tmp_path: Path) -> None:
    (port,) = free_ports(1, 9700)
    started = _korpus(tmp_path, "opensearch", "start", "--port", str(port), "--heap-mb", "512")
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip().splitlines()[-1] == f"http://127.0.0.1:{port}"
    assert "OpenSearch 2.19.1 with k-NN 2.19.1.0" in started.stdout
    listed = _korpus(tmp_path, "opensearch", "status")
    assert listed.returncode == 0 and f"http://127.0.0.1:{port} green pid " in listed.stdout
    pid = int(listed.stdout.split("pid ")[1].split()[0])
    assert "KorpusNode" in " ".join(psutil.Process(pid).cmdline())
    again = _korpus(tmp_path, "opensearch", "start", "--port", str(port + 1))
    assert again.returncode == 2 and "already running" in again.stderr
    stopped = _korpus(tmp_path, "opensearch", "stop")
    assert stopped.returncode == 0 and "stopped 1 node(s)" in stopped.stdout
    assert _gone(pid)
    assert _korpus(tmp_path, "opensearch", "status").returncode == 3


def test_a_start_killed_before_the_node_is_healthy_leaves_no_jvm(tmp_path: Path) -> None:
    env = dict(os.environ, KORPUS_HOME=str(tmp_path))
    (port,) = free_ports(1, 9750)
    command = [KORPUS, "opensearch", "start", "--port", str(port)]
    starter = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    jvm = None
    while jvm is None and time.monotonic() < deadline:
        jvm = next(
            (
                p
                for p in psutil.process_iter(["cmdline"])
                if str(tmp_path) in " ".join(p.info["cmdline"] or [])
                and "KorpusNode" in " ".join(p.info["cmdline"] or [])
            ),
            None,
        )
        time.sleep(0.1)
    assert jvm is not None, "the JVM never started"
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    assert _gone(jvm.pid), "the JVM outlived the start that was killed"


def test_a_plugin_that_cannot_load_is_an_error_naming_it(tmp_path: Path) -> None:
    project = tmp_path / "node"
    (project / "target" / "knn").mkdir(parents=True)  # the k-NN plugin's jars are missing
    for jar in (NODE_PROJECT / "target").glob("korpus-opensearch-node-*.jar"):
        shutil.copy(jar, project / "target")
    (project / "target" / "lib").symlink_to(NODE_PROJECT / "target" / "lib")
    with pytest.raises(NodeError, match=r"exited \(1\)(.|\n)*the k-NN plugin cannot load(.|\n)*KNNPlugin"):
        start(tmp_path / "home", port=None, heap_mb=256, project=project)

"""Nothing korpus starts outlives it but its local Prefect server: a `korpus refresh` SIGKILLed (as a cron timeout
or the OOM killer does) while a LibreOffice conversion runs leaves no process of its own behind 15 s later, and the
next refresh reuses the server; an external program that overruns its timeout is killed with every helper it
forked (tasks/runtime/processes.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import psutil
import pytest

from tasks.runtime.prefect_server import running_server
from tasks.runtime.processes import run_owned

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _alive(seen: dict[int, float]) -> list[str]:
    """The processes in `seen` (pid → start time) that are still the same process and not a zombie."""
    living = []
    for pid, created in seen.items():
        try:
            process = psutil.Process(pid)
            if abs(process.create_time() - created) < 0.01 and process.status() != psutil.STATUS_ZOMBIE:
                living.append(f"{pid}: {' '.join(process.cmdline())[:120]}")
        except psutil.Error:
            continue
    return living


def test_a_sigkilled_refresh_leaves_no_process_behind_and_the_next_reuses_the_server(
    models: dict[str, Path], tmp_path: Path
) -> None:
    """#32 item 3: the first `korpus refresh` starts korpus's local Prefect server; SIGKILLed while LibreOffice
    converts, it leaves nothing of its own running — the server, meant to outlive it, stays and answers; the next
    refresh uses that same server (no server per run), whose history holds both runs; `korpus prefect stop` ends
    it."""
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for n in range(4):  # the real DOCX of the fixtures, four versions (a zip comment each), converted one by one
        target = root / f"тз_{n}.docx"
        shutil.copyfile(REPO / "tests" / "fixtures" / "real-archive" / "office" / "alpaca_tz.docx", target)
        with zipfile.ZipFile(target, "a") as docx:
            docx.comment = f"копия {n}".encode()
    home = tmp_path / "prefect"
    env = dict(os.environ, PREFECT_HOME=str(home), KORPUS_PREFECT_PORT="0", KORPUS_META_DOCUMENTS="false")
    env.pop("PREFECT_API_URL", None)  # korpus's own local server, as a plain `korpus refresh` gets
    korpus = Path(sys.executable).with_name("korpus")
    command = [str(korpus), "refresh", "--root", str(root), "--data", str(tmp_path / "data")]
    try:
        refresh = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen: dict[int, float] = {}
        deadline = time.monotonic() + 300
        converting = False
        while time.monotonic() < deadline and refresh.poll() is None and not converting:
            for child in psutil.Process(refresh.pid).children(recursive=True):
                try:
                    seen[child.pid] = child.create_time()
                    converting = converting or "soffice" in " ".join(child.cmdline())
                except psutil.Error:
                    continue
            time.sleep(0.05)
        assert refresh.poll() is None and converting, "the refresh ended before LibreOffice was seen"
        server = running_server(home)
        assert server is not None, "the refresh runs on korpus's local Prefect server"
        os.kill(refresh.pid, signal.SIGKILL)
        refresh.wait()
        deadline = time.monotonic() + 15
        ours = {pid: created for pid, created in seen.items() if pid != server["pid"]}
        while (left := _alive(ours)) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not left, left
        assert running_server(home) == server  # the server outlived the killed run, as it is meant to

        finished = subprocess.run(command, env=env, capture_output=True, timeout=600)
        assert finished.returncode == 0, finished.stderr[-2000:]
        assert running_server(home) == server  # the same process: no server per run
        runs = httpx.post(f"{server['api_url']}/flow_runs/filter", json={}, timeout=30).json()
        assert len(runs) == 2 and any(r["state"]["type"] == "COMPLETED" for r in runs), runs
    finally:
        stopped = subprocess.run([str(korpus), "prefect", "stop"], env=env, capture_output=True, timeout=60)
    assert stopped.returncode == 0 and b"stopped" in stopped.stdout, stopped
    assert running_server(home) is None and not _alive({server["pid"]: server["created"]})


def test_a_timeout_kills_the_helpers_a_program_forked(tmp_path: Path) -> None:
    """Like soffice handing the work to soffice.bin: the program forks a helper and waits; at the timeout both go."""
    marker = tmp_path / "helper.pid"
    script = f"sleep 300 & echo $! > {marker}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        run_owned(["sh", "-c", script], timeout=1)
    helper = int(marker.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(helper) and psutil.Process(helper).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the forked helper outlived the timeout"
        time.sleep(0.1)

"""Nothing korpus starts outlives it: a `korpus refresh` SIGKILLed (as a cron timeout or the OOM killer does) while
its temporary Prefect server and a LibreOffice conversion run leaves no process behind 15 s later; an external
program that overruns its timeout is killed with every helper it forked (tasks/runtime/processes.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest

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


def test_a_sigkilled_refresh_leaves_no_process_behind(models: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for n in range(4):  # the real DOCX of the fixtures, four versions (a zip comment each), converted one by one
        target = root / f"тз_{n}.docx"
        shutil.copyfile(REPO / "tests" / "fixtures" / "real-archive" / "office" / "alpaca_tz.docx", target)
        with zipfile.ZipFile(target, "a") as docx:
            docx.comment = f"копия {n}".encode()
    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect"))
    env.pop("PREFECT_API_URL", None)  # a temporary Prefect server, as a plain `korpus refresh` gets
    korpus = Path(sys.executable).with_name("korpus")
    refresh = subprocess.Popen([str(korpus), "refresh", "--root", str(root), "--data", str(tmp_path / "data")],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    seen: dict[int, float] = {}
    kinds: set[str] = set()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and refresh.poll() is None and not {"uvicorn", "soffice"} <= kinds:
        for child in psutil.Process(refresh.pid).children(recursive=True):
            try:
                seen[child.pid] = child.create_time()
                line = " ".join(child.cmdline())
            except psutil.Error:
                continue
            kinds |= {kind for kind in ("uvicorn", "soffice") if kind in line}
        time.sleep(0.05)
    assert refresh.poll() is None, "the refresh ended before its server and LibreOffice were both seen"
    assert {"uvicorn", "soffice"} <= kinds, kinds
    os.kill(refresh.pid, signal.SIGKILL)
    refresh.wait()
    deadline = time.monotonic() + 15
    while (left := _alive(seen)) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not left, left


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

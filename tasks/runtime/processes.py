"""Child processes korpus owns: nothing it starts outlives it.

- `run_owned` runs an external program (tesseract, ddjvu, LibreOffice, ffmpeg) in a process group of its own and
  kills the whole group when the call ends — on a timeout, on an exception, and after a normal exit, so a helper it
  forked and left behind (`soffice` hands the work to `soffice.bin`) goes with it. `subprocess.run(timeout=…)` kills
  only the process it started.
- `watch_over_me` starts a watchdog beside a long-running command (`korpus refresh`, `korpus serve`, any process
  that runs a refresh on a temporary Prefect server — `run_refresh` starts it): a small process
  in its own session that notes the command's descendants every half second and, the moment the command is gone —
  a normal exit, a cron timeout's SIGKILL, the OOM killer — kills every one of them still running (a temporary
  Prefect server, a LibreOffice conversion, a Tesseract page) — except korpus's own local Prefect server, which is
  started to outlive the run (tasks/runtime/prefect_server.py). A killed process cannot clean up after
  itself; a process outside it can.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

WATCH_SECONDS = 0.5


def kill_group(pgid: int) -> None:
    """SIGKILL a process group, if anything of it is left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_owned(
    command: Sequence[str],
    *,
    timeout: float | None = None,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`subprocess.run(command, capture_output=True)` with the program in a new process group that is killed, with
    everything in it, when the call returns or raises. A timeout raises `subprocess.TimeoutExpired` as before."""
    process = subprocess.Popen(
        list(command),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        process_group=0,
    )
    try:
        stdout, stderr = process.communicate(input=input, timeout=timeout)
    finally:
        kill_group(process.pid)  # the group's id is the leader's pid, valid while any member lives
        if process.returncode is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


_watchdog: subprocess.Popen[bytes] | None = None


def watch_over_me() -> subprocess.Popen[bytes] | None:
    """Start the watchdog for this process, once (see the module docstring); None when it cannot run here."""
    global _watchdog
    if _watchdog is not None and _watchdog.poll() is None:
        return _watchdog
    try:
        _watchdog = subprocess.Popen(
            [sys.executable, "-m", "tasks.runtime.processes", str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the command's group: a kill of the group leaves the watchdog to act
            cwd=Path(__file__).resolve().parents[2],
        )
    except OSError:
        return None
    return _watchdog


def release_watchdog() -> None:
    """Stop this process's watchdog without its clean-up (SIGTERM): for a process that has stopped its children
    itself and goes on living (the test session checks for leftovers after this)."""
    global _watchdog
    if _watchdog is not None and _watchdog.poll() is None:
        _watchdog.terminate()
        _watchdog.wait(timeout=10)
    _watchdog = None


def _descendants(process: psutil.Process) -> dict[int, float]:
    try:
        found = process.children(recursive=True)
    except psutil.Error:
        return {}
    seen: dict[int, float] = {}
    for child in found:
        try:
            seen[child.pid] = child.create_time()
        except psutil.Error:
            continue
    return seen


def recorded_process(state: dict[str, Any]) -> psutil.Process | None:
    """The process a state file recorded (`pid`, `created`) if it is still that process — not a reused pid, not a
    zombie — else None. Korpus's own long-lived processes (the Prefect server, OpenSearch nodes) are found so."""
    if "pid" not in state or "created" not in state:
        return None
    process = _still_ours(state["pid"], state["created"])
    try:
        return process if process is not None and process.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:  # gone since
        return None


def _still_ours(pid: int, created: float) -> psutil.Process | None:
    try:
        process = psutil.Process(pid)
        return process if abs(process.create_time() - created) < 0.01 else None  # not a reused pid
    except psutil.Error:
        return None


def _persistent(process: psutil.Process) -> bool:
    """korpus's local Prefect server (tasks/runtime/prefect_server.py): started by a run, meant to outlive it."""
    try:
        return process.environ().get("KORPUS_PERSISTENT_SERVER") == "1"
    except psutil.Error:
        return False


def clean_up_after(watched: int, seen: dict[int, float]) -> list[int]:
    """Kill what `watched` left running: every process in `seen` (pid → start time) that is still the same process,
    its own descendants, and their process groups. Returns the pids killed."""
    me = os.getpgid(0)
    alive = [p for pid, created in seen.items() if (p := _still_ours(pid, created)) is not None]
    for process in list(alive):  # what they started since the last look
        alive += [c for pid, created in _descendants(process).items() if (c := _still_ours(pid, created)) is not None]
    alive = [p for p in alive if not _persistent(p)]
    killed = []
    for process in alive:
        try:
            group = os.getpgid(process.pid)
            if group not in (me, watched) and group == process.pid:
                kill_group(group)
            process.kill()
            killed.append(process.pid)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return killed


def _watch(pid: int) -> None:
    """The watchdog's loop: note the descendants of `pid` until it is gone, then kill what is left of them."""
    try:
        watched = psutil.Process(pid)
    except psutil.Error:
        return
    seen: dict[int, float] = {}
    while True:
        try:
            if watched.status() == psutil.STATUS_ZOMBIE:  # killed, not yet reaped by its parent: gone all the same
                break
            watched.wait(timeout=WATCH_SECONDS)
            break  # gone
        except psutil.TimeoutExpired:
            seen.update(_descendants(watched))
        except psutil.Error:
            break
    clean_up_after(pid, {p: c for p, c in seen.items() if p != os.getpid()})


def _ignore(*_args: Any) -> None:
    """The watchdog outlives a Ctrl-C or a hang-up in the terminal (it is in its own session anyway)."""


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _ignore)
    signal.signal(signal.SIGHUP, _ignore)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # release_watchdog: leave without cleaning up
    _watch(int(sys.argv[1]))

"""Shared fixtures. Integration tests use the real models built by `korpus models` under KORPUS_HOME."""

from __future__ import annotations

import os
import tempfile

import pytest

# Before Prefect is imported: a private Prefect home (ephemeral server database) and no telemetry lookups. The suite
# removes the home it made when it ends (pytest_sessionfinish); one the caller gave is the caller's.
_OWN_PREFECT_HOME = None if "PREFECT_HOME" in os.environ else tempfile.mkdtemp(prefix="korpus-test-prefect-")
if _OWN_PREFECT_HOME:
    os.environ["PREFECT_HOME"] = _OWN_PREFECT_HOME
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")  # a loaded 2-core machine (FACTS.md)
os.environ.setdefault("HF_HUB_OFFLINE", "1")


# --- no process outlives the suite ---------------------------------------------------------------------------
# The test process becomes a child subreaper: whatever a test starts and abandons (a refresh SIGKILLed by a test,
# the temporary Prefect server it had started, a LibreOffice helper) is re-parented to this process instead of
# init, so at the end of the session every process the tests started and left running is a descendant of this
# one. The suite fails if there is any (each is listed, then killed). Each is named with the test after which it
# was first seen, and the list is printed again at the very end of the report, where a CI log's tail shows it.
_PR_SET_CHILD_SUBREAPER = 36
_FIRST_SEEN: dict[tuple[int, float], str] = {}  # (pid, start time) -> the test after which it was first running
_LEFT_REPORT: list[str] = []


def pytest_configure(config: object) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def left_running(reap: bool = True) -> list:
    """Living descendants of the test process (zombies are not counted; with `reap`, those re-parented here are
    reaped — at the session's end only: a test's own child is its `Popen`'s to wait for)."""
    import psutil

    living = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                if reap and child.ppid() == os.getpid():
                    os.waitpid(child.pid, os.WNOHANG)
                continue
            living.append(child)
        except (psutil.Error, ChildProcessError):
            continue
    return living


def _identity(process: object) -> tuple[int, float] | None:
    import psutil

    try:
        return process.pid, process.create_time()  # type: ignore[attr-defined]
    except psutil.Error:
        return None


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    for process in left_running(reap=False):
        if (key := _identity(process)) is not None:
            _FIRST_SEEN.setdefault(key, nodeid)


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    import sys
    import time

    from tasks.runtime.processes import release_watchdog

    release_watchdog()  # the product's guard for this process (flows/corpus_refresh.py run_refresh), not a leftover
    from tasks.runtime.prefect_server import stop_server

    stop_server()  # korpus's local Prefect server under this session's PREFECT_HOME, started by the first refresh
    try:  # the temporary server Prefect itself started for the in-process flows; Prefect stops it at exit
        from prefect.server.api.server import SubprocessASGIServer

        for server in list(SubprocessASGIServer._instances.values()):
            server.stop()
    except ImportError:
        pass
    # A process told to stop a moment ago may still be on its way out: a minute, as a loaded 2-core machine may need
    # (the wait ends as soon as none is left; one that never stops is still found).
    deadline = time.monotonic() + 60
    while (left := left_running()) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not left:
        if _OWN_PREFECT_HOME:
            import shutil

            shutil.rmtree(_OWN_PREFECT_HOME, ignore_errors=True)
        return
    lines = []
    for process in left:
        try:
            seen = _FIRST_SEEN.get(_identity(process) or (0, 0.0), "the session's end")
            lines.append(f"  pid {process.pid} (first running after {seen}): {' '.join(process.cmdline())[:200]}")
            process.kill()
        except Exception:  # gone meanwhile
            continue
    _LEFT_REPORT[:] = ["processes the tests started were still running at the end (killed now):", *lines]
    print("\n" + "\n".join(_LEFT_REPORT), file=sys.stderr)
    session.exitstatus = 1  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: object) -> None:
    """The leftovers again after the durations, so the last lines of a log name them."""
    for line in _LEFT_REPORT:
        terminalreporter.write_line(line, red=True)  # type: ignore[attr-defined]

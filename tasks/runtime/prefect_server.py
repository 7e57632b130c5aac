"""The local Prefect server korpus runs flows against: started once, reused by every later run, its history kept.

Without `PREFECT_API_URL`, Prefect starts a temporary server for each process that runs a flow — 6.5 s of every
`korpus refresh`, and the Prefect UI sees nothing once the run is over. Instead `ensure_server` starts `prefect server
start` once, detached (its own session, so neither a finished nor a SIGKILLed refresh takes it down; the refresh's
watchdog leaves it alone — tasks/runtime/processes.py), with its database under `PREFECT_HOME`, and records it in
`<PREFECT_HOME>/korpus-server.json`. Every later flow run finds it there (same process, healthy) and uses it; two
runs starting at once agree on one server under a file lock. `PREFECT_API_URL` set by the user wins: korpus starts
nothing. `korpus prefect status|start|stop` shows, starts or stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from tasks.runtime.processes import recorded_process

PERSISTENT_MARK = "KORPUS_PERSISTENT_SERVER"
"""In the server's environment: the watchdog of the command that started it does not kill it."""
STATE_FILE = "korpus-server.json"
STARTUP_SECONDS = 180.0  # `prefect server start` migrates its database first: slow on a loaded 2-core machine


def prefect_home() -> Path:
    """Where Prefect keeps its database (PREFECT_HOME, else Prefect's default ~/.prefect)."""
    from prefect.settings import PREFECT_HOME

    return Path(os.environ.get("PREFECT_HOME") or PREFECT_HOME.value()).expanduser()


def _healthy(api_url: str, timeout: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{api_url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def running_server(home: Path | None = None) -> dict[str, Any] | None:
    """The server korpus started under this Prefect home, if it is running and answers; else None."""
    path = (home or prefect_home()) / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if recorded_process(state) is None or not _healthy(state["api_url"]):
        return None
    return state


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise OSError("no free port on 127.0.0.1")


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "korpus-server.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # a second run waits while the first starts the server
        yield


def ensure_server(port: int = 4200) -> str:
    """The API URL flows should use: PREFECT_API_URL when set, else korpus's local server (started if needed)."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    home = prefect_home()
    with _locked(home):
        state = running_server(home)
        if state is not None:
            return state["api_url"]
        port = _free_port(port)
        env = {
            **os.environ,
            "PREFECT_HOME": str(home),
            PERSISTENT_MARK: "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }
        env.pop("PREFECT_API_URL", None)
        with open(home / "korpus-server.log", "ab") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        api_url = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _healthy(api_url):
            if server.poll() is not None or time.monotonic() > deadline:
                _stop_group(server.pid)
                tail = (home / "korpus-server.log").read_text(encoding="utf-8", errors="replace")[-1500:]
                raise RuntimeError(f"the local Prefect server did not start (log {home / 'korpus-server.log'}): {tail}")
            time.sleep(0.5)
        state = {
            "pid": server.pid,
            "created": psutil.Process(server.pid).create_time(),
            "port": port,
            "api_url": api_url,
            "ui_url": f"http://127.0.0.1:{port}",
            "home": str(home),
        }
        (home / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
        return api_url


def _stop_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)  # the server and its uvicorn child: one session, one group
    deadline = time.monotonic() + 20
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stop_server(home: Path | None = None) -> bool:
    """Stop korpus's local server under this Prefect home; False when none was running."""
    home = home or prefect_home()
    path = home / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    process = recorded_process(state)
    path.unlink(missing_ok=True)
    if process is None:
        return False
    _stop_group(process.pid)
    return True


@contextlib.contextmanager
def flows_on_server(port: int = 4200) -> Iterator[str]:
    """Run the flows inside on korpus's local server (or PREFECT_API_URL): no temporary server of their own."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api_url = ensure_server(port)
    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        yield api_url

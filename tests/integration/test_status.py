"""`korpus status` on the session's refreshed sample, with Prefect and Dask addresses that answer and that do not
(a loopback HTTP server standing in for Prefect's /health, a listening socket for the scheduler)."""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler

import pytest
from typer.testing import CliRunner

from korpus.cli import app

from .chat_stand_in import serving
from .conftest import Refreshed

pytestmark = pytest.mark.integration


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/api/health" else 404)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *_args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_status_says_what_a_person_asks_first(refreshed: Refreshed, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    data = str(refreshed.settings.data)
    report = json.loads(runner.invoke(app, ["status", "--data", data, "--json"]).stdout)
    last = report["last_refresh"]
    assert last["finished_at"] and last["seconds"] > 0 and last["changes"] == refreshed.second["changes"]
    assert report["quarantine_open"]["by_reason"]["missing-metadata"] >= 1
    assert report["index"]["chunks_current"] > 0 and report["index"]["embed_model"]
    assert report["models"]["embed"].endswith("e5-small-int8") and report["models"]["vlm"] == "not configured"
    assert report["prefect"].startswith("not configured") and report["dask"].startswith("not configured")

    with serving(Health) as prefect, socket.socket() as scheduler:
        scheduler.bind(("127.0.0.1", 0))
        scheduler.listen()
        monkeypatch.setenv("PREFECT_API_URL", f"{prefect}/api")
        monkeypatch.setenv("KORPUS_DASK_ADDRESS", f"tcp://127.0.0.1:{scheduler.getsockname()[1]}")
        up = json.loads(runner.invoke(app, ["status", "--data", data, "--json"]).stdout)
    assert up["prefect"].endswith("/api answers") and up["dask"].endswith("answers")
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{_free_port()}/api")
    monkeypatch.setenv("KORPUS_DASK_ADDRESS", f"tcp://127.0.0.1:{_free_port()}")
    down = runner.invoke(app, ["status", "--data", data])
    assert down.exit_code == 0 and down.output.count("does not answer") == 2

    empty = runner.invoke(app, ["status", "--data", str(refreshed.root.parent / "nothing-here")])
    assert empty.exit_code == 0 and "run `korpus refresh --root DIR`" in empty.output

"""`korpus status` on the session's refreshed sample, with Prefect and Dask addresses that answer and that do not
(a loopback HTTP server standing in for Prefect's /health, a listening socket for the scheduler)."""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from typer.testing import CliRunner

from korpus.apps.cli import app

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
    assert report["models"]["embed"].endswith("e5-small-onnx") and report["models"]["vlm"] == "not configured"
    # the refresh started korpus's persistent server under this session's PREFECT_HOME; a home without one says so
    assert report["prefect"].startswith("korpus's local Prefect server at http://127.0.0.1:"), report["prefect"]
    assert report["prefect"].endswith("answers (UI: " + report["prefect"].split(" at ")[1].split("/api")[0] + ")")
    assert report["dask"].startswith("not configured")
    with monkeypatch.context() as empty:
        empty.setenv("PREFECT_HOME", str(refreshed.settings.data / "no-prefect-here"))
        bare = json.loads(runner.invoke(app, ["status", "--data", data, "--json"]).stdout)
    assert bare["prefect"].startswith("not configured: the next refresh starts korpus's local Prefect server")

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
    # a configured part of the topology that does not answer makes korpus degraded (exit 3), each named as a reason
    assert down.exit_code == 3 and down.output.count("does not answer") == 4, down.output
    assert "refreshes cannot run" in down.output and "scheduled refreshes do not start" in down.output

    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.delenv("KORPUS_DASK_ADDRESS")
    empty = runner.invoke(app, ["status", "--data", str(refreshed.root.parent / "nothing-here")])
    assert empty.exit_code == 0 and "run `korpus refresh --root DIR`" in empty.output


def test_status_and_health_say_degraded_with_every_reason(refreshed: Refreshed, tmp_path: Path) -> None:
    """Each fault a status must not hide, planted in a copy of the session index: the answer is `degraded`, names it,
    `korpus status` exits 3 and `/health` answers 503; the healthy copy answers ok and 200 first."""
    from fastapi.testclient import TestClient

    from korpus.apps.api import create_app
    from korpus.core.settings import Settings
    from tasks.index.sqlite import SqliteIndex

    data = refreshed.copy_index(tmp_path / "data")
    runner = CliRunner()

    def verdict(**settings: object) -> tuple[int, dict, int, dict]:
        args = ["status", "--data", str(data), "--json"]
        done = runner.invoke(app, args)
        health = TestClient(create_app(Settings(data=data, **settings))).get("/health")
        return done.exit_code, json.loads(done.stdout), health.status_code, health.json()

    code, report, http, health = verdict()
    assert (code, report["health"], http, health["status"], health["reasons"]) == (0, "ok", 200, "ok", [])
    with SqliteIndex(data / "korpus.db") as index:
        last = index.last_refresh()
        index.record_refresh({**last, "failed": "RuntimeError: the model file is damaged"})
    code, report, http, health = verdict()
    assert code == 3 and report["health"] == "degraded" and http == 503
    assert any("last refresh failed" in r and "model file is damaged" in r for r in report["degraded"])
    assert report["degraded"] == health["reasons"]
    with SqliteIndex(data / "korpus.db") as index:
        index.record_refresh({**last, "meta_failed": "MemoryError: "})
        with index.conn:
            index.conn.execute("UPDATE index_meta SET value = 'e5-small' WHERE key = 'embed_model'")
    _code, report, _http, _health = verdict()
    assert any("meta-document build failed" in r for r in report["degraded"])
    assert any("model mismatch" in r and "e5-small-onnx" in r for r in report["degraded"])
    assert not any("last refresh failed" in r for r in report["degraded"])  # a later refresh did not fail
    with SqliteIndex(data / "korpus.db") as index:
        with index.conn:
            index.conn.execute("UPDATE index_meta SET value = 'e5-small-onnx' WHERE key = 'embed_model'")
        for n in range(4):  # the open queue grows in every refresh
            with index.conn:
                index.conn.execute(
                    "INSERT INTO quarantine (item_id, source_id, reasons, first_seen, last_seen) VALUES "
                    "(?, 'x.txt', '[\"empty-text\"]', '2026-01-01', '2026-01-01')",
                    (f"grow-{n}",),
                )
            index.record_refresh(last)
    _code, report, _http, _health = verdict()
    assert [r for r in report["degraded"] if r.startswith("quarantine growing")], report["degraded"]
    _code, _report, http, health = verdict(backend="opensearch", opensearch_url=f"http://127.0.0.1:{_free_port()}")
    assert http == 503 and any("unreachable" in r for r in health["reasons"]), health

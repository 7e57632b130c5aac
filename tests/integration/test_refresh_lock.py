"""One refresh at a time per data directory (tasks/runtime/refresh_lock.py): a real flock, real refreshes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from korpus.apps.cli import app
from tasks.index.sqlite import SqliteIndex
from tasks.runtime.refresh_lock import refresh_lock

pytestmark = pytest.mark.integration


def _archive(root: Path, files: int = 3) -> None:
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    for n in range(files):
        (root / f"записка_{n}.txt").write_text(f"Служебная записка № {n} о ремонте кровли склада.\n", encoding="utf-8")


def test_a_second_refresh_stops_or_waits_while_one_holds_the_data_directory(
    models, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, data = tmp_path / "root", tmp_path / "data"
    _archive(root)
    runner = CliRunner()
    with refresh_lock(data):  # another refresh holds it
        refused = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data)])
        assert (
            refused.exit_code == 4
            and "another refresh of" in refused.output
            and f"pid {os.getpid()}" in (refused.output)
        )
        assert "KORPUS_REFRESH_WAIT" in refused.output
    with SqliteIndex(data / "korpus.db") as index:
        assert index.chunk_count() == 0  # nothing was written by the refused run

    # With a wait: the holder lets go after a moment, the waiting refresh then runs to the end.
    held, released = threading.Event(), threading.Event()

    def holder() -> None:
        with refresh_lock(data):
            held.set()
            released.wait(timeout=60)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(timeout=10)
    threading.Timer(2.0, released.set).start()
    monkeypatch.setenv("KORPUS_REFRESH_WAIT", "120")
    waited = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data), "--json"])
    thread.join()
    assert released.is_set() and waited.exit_code == 0, waited.output
    with SqliteIndex(data / "korpus.db") as index:
        assert {s["source_id"] for s in index.sources() if s["kind"] == "text"} == {
            f"записка_{n}.txt" for n in range(3)
        }


def test_two_refreshes_started_together_never_interleave(models, tmp_path: Path) -> None:
    root, data = tmp_path / "root", tmp_path / "data"
    _archive(root, files=6)
    env = {**os.environ, "KORPUS_REFRESH_WAIT": "600", "KORPUS_META_DOCUMENTS": "false"}
    script = "from korpus.apps.cli import app; app()"
    command = [sys.executable, "-c", script, "refresh", "--root", str(root), "--data", str(data), "--json"]
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [run.communicate(timeout=900) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [o[1][-2000:] for o in outputs]
    summaries = [json.loads(out[out.index("{") :]) for out, _ in outputs]
    with SqliteIndex(data / "korpus.db") as index:
        rows = [s for s in index.sources() if s["lifecycle"] == "current"]
        assert len(rows) == 6 and len({s["source_id"] for s in rows}) == 6  # one current version each
        assert index.chunk_count() == 6
    # The second ran after the first had finished: it found every file indexed, none half-done.
    assert sorted(s["changes"].get("new", 0) for s in summaries) == [0, 6]

"""`korpus refresh` as a person and as cron see it (#62): on a terminal (a real pseudo-terminal) a live progress
display and no library log lines; through a pipe, plain progress lines without control codes; with -v, the library
logs on the terminal as before. Each run's Dask cluster really starts (more small files than the refresh indexes
before it), so its INFO lines exist — in the data directory's log file."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ESCAPE = "\x1b"


def _archive(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for n in range(12):  # the first 8 are indexed before the cluster starts (flows/first_documents.py): 4 go to it
        (root / f"письмо_{n:02d}.txt").write_text(
            f"Письмо номер {n}. Просим согласовать поставку {n + 3} комплектов оборудования для склада.\n",
            encoding="utf-8",
        )
    return root


def _command(root: Path, data: Path, *extra: str) -> list[str]:
    return [str(Path(sys.executable).with_name("korpus")), "refresh", "--root", str(root), "--data", str(data), *extra]


def _env(prefect_server: str) -> dict[str, str]:
    return dict(os.environ, PREFECT_API_URL=prefect_server, KORPUS_META_DOCUMENTS="false", COLUMNS="120")


def _on_a_terminal(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `command` with a pseudo-terminal as its stdout and stderr; its exit code and everything it wrote."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=600), b"".join(chunks).decode("utf-8", "replace")


def test_a_terminal_shows_progress_and_no_library_logs(models, prefect_server: str, tmp_path: Path) -> None:
    root, data = _archive(tmp_path / "archive"), tmp_path / "data"
    code, seen = _on_a_terminal(_command(root, data), _env(prefect_server))
    assert code == 0, seen[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen)
    assert ESCAPE in seen and "\r" in seen  # a live display redraws in place
    assert re.search(r"files\s.*12/12", text) and "chunks indexed" in text and "first searchable after" in text
    assert "refresh complete: 12 files" in text
    for library in ("distributed.", "INFO", "Finished in state", "Registering Worker"):
        assert library not in text, library
    log = (data / "logs" / "refresh.log").read_text(encoding="utf-8")
    assert "distributed.scheduler" in log  # the cluster ran: its lines are logged there


def test_a_pipe_gets_plain_lines_and_verbose_gets_the_logs(models, prefect_server: str, tmp_path: Path) -> None:
    root, env = _archive(tmp_path / "archive"), _env(prefect_server)
    plain = subprocess.run(_command(root, tmp_path / "data"), env=env, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert ESCAPE not in plain.stdout + plain.stderr and "\r" not in plain.stdout
    lines = plain.stdout.splitlines()
    assert re.match(r"\[\d+ s\] files \d+/12 · ", lines[0]), lines[:3]
    assert any("files 12/12" in line and "documents done" in line for line in lines), lines
    assert "distributed." not in plain.stdout + plain.stderr
    verbose = subprocess.run(
        _command(root, tmp_path / "data-v", "-v"), env=env, capture_output=True, text=True, timeout=600
    )
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "distributed.scheduler" in verbose.stdout + verbose.stderr  # -v: the library logs as before
    assert not (tmp_path / "data-v" / "logs" / "refresh.log").exists()

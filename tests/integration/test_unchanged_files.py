"""#32 item 4: a refresh does not read a file whose size, modification and status-change times and inode match its last
reading; a changed file is read (also one edited with its old mtime put back); `korpus refresh --verify` hashes every
file and finds the edit a file system's stat could not show."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tasks.receive as receive
from flows.corpus_refresh import run_refresh
from korpus.apps.cli import app
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.receive import SETTLED_NS, file_sha256

pytestmark = pytest.mark.integration
LETTERS = {f"письмо_{n}.txt": f"Письмо номер {n} о поставке угля на склад {n * 7}." for n in range(6)}


@pytest.fixture
def hashing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file discovery reads and hashes, by name."""
    read: list[str] = []

    def counted(path: Path) -> str:
        read.append(Path(path).name)
        return file_sha256(path)

    monkeypatch.setattr(receive, "file_sha256", counted)
    return read


def test_an_unchanged_tree_is_not_read_and_a_changed_file_is(models: dict, tmp_path: Path, hashing: list[str]) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for name, text in LETTERS.items():
        (root / name).write_text(text, encoding="utf-8")
    time.sleep(SETTLED_NS / 1e9)  # a file written in the last 2 s is not trusted by its reading (racily clean)
    settings = Settings(data=tmp_path / "data", meta_documents=False, gc_after_refresh=False)
    first = run_refresh(root, settings)
    assert first["files_hashed"] == 6 and sorted(hashing) == sorted(LETTERS)

    hashing.clear()
    again = run_refresh(root, settings)
    assert again["files_hashed"] == 0 and hashing == [] and again["changes"] == {"unchanged": 6}

    (root / "письмо_1.txt").write_text("Письмо номер 1 отозвано.", encoding="utf-8")  # another size
    edited = root / "письмо_2.txt"
    before = edited.stat()
    edited.write_text(LETTERS["письмо_2.txt"].replace("угля", "соли"), encoding="utf-8")  # same size…
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))  # …and its old mtime put back
    assert edited.stat().st_size == before.st_size and edited.stat().st_mtime_ns == before.st_mtime_ns
    hashing.clear()
    changed = run_refresh(root, settings)
    assert sorted(hashing) == ["письмо_1.txt", "письмо_2.txt"], hashing  # the status-change time moved
    assert changed["changes"] == {"changed": 2, "unchanged": 4}


def test_verify_hashes_every_file_and_finds_what_the_stat_hid(
    models: dict, tmp_path: Path, hashing: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a file system whose status-change time does not move (some network shares), an edit that kept size and
    mtime is invisible to the stat: the catalog's reading is made to match the edited file, as such a share would
    show it. A plain refresh trusts it; `--verify` reads every file and indexes the edit."""
    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for name, text in LETTERS.items():
        (root / name).write_text(text, encoding="utf-8")
    time.sleep(SETTLED_NS / 1e9)
    monkeypatch.setenv("KORPUS_META_DOCUMENTS", "false")
    settings = Settings(data=data, gc_after_refresh=False)
    run_refresh(root, settings)
    edited = root / "письмо_3.txt"
    edited.write_text(LETTERS["письмо_3.txt"].replace("угля", "соли"), encoding="utf-8")
    stat = edited.stat()
    with SqliteIndex(settings.index_path) as index:
        index.conn.execute(
            "UPDATE file_readings SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ? WHERE source_id = ?",
            (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, "письмо_3.txt"),
        )

    hashing.clear()
    trusted = run_refresh(root, settings)
    assert hashing == [] and trusted["changes"] == {"unchanged": 6}  # the stat said nothing changed

    runner = CliRunner()
    verified = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data), "--verify", "--json"])
    assert verified.exit_code == 0, verified.output
    summary = json.loads(verified.stdout[verified.stdout.index("{") :])
    assert summary["files_hashed"] == 6 and sorted(hashing) == sorted(LETTERS)
    assert summary["changes"] == {"changed": 1, "unchanged": 5}
    with SqliteIndex(settings.index_path) as index:
        current = {s["source_id"]: s["version"] for s in index.sources() if s["lifecycle"] == "current"}
    assert current["письмо_3.txt"] == file_sha256(edited)

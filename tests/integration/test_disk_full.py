"""An index that cannot be written during publish: SQLite's own SQLITE_FULL (the publishing connection's
`max_page_count` capped at the pages the file already has) and SQLITE_READONLY (`query_only`; a chmod'ed data
directory cannot stop root, who runs CI). The refresh stops with a clear error naming what
to do, the version current before is still served, and the next refresh (space freed) completes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import tasks.index.sqlite
from korpus.apps.cli import app
from tasks.index.sqlite import SqliteIndex
from tasks.meta.publish import META_PREFIX
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fault", ["disk-full", "read-only"])
def test_index_unwritable_during_publish(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "приказ.txt").write_text("Приказ о премировании сотрудников отдела снабжения.", encoding="utf-8")
    data = tmp_path / "data"
    runner = CliRunner()
    assert runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data)]).exit_code == 0
    (root / "приказ.txt").write_text("Приказ об отмене премирования " + "сотрудников отдела " * 400, encoding="utf-8")
    original = SqliteIndex.publish_version

    def on_a_full_disk(self: SqliteIndex, *args: object, **kwargs: object) -> None:
        if fault == "disk-full":
            pages = self.conn.execute("PRAGMA page_count").fetchall()[0][0]
            self.conn.execute(f"PRAGMA max_page_count = {pages}")  # not one page more: SQLITE_FULL on growth
        else:
            self.conn.execute("PRAGMA query_only = 1")  # SQLITE_READONLY, as for a file root cannot write
        original(self, *args, **kwargs)

    monkeypatch.setattr(tasks.index.sqlite.SqliteIndex, "publish_version", on_a_full_disk)
    full = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data)])
    error = "FullError" if fault == "disk-full" else "ReadOnlyError"
    assert full.exit_code == 2 and error in full.output and "free disk space" in full.output, full.output
    with SqliteIndex(data / "korpus.db") as index:
        hits = retrieve(index.searcher, "премировании", None, ["public"], k=5, mode="bm25")
        hits = [h for h in hits if not h["source_id"].startswith(META_PREFIX)]  # the files, not the TOC about them
        assert [h["source_id"] for h in hits] == ["приказ.txt"] and "об отмене" not in hits[0]["text"]
        assert index.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    monkeypatch.undo()
    again = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data), "--json"])
    assert again.exit_code == 0, again.output
    with SqliteIndex(data / "korpus.db") as index:
        hits = retrieve(index.searcher, "отмене премирования", None, ["public"], k=5, mode="bm25")
    hits = [h for h in hits if not h["source_id"].startswith(META_PREFIX)]
    assert hits and "об отмене" in hits[0]["text"]

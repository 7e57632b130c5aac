"""Data lifecycle: superseded and removed versions are kept for the retention period, then `korpus gc` removes them —
chunks, full-text rows, vectors, pages, page-cache entries, converted PDFs, decoded audio, searchable copies,
transcripts and evidence — in transactions a kill cannot half-apply; BM25 statistics count current chunks only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.corpus_refresh import run_refresh
from korpus.apps.cli import app
from korpus.core.settings import Settings
from tasks.index.retention import disk_use
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
DOCX = REPO / "tests" / "fixtures" / "real-archive" / "office" / "alpaca_tz.docx"


def _write(root: Path, round_: int) -> None:
    """Every file in its `round_`-th edition: two letters, a scanned page (Tesseract) and a DOCX (LibreOffice)."""
    from PIL import Image, ImageDraw, ImageFont

    (root / "письмо.txt").write_text(f"Письмо о поставке угля, редакция {round_}.", encoding="utf-8")
    (root / "записка.txt").write_text(f"Записка о ремонте крыши, редакция {round_}.", encoding="utf-8")
    page = Image.new("L", (1240, 600), 255)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 40)
    ImageDraw.Draw(page).text((80, 200), f"Акт приёмки насосов номер {round_}", fill=0, font=font)
    page.save(root / "акт.png", dpi=(300, 300))
    garbage = "M]heh\\guc dh^_dk Cl>opMa no KHA " * 6
    (root / "мусор.txt").write_text(f"{garbage}редакция {round_}.", encoding="utf-8")  # its chunk is refused
    (root / "программа.exe").write_bytes(b"MZ" + bytes([round_]) * 64)  # refused whole: no reader
    shutil.copyfile(DOCX, root / "тз.docx")
    with zipfile.ZipFile(root / "тз.docx", "a") as docx:
        docx.comment = f"редакция {round_}".encode()


def _counts(index: SqliteIndex) -> dict[str, int]:
    one = lambda sql: index.conn.execute(sql).fetchall()[0][0]  # noqa: E731
    return {
        "versions": one("SELECT count(*) FROM sources"),
        "stale_versions": one("SELECT count(*) FROM sources WHERE lifecycle != 'current'"),
        "chunks": one("SELECT count(*) FROM chunks"),
        "current_chunks": one("SELECT count(*) FROM chunks WHERE lifecycle = 'current'"),
        "fts_rows": one("SELECT count(*) FROM chunk_terms_docsize"),
        "tokens": one("SELECT count(*) FROM chunk_tokens"),
        "vectors": one(f"SELECT count(*) FROM {index.vector_table()}"),
        "pages": one("SELECT count(*) FROM pages"),
    }


def test_gc_removes_expired_versions_and_what_only_they_needed(models: dict[str, Path], tmp_path: Path) -> None:
    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    settings = Settings(data=data)
    subprocess.run(
        ["espeak-ng", "-v", "ru", "-w", str(root / "совещание.wav"), "Совещание о ремонте склада."], check=True
    )
    for round_ in range(4):  # every file changed three times (the recording stays as it is)
        _write(root, round_)
        summary = run_refresh(root, settings)
        assert summary["garbage_collected"]["versions"] == 0  # within the retention period: nothing goes
    (root / "записка.txt").unlink()  # and two removed
    (root / "совещание.wav").unlink()
    run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        before = _counts(index)
        current = {s["version"] for s in index.sources() if s["lifecycle"] == "current"}
    assert before["stale_versions"] >= 12 and before["fts_rows"] == before["current_chunks"] < before["chunks"]
    assert before["tokens"] == before["chunks"] == before["vectors"]
    cached = {p.name for p in (data / "cache" / "pages").glob("*/*") if p.is_dir()}
    assert len(cached) >= 4 and len(list((data / "converted").glob("*/*.pdf"))) == 4
    transcripts = sorted(p.name for p in (data / "transcripts").rglob("*") if p.is_file())
    assert transcripts == ["совещание.wav.txt", "совещание.wav.vtt"], transcripts
    disk_before = disk_use(data)
    # catalog times have whole seconds: a version superseded in the second the dry run starts is not yet "older
    # than 0 days" for it, and is for the gc a second later (seen in CI: 21 versions against 20)
    time.sleep(1.1)

    runner = CliRunner()
    dry = runner.invoke(app, ["gc", "--older-than", "0", "--dry-run", "--json", "--data", str(data)])
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)
    with SqliteIndex(settings.index_path) as index:
        assert _counts(index) == before  # a dry run removes nothing
    done = runner.invoke(app, ["gc", "--older-than", "0", "--json", "--data", str(data)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["versions"] == planned["versions"] == before["stale_versions"]
    assert report["chunks"] == planned["chunks"] == before["chunks"] - before["current_chunks"]
    assert report["bytes_after"] < report["bytes_before"] == disk_before
    with SqliteIndex(settings.index_path) as index:
        after = _counts(index)
        assert after["stale_versions"] == 0 and after["chunks"] == after["current_chunks"] == before["current_chunks"]
        assert after["fts_rows"] == after["tokens"] == after["vectors"] == after["chunks"]
        assert {s["version"] for s in index.sources()} == current
        assert retrieve(index.searcher, "поставке угля", None, ["public"], k=1, mode="bm25")[0]["text"].endswith(
            "редакция 3."
        )
        assert not retrieve(index.searcher, "ремонте крыши", None, ["public"], k=5, mode="bm25")
    kept = {p.name for p in (data / "cache" / "pages").glob("*/*") if p.is_dir()}
    assert kept and kept <= current and kept < cached
    assert {p.stem for p in (data / "converted").glob("*/*.pdf")} <= current
    assert not [p for p in (data / "transcripts").rglob("*") if p.is_file()]  # the removed recording's transcript
    assert len(list((data / "converted").glob("*/*.pdf"))) == 1
    with SqliteIndex(settings.index_path) as index:  # the items of expired versions are resolved, with an audit row
        still_open = {(i["source_id"], i["source_version"]) for i in index.quarantine_items("open")}
        assert {s for s, _ in still_open} >= {"мусор.txt", "программа.exe"}
        assert len([1 for s, _ in still_open if s in ("мусор.txt", "программа.exe")]) == 2, still_open
        expired = [i for i in index.quarantine_items("resolved") if i["source_id"] in ("мусор.txt", "программа.exe")]
        assert len(expired) == 6 and all(
            index.quarantine_item(i["item_id"])["decisions"][-1]["action"] == "expired" for i in expired
        )
        # the audit trail keeps ids, reasons and decisions; the expired versions' text is gone from it
        for item in (index.quarantine_item(i["item_id"]) for i in expired):
            assert item["reasons"] and not item["evidence"] and item["chunk"] is None and not item["readings"], item
        stored = index.conn.execute(
            "SELECT count(*) FROM quarantine q WHERE NOT EXISTS (SELECT 1 FROM sources s WHERE "
            "s.source_id = q.source_id AND s.version = q.source_version) AND q.source_version "
            "IS NOT NULL AND q.evidence IS NOT NULL AND q.status != 'open'"
        ).fetchall()[0][0]
        assert stored == 0
    assert planned["quarantine_items_scrubbed"] == report["quarantine_items_scrubbed"] > 0
    again = runner.invoke(app, ["gc", "--older-than", "0", "--json", "--data", str(data)])
    assert json.loads(again.stdout)["versions"] == 0 and json.loads(again.stdout)["files"] == 0
    summary = run_refresh(root, settings)  # nothing changed: nothing read again, nothing lost
    assert summary["changes"] == {"unchanged": 5} and summary["chunks_embedded"] == 0


GC_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from korpus.core.settings import Settings
from tasks.index.retention import collect_garbage
collect_garbage(Settings(data=Path({data!r})), retention_days=0)
"""


@pytest.mark.parametrize("point", ["gc-mid-version:2", "gc-before-files"])
def test_a_gc_killed_midway_leaves_every_version_whole_or_gone(
    models: dict[str, Path], tmp_path: Path, point: str
) -> None:
    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    settings = Settings(data=data, gc_after_refresh=False, meta_documents=False)
    for round_ in range(3):
        for n in range(3):
            (root / f"письмо_{n}.txt").write_text(f"Письмо {n} о поставке угля, редакция {round_}.", encoding="utf-8")
        run_refresh(root, settings)
    time.sleep(1.1)  # past the catalog's whole second: the last round's superseded versions are older than 0 days
    script = GC_SCRIPT.format(root=str(REPO), data=str(data))
    killed = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "KORPUS_CRASH_AT": point}, capture_output=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    with SqliteIndex(settings.index_path) as index:
        for source_id, version in index.conn.execute("SELECT source_id, version FROM sources").fetchall():
            chunks = index.conn.execute(
                "SELECT count(*) FROM chunks WHERE source_id = ? AND source_version = ?", (source_id, version)
            ).fetchall()[0][0]
            assert chunks == 1, (source_id, version, chunks)  # a version is whole while its row is there
        orphans = index.conn.execute(
            "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM sources s "
            "WHERE s.source_id = c.source_id AND s.version = c.source_version)"
        ).fetchall()
        assert orphans[0][0] == 0
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    with SqliteIndex(settings.index_path) as index:
        assert _counts(index)["stale_versions"] == 0 and _counts(index)["chunks"] == 3

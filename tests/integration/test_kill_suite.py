"""The kill suite: a refresh SIGKILLed at each named crash point (tasks/runtime/crash_points.py) — across parse, chunk,
embed, publish (inside and after the transaction that switches the version), the searchable copy, and the
catalog's quarantine and retire updates — then run again. The index must equal a clean run's (the same current
chunk ids and texts, the same open quarantine items), no source may have two current versions, and no page
whose OCR finished before the kill is OCR'd again.

Three points run in `make test`; the whole suite is `slow` (`pytest -m slow tests/integration/test_kill_suite.py`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest

import tasks.ocr.tesseract_engine
from corpora.sample_archive import _scan_pdf
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.runtime.crash_points import POINTS

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
GARBAGE = "npoTOKon Necepa MocKBa OTPH 1031851041431 cocTaB KoMnccnn BbInoJIHeHo"
CRASH = """
import sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from korpus.core.settings import Settings
from flows.corpus_refresh import run_refresh
run_refresh(Path({root!r}), Settings(data=Path({data!r})))
"""
IN_MAKE_TEST = {"after-ocr-page", "publish-mid-transaction", "retire-mid-transaction"}


def _pdf(path: Path, text: str) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_textbox(pymupdf.Rect(50, 50, 545, 792), text, fontsize=11, fontfile=FONT, fontname="dv")
    doc.save(path)


def _state(settings: Settings) -> dict:
    with SqliteIndex(settings.index_path) as index:
        conn = index.conn
        return {
            "chunks": sorted(conn.execute("SELECT chunk_id, text FROM chunks WHERE lifecycle = 'current'").fetchall()),
            "current": sorted(conn.execute("SELECT source_id, version FROM sources WHERE lifecycle = 'current'")),
            "doubles": conn.execute(
                "SELECT source_id FROM sources WHERE lifecycle = 'current' GROUP BY source_id HAVING count(*) > 1"
            ).fetchall(),
            "open": sorted(i["item_id"] for i in index.quarantine_items("open")),
        }


@pytest.fixture(scope="module")
def before(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """Archive A refreshed cleanly (the state every kill starts from), archive B (one file changed, one removed,
    a two-page scan and a garbage text added) and the state a clean refresh of B reaches."""
    base = tmp_path_factory.mktemp("kill")
    root = base / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    _pdf(root / "приказ.pdf", "Приказ № 12 о премировании сотрудников отдела снабжения по итогам квартала.")
    (root / "записка.txt").write_text("Служебная записка о графике отпусков на 2024 год.", encoding="utf-8")
    (root / "старое.txt").write_text("Устаревшее положение о командировках, отменено.", encoding="utf-8")
    data_a = base / "data-a"
    run_refresh(root, Settings(data=data_a))
    _pdf(root / "приказ.pdf", "Приказ № 12 о премировании сотрудников отдела снабжения (в новой редакции).")
    (root / "старое.txt").unlink()
    doc = pymupdf.open(stream=_scan_pdf(["АКТ № 5", "приёмки насосов на склад", "Приняты без замечаний."], seed=1))
    doc.insert_pdf(pymupdf.open(stream=_scan_pdf(["Приложение 1", "Перечень насосов", "Насос НД-1"], seed=2)))
    doc.save(root / "акт.pdf")
    (root / "старый_слой.txt").write_text(GARBAGE, encoding="utf-8")
    clean = base / "data-clean"
    shutil.copytree(data_a, clean)
    run_refresh(root, Settings(data=clean))
    return root, data_a, _state(Settings(data=clean))


def _kill_and_rerun(point: str, before: tuple[Path, Path, dict], tmp_path: Path) -> None:
    root, data_a, clean = before
    data = tmp_path / "data"
    shutil.copytree(data_a, data)
    script = CRASH.format(repo=str(REPO), root=str(root), data=str(data))
    log = tmp_path / "crashed.log"
    with open(log, "w") as out:  # a file, not a pipe: the killed run's Prefect server child may hold a pipe open
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "KORPUS_CRASH_AT": point},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    assert done.returncode == -9, f"{point} was never reached: {log.read_text()[-1500:]}"
    cached = len(list((data / "cache" / "pages").rglob("p*-tesseract-*.json")))
    calls: list[int] = []
    original = tasks.ocr.tesseract_engine.ocr_page_words
    tasks.ocr.tesseract_engine.ocr_page_words = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        run_refresh(root, Settings(data=data))
    finally:
        tasks.ocr.tesseract_engine.ocr_page_words = original
    state = _state(Settings(data=data))
    assert state["doubles"] == [], point
    assert state["current"] == clean["current"], point
    assert state["chunks"] == clean["chunks"], point
    assert state["open"] == clean["open"], point
    assert len(calls) == 2 - cached, (point, len(calls), cached)  # a finished page is never OCR'd again


@pytest.mark.parametrize("point", sorted(IN_MAKE_TEST))
def test_killed_refresh_recovers(point: str, before: tuple[Path, Path, dict], tmp_path: Path) -> None:
    _kill_and_rerun(point, before, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("point", [p for p in POINTS if p not in IN_MAKE_TEST])
def test_killed_refresh_recovers_at_every_point(point: str, before: tuple[Path, Path, dict], tmp_path: Path) -> None:
    _kill_and_rerun(point, before, tmp_path)

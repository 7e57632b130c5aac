"""Transient faults are retried, and a page still failing waits for the next refresh instead of being quarantined.

Faults injected for real: Tesseract killed with SIGKILL (a wrapper on PATH that kills itself before exec'ing the
real `tesseract`), and a local OpenAI-compatible stand-in for the VLM (not a model) that answers 503 with
`Retry-After` and drops connections before answering, the way a restarting vLLM does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pymupdf
import pytest

from corpora.sample_archive import _scan_pdf
from korpus.core.datamodel import ReasonCode
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.parse import ocr_page
from tasks.retrieval.retriever import retrieve

from .chat_stand_in import Script, chat_stand_in
from .test_pdf_cascade import VLM_TEXT, _noise_page_pdf, _source

pytestmark = pytest.mark.integration
FAST = {"retry_backoff": 0.01, "retry_max_delay": 0.05}
LINES = ["ПРОТОКОЛ № 7", "заседания комиссии по приёмке", "Решили: насосы принять.", "Секретарь Орлова Е. В."]

KILLER = """#!/bin/sh
# stands in for tesseract: kills itself with SIGKILL while $KILLS_FILE says "always" or a count above zero
case "$1" in --version|--list-langs) exec {real} "$@";; esac
n=$(cat "$KILLS_FILE" 2>/dev/null || echo 0)
if [ "$n" = always ]; then kill -9 $$; fi
if [ "$n" -gt 0 ]; then echo $((n - 1)) > "$KILLS_FILE"; kill -9 $$; fi
exec {real} "$@"
"""


@pytest.fixture
def killer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `tesseract` first on PATH that dies by SIGKILL as many times as the returned file says."""
    real = shutil.which("tesseract")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tesseract"
    wrapper.write_text(KILLER.format(real=real), encoding="utf-8")
    wrapper.chmod(0o755)
    kills = tmp_path / "kills"
    kills.write_text("0")
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("KILLS_FILE", str(kills))
    return kills


def test_a_killed_tesseract_is_retried(tmp_path: Path, killer: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(_scan_pdf(LINES, seed=2))
    killer.write_text("2")
    outcome = ocr_page(_source(path), 1, Settings(data=tmp_path / "data", **FAST))
    assert killer.read_text().strip() == "0"  # both kills happened
    assert outcome.retries == 2 and not outcome.problems and not outcome.unread
    assert "Решили" in outcome.pages[0].text


def test_a_page_still_failing_after_the_retries_is_unread_not_quarantined(tmp_path: Path, killer: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(_scan_pdf(LINES, seed=2))
    killer.write_text("always")
    outcome = ocr_page(_source(path), 1, Settings(data=tmp_path / "data", retry_attempts=3, **FAST))
    assert outcome.pages == [] and outcome.problems == []
    assert list(outcome.unread) == [1] and "killed by signal 9" in outcome.unread[1] and outcome.retries == 2
    assert not list((tmp_path / "data").rglob("p00001-tesseract-*.json"))  # nothing cached for a failed read


def test_vlm_restarting_is_retried_and_counted(tmp_path: Path) -> None:
    script = Script(content=VLM_TEXT, unavailable=2, drop=1)
    path = _noise_page_pdf(tmp_path / "noise.pdf")
    with chat_stand_in(script) as url:
        outcome = ocr_page(_source(path), 1, Settings(data=tmp_path / "data", vlm_url=url, **FAST))
    assert script.faults == ["503", "503", "drop"] and outcome.retries == 3
    assert outcome.pages[0].tier == 2 and outcome.pages[0].text == VLM_TEXT and not outcome.problems


def test_vlm_down_leaves_the_page_unread_and_a_4xx_is_not_retried(tmp_path: Path) -> None:
    path = _noise_page_pdf(tmp_path / "noise.pdf")
    down = Script(content=VLM_TEXT, unavailable=100)
    with chat_stand_in(down) as url:
        outcome = ocr_page(_source(path), 1, Settings(data=tmp_path / "a", vlm_url=url, retry_attempts=3, **FAST))
    assert outcome.unread and "HTTP 503" in outcome.unread[1] and not outcome.problems and len(down.requests) == 3
    refused = Script(content="bad request", status=400)
    with chat_stand_in(refused) as url:
        outcome = ocr_page(_source(path), 1, Settings(data=tmp_path / "b", vlm_url=url, **FAST))
    assert len(refused.requests) == 1 and not outcome.unread  # a 4xx will not change on retry
    assert outcome.problems[0].reasons == [ReasonCode.ocr_failed] and "HTTP 400" in outcome.problems[0].detail


def _archive(root: Path) -> Path:
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "scan.pdf").write_bytes(_scan_pdf(LINES, seed=4))
    (root / "записка.txt").write_text("Служебная записка о графике отпусков на 2024 год.", encoding="utf-8")
    return root


def test_refresh_holds_a_document_back_until_its_page_reads(tmp_path: Path, killer: Path) -> None:
    from flows.corpus_refresh import run_refresh

    root = _archive(tmp_path / "archive")
    settings = Settings(data=tmp_path / "data", retry_attempts=2, pending_max_refreshes=3, **FAST)
    killer.write_text("always")  # Tesseract dies on every call: the service is down for this whole refresh
    first = run_refresh(root, settings)
    assert first["quarantined"] == 0 and first["pending_sources"] == 1 and first["pending_pages"] == {"scan.pdf": [1]}
    assert first["transient_retries"] >= 1
    with SqliteIndex(settings.index_path) as index:
        assert set(index.indexed_versions()) == {"записка.txt"}  # the other document is not held up
        assert [(p["source_id"], p["page"], p["attempts"]) for p in index.pending_pages()] == [("scan.pdf", 1, 1)]
    killer.write_text("1")  # back up, one more kill in flight: the retry absorbs it
    second = run_refresh(root, settings)
    assert second["quarantined"] == 0 and second["pending_sources"] == 0 and second["transient_retries"] == 1
    assert second["pages_by_tier"] == {"tier 1": 1}
    with SqliteIndex(settings.index_path) as index:
        assert set(index.indexed_versions()) == {"записка.txt", "scan.pdf"} and index.pending_pages() == []
        hits = retrieve(index.searcher, "насосы принять", None, ["public"], k=3, mode="bm25")
    assert hits and hits[0]["source_id"] == "scan.pdf" and hits[0]["page"] == 1


def test_a_page_failing_refresh_after_refresh_is_quarantined_in_the_end(tmp_path: Path, killer: Path) -> None:
    from flows.corpus_refresh import run_refresh

    root = _archive(tmp_path / "archive")
    doc = pymupdf.open(stream=_scan_pdf(LINES, seed=4))
    doc.insert_pdf(pymupdf.open(stream=_scan_pdf(["Приложение 1", "Перечень оборудования"], seed=5)))
    doc.save(root / "scan.pdf")
    settings = Settings(data=tmp_path / "data", retry_attempts=1, pending_max_refreshes=2, **FAST)
    killer.write_text("always")
    assert run_refresh(root, settings)["pending_pages"] == {"scan.pdf": [1, 2]}
    second = run_refresh(root, settings)
    assert second["pending_sources"] == 0 and second["quarantine_reasons"] == {"ocr-failed": 2}
    with SqliteIndex(settings.index_path) as index:
        details = [i["detail"] for i in index.quarantine_items("open") if i["source_id"] == "scan.pdf"]
        assert len(details) == 2 and all(d.startswith("still failing after 2 refreshes") for d in details)
        # the document is read (every page in the quarantine): current with no chunks, nothing pending any more
        assert index.pending_pages() == [] and "scan.pdf" in index.indexed_versions()
    third = run_refresh(root, settings)
    assert third["changes"] == {"unchanged": 2} and third["pending_sources"] == 0

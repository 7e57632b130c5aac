"""The OCR cascade on real Tesseract, the VLM tier against a local OpenAI-compatible stand-in (not a model),
searchable PDFs checked with pdftotext, and a refresh killed with SIGKILL mid-document."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

import tasks.ocr.tesseract_engine
from corpora.sample_archive import _scan_pdf
from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import MAX_RENDER_PIXELS
from tasks.parse import ocr_document, ocr_pdf_page, parse_pdf_text_layers
from tasks.pdf.pages import render_dpi
from tasks.receive import file_sha256

from .chat_stand_in import Script, chat_stand_in

pytestmark = pytest.mark.integration
VLM_TEXT = "АКТ ПРИЁМКИ\nОборудование принято комиссией без замечаний.\nПредседатель комиссии Орлов Д. С."
LINES = ["АКТ № 12", "приёмки оборудования на склад", "Насосы приняты без замечаний.", "Комиссия: Орлов Д. С."]


VLM = Script(content=VLM_TEXT)


@pytest.fixture(scope="module")
def vlm_url() -> str:
    with chat_stand_in(VLM) as url:
        yield url


def _source(path: Path) -> Source:
    return Source(
        source_id=path.name, version=file_sha256(path), path=str(path), kind=SourceKind.pdf, owner="o", access="public"
    )


def _noise_page_pdf(path: Path) -> Path:
    """A page of speckle noise: Tesseract finds no real text on it."""
    rng = np.random.default_rng(3)
    pixels = np.where(rng.random((1100, 850)) < 0.02, 0, 255).astype(np.uint8)
    png = path.with_suffix(".png")
    Image.fromarray(pixels, mode="L").save(png)
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_image(page.rect, filename=str(png))
    doc.save(path)
    return path


def test_tier1_keeps_a_good_scan_with_word_boxes(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(_scan_pdf(LINES, seed=5))
    outcome = ocr_pdf_page(_source(path), 1, Settings(data=tmp_path / "data"))
    page = outcome.pages[0]
    assert page.tier == 1 and page.method == "tesseract" and page.quality > 0.8
    assert "приёмки" in page.text or "приемки" in page.text
    assert page.words and all(0 <= w.x0 < w.x1 <= 595 and 0 <= w.y0 < w.y1 <= 842 for w in page.words)


def test_page_cache_at_an_fsspec_url_serves_a_second_data_directory(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(_scan_pdf(LINES, seed=5))
    url = f"memory://korpus-test-{tmp_path.name}/pages"  # fsspec's in-process store, standing in for s3:// etc.
    first = ocr_pdf_page(_source(path), 1, Settings(data=tmp_path / "one", page_cache_url=url))
    assert first.engine_calls == 1 and not (tmp_path / "one" / "cache").exists()  # nothing written locally
    again = ocr_pdf_page(_source(path), 1, Settings(data=tmp_path / "two", page_cache_url=url))
    assert again.engine_calls == 0 and again.cache_hits == 1 and again.pages[0].text == first.pages[0].text


def test_page_failing_tier1_goes_to_the_vlm_once(tmp_path: Path, vlm_url: str) -> None:
    path = _noise_page_pdf(tmp_path / "noise.pdf")
    settings = Settings(data=tmp_path / "data", vlm_url=vlm_url, vlm_model="stand-in-ocr")
    before = len(VLM.requests)
    outcome = ocr_pdf_page(_source(path), 1, settings)
    page = outcome.pages[0]
    assert (page.tier, page.method, page.engine) == (2, "vlm", "stand-in-ocr")
    assert page.text == VLM_TEXT.strip() and page.quality_reasons  # tier 1's refusal is recorded
    request = VLM.requests[before]
    image = request["messages"][0]["content"][1]["image_url"]["url"]
    assert request["model"] == "stand-in-ocr" and image.startswith("data:image/png;base64,")
    assert base64.b64decode(image.split(",", 1)[1])[:4] == b"\x89PNG"
    assert {w.text for w in page.words} >= {"АКТ", "ПРИЁМКИ", "Орлов"}
    again = ocr_pdf_page(_source(path), 1, settings)
    assert again.vlm_calls == 0 and again.engine_calls == 0 and len(VLM.requests) == before + 1


def test_page_no_tier_can_read_is_quarantined_with_reasons(tmp_path: Path) -> None:
    path = _noise_page_pdf(tmp_path / "noise.pdf")
    outcome = ocr_pdf_page(_source(path), 1, Settings(data=tmp_path / "data"))
    assert outcome.pages == []
    item = outcome.problems[0]
    assert item.reasons[0] in (ReasonCode.page_quality, ReasonCode.empty_text) and item.page == 1
    assert "tier 1" in item.detail and "no VLM configured" in item.detail


def test_searchable_pdf_reads_back_in_russian_and_stays_small(tmp_path: Path) -> None:
    # four scanned pages: the embedded font subset (~16 KB, once per document) is amortised as in a real volume
    doc = pymupdf.open()
    for seed in range(4):
        doc.insert_pdf(pymupdf.open(stream=_scan_pdf(LINES, seed=seed)))
    path = tmp_path / "scan.pdf"
    doc.save(path)
    sha = file_sha256(path)
    out = tmp_path / "out" / "scan.pdf"
    summary = ocr_document(path, out, Settings(data=tmp_path / "data"))
    assert summary["ocr_pages"] == 4 and summary["words"] > 40
    assert summary["size_growth"] <= 0.02
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert "Насосы приняты без замечаний." in text
    assert file_sha256(path) == sha  # the input is never modified
    with pytest.raises(ValueError, match="never writes over its input"):
        ocr_document(path, path, Settings(data=tmp_path / "data"))


def test_a_giant_page_is_rendered_at_a_lower_resolution(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=14_400, height=14_400)  # 200 × 200 inches: 3.6 gigapixels at 300 dpi
    page.insert_text(
        (100, 200), "Протокол", fontsize=120, fontfile="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", fontname="dv"
    )
    path = tmp_path / "giant.pdf"
    doc.save(path)
    with pymupdf.open(path) as opened:
        dpi = render_dpi(opened[0], 300)
    assert dpi < 300 and (14_400 * dpi / 72) ** 2 <= MAX_RENDER_PIXELS * 1.01
    layers = parse_pdf_text_layers(_source(path), Settings(data=tmp_path / "data"))
    assert layers.problems == [] and layers.page_count == 1


KILL_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from korpus.core.settings import Settings
from flows.corpus_refresh import run_refresh
run_refresh(Path({archive!r}), Settings(data=Path({data!r})))
"""


def test_refresh_killed_mid_document_never_redoes_a_finished_page(tmp_path: Path) -> None:
    from flows.corpus_refresh import run_refresh

    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    doc = pymupdf.open()
    for seed in range(8):
        doc.insert_pdf(pymupdf.open(stream=_scan_pdf([*LINES, f"Страница {seed + 1}"], seed=seed)))
    doc.save(archive / "том.pdf")
    data = tmp_path / "data"
    cache = data / "cache" / "pages"
    script = KILL_SCRIPT.format(root=str(Path(__file__).resolve().parents[2]), archive=str(archive), data=str(data))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(list(cache.rglob("p*-tesseract-*.json"))) < 2:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(list(cache.rglob("p*-tesseract-*.json")))
    assert 2 <= finished < 8, finished
    calls = []
    original = tasks.ocr.tesseract_engine.ocr_page_words
    tasks.ocr.tesseract_engine.ocr_page_words = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        summary = run_refresh(archive, Settings(data=data))
    finally:
        tasks.ocr.tesseract_engine.ocr_page_words = original
    assert len(calls) == 8 - finished, (len(calls), finished)
    assert summary["page_cache_hits"] == finished and summary["pages_by_tier"] == {"tier 1": 8}
    assert (data / "searchable" / "том.pdf").is_file()

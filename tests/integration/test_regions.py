"""Every chunk of a page knows where its words are (tasks/text/regions.py), checked on real files after one real
refresh against what the page itself says: PyMuPDF's `search_for` on a born-digital
PDF and on a Word file's converted PDF, and on scans the words a crop of each region reads when Tesseract is run
on it alone — so a region of a photo taken sideways must land on the upright words of the photo as stored."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from typer.testing import CliRunner

from korpus.apps.cli import app
from korpus.core.datamodel import META_PREFIX, Source, SourceKind
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.readers.registry import reader_for
from tasks.retrieval.retriever import retrieve
from tasks.text.quality import word_f1

pytestmark = pytest.mark.integration
_WORD = re.compile(r"[^\s|]+")


def _cited(settings: Settings, source_id: str) -> list[tuple[dict, str]]:
    with SqliteIndex(settings.index_path) as index:
        rows = index.source_chunks(source_id)
        return [(index.searcher.cited(row["chunk_id"], ["public"]), row["body"]) for row in rows]


def _misses(pdf: Path, cited: list[tuple[dict, str]]) -> list[str]:
    """Of each chunk's first and last five words, those `search_for` finds on the page but none inside a region."""
    missed = []
    with pymupdf.open(pdf) as doc:
        for found, body in cited:
            page = doc[found["page"] - 1]
            boxes = [pymupdf.Rect(r["x0"], r["y0"], r["x1"], r["y1"]) for r in found["regions"]]
            words = _WORD.findall(body)
            for word in {*words[:5], *words[-5:]}:
                hits = page.search_for(word)
                if hits and not any(abs(h & b) >= 0.8 * abs(h) for h in hits for b in boxes):
                    missed.append(f"{found['chunk_id']} p{found['page']} {word!r}")
    return missed


@pytest.mark.parametrize(
    "source_id",
    ["digital/alpaca_tz.pdf", "digital/gost_multipage_table_2.pdf", "digital/short_lines.pdf", "office/alpaca_tz.docx"],
)
def test_born_digital_regions_hold_the_words_pymupdf_finds(real_refreshed: tuple, source_id: str) -> None:
    root, settings, _summary = real_refreshed
    cited = _cited(settings, source_id)
    assert cited and all(found["regions"] for found, _ in cited)
    pdf = root / source_id
    if source_id.endswith(".docx"):  # regions are on the PDF LibreOffice made of it
        version = cited[0][0]["source_version"]
        pdf = settings.converted_dir / version[:2] / f"{version}.pdf"
    assert _misses(pdf, cited) == []
    for found, _ in cited:
        page_area = found["regions"][0]["width"] * found["regions"][0]["height"]
        covered = sum((r["x1"] - r["x0"]) * (r["y1"] - r["y0"]) for r in found["regions"])
        assert 0 < covered < 0.9 * page_area and not any(r["whole_page"] for r in found["regions"])


def _crop_reads(source: Source, settings: Settings, region: dict, rotation: int) -> str:
    """Tesseract on the region cut out of the page image as stored (turned upright the way korpus turned it)."""
    image = reader_for(SourceKind.image).page_image(source, region["page"], settings)(300, "png")
    with Image.open(io.BytesIO(image.data)) as page:
        scale = page.width / image.width_pt
        box = (region["x0"] * scale - 4, region["y0"] * scale - 4, region["x1"] * scale + 4, region["y1"] * scale + 4)
        crop = page.convert("L").crop(tuple(round(v) for v in box)).rotate(-rotation, expand=True)
        out = io.BytesIO()
        crop.save(out, "PNG")
    done = subprocess.run(
        ["tesseract", "-", "-", "-l", "rus", "--psm", "7"], input=out.getvalue(), capture_output=True, check=True
    )
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize("source_id", ["scans/law_image.png", "scans/orient_3.png"])
def test_scan_regions_land_on_the_words_of_the_page_as_stored(real_refreshed: tuple, source_id: str) -> None:
    _root, settings, _summary = real_refreshed
    with SqliteIndex(settings.index_path) as index:
        source, pages = index.current_source(source_id)
    rotation = pages[0].rotation
    assert rotation == (90 if "orient" in source_id else 0)
    assert pages[0].size is not None and pages[0].boxes
    checked = 0
    for found, body in _cited(settings, source_id):
        lines = [line for line in body.split("\n") if line.strip()]  # OCR text: a line of the body per line read
        assert len(lines) == len(found["regions"])
        for line, region in list(zip(lines, found["regions"], strict=True))[:4]:
            if len(_WORD.findall(line)) < 3:
                continue  # a short line: too few words for a fair reading of the crop
            read = _crop_reads(source, settings, region, rotation)
            assert word_f1(read, line) >= 0.6, (line, read)
            checked += 1
    assert checked >= 3


def test_search_exact_and_cite_give_the_regions(real_refreshed: tuple, tmp_path: Path) -> None:
    _root, settings, _summary = real_refreshed
    with SqliteIndex(settings.index_path) as index:
        hits = retrieve(index.searcher, "альпака техническое задание", None, ["public"], k=5, mode="bm25")
        exact = index.searcher.exact_occurrences("техническое задание", ["public"])
    assert hits and all(h["regions"] for h in hits if h["page"] is not None)
    without = {o["source_id"] for o in exact["occurrences"] if not o["regions"]}
    assert len(exact["occurrences"]) >= 3 and all(s.startswith(META_PREFIX) for s in without)  # no page: a meta doc
    hit = next(h for h in hits if h["source_id"].endswith(".pdf"))
    out = tmp_path / "hit.png"
    args = ["cite", hit["chunk_id"], "--png", str(out), "--json", "--data", str(settings.data)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert '"regions"' in result.output
    with Image.open(out) as png:
        pixels = png.convert("RGB")
        scale = pixels.width / hit["regions"][0]["width"]
        r = hit["regions"][0]
        inside = pixels.getpixel((round((r["x0"] + r["x1"]) / 2 * scale), round((r["y0"] + 1) * scale)))
        outside = pixels.getpixel((3, 3))
    assert inside[2] < 200 <= inside[0] and outside == (255, 255, 255)  # yellow over the words, white margin
    denied = CliRunner().invoke(app, ["cite", hit["chunk_id"], "--scopes", "hr", "--data", str(settings.data)])
    assert denied.exit_code != 0 and "no current chunk" in denied.output


@pytest.mark.parametrize("source_id", ["scans/law_image.png", "scans/orient_3.png", "broken-layer/ukodeksrf.pdf"])
def test_a_searchable_copy_names_each_chunk_at_its_first_word(real_refreshed: tuple, source_id: str) -> None:
    """`copy.pdf#nameddest=<chunk id>` opens where the chunk starts: at Tesseract's own box of the chunk's first
    word on the copy's page — for a photo taken sideways too, whose copy holds the page turned upright."""
    _root, settings, _summary = real_refreshed
    copy = settings.data / "searchable" / (source_id + (".pdf" if source_id.endswith(".png") else ""))
    cited = _cited(settings, source_id)
    with SqliteIndex(settings.index_path) as index:
        _source, pages = index.current_source(source_id)
    read = {p.page: p.words for p in pages}  # as OCR read them: on the upright page
    assert cited and copy.is_file()
    with pymupdf.open(copy) as doc:
        for found, body in cited:
            page, x, y = doc.resolve_link(f"#nameddest={found['chunk_id']}")
            assert page == found["page"] - 1
            first = _WORD.findall(body)[0]
            boxes = [(w.x0, w.y0) for w in read[found["page"]] if w.text == first]
            assert min(abs(bx - x) + abs(by - y) for bx, by in boxes) < 12, (first, boxes[:3], x, y)


def test_a_djvu_pages_hidden_text_gives_its_word_boxes(tmp_path: Path) -> None:
    """A DjVu page's own hidden text (djvused set-txt on a copy of the real fixture) keeps its zones' boxes: DjVu
    counts pixels from the bottom-left at the page's resolution, regions are points from the top-left."""
    from korpus.core.datamodel import Source
    from tasks.contract.chunking import build_chunks
    from tasks.readers.djvu import DjvuReader, page_dpi

    djvu = tmp_path / "тз.djvu"
    shutil.copyfile(
        Path(__file__).resolve().parents[1] / "fixtures" / "real-archive" / "scans" / "example_with_table7.djvu", djvu
    )
    _w, height, dpi = page_dpi(str(djvu), 1)
    zones = (
        f'(page 0 0 2480 {height} (line 100 3300 1200 3400 (word 100 3300 600 3400 "Техническое") '
        '(word 650 3300 1200 3400 "задание")) (line 100 3100 900 3200 (word 100 3100 500 3200 "на") '
        '(word 550 3100 900 3200 "поставку")))'
    )
    (tmp_path / "zones.sexp").write_text(zones, encoding="utf-8")
    subprocess.run(
        ["djvused", str(djvu), "-e", f"select 1; remove-txt; set-txt {tmp_path / 'zones.sexp'}; save"],
        check=True,
        capture_output=True,
    )
    source = Source(source_id="тз.djvu", version="v" * 64, path=str(djvu), kind="djvu", owner="o", access="public")
    outcome = DjvuReader().read(source, Settings(data=tmp_path / "data"))
    page = next(p for p in outcome.pages if p.page == 1)
    assert page.method == "text-layer" and "Техническое задание" in page.text
    chunks, _ = build_chunks(source, [page])
    s = 72 / dpi
    lines = {(r.x0, r.y0, r.x1, r.y1) for c in chunks for r in c.regions}
    expected = {
        (100 * s, (height - 3400) * s, 1200 * s, (height - 3300) * s),
        (100 * s, (height - 3200) * s, 900 * s, (height - 3100) * s),
    }
    assert {tuple(round(v, 1) for v in box) for box in lines} == {tuple(round(v, 1) for v in b) for b in expected}

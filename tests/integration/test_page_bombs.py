"""Page bombs stay small (#46 item 2), in the real flow beside good files: a PDF page of 200 × 200 inches, a PDF
page holding one 30,000 × 30,000-pixel image, a 5,000-page PDF of blank pages, a DjVu page of 30,000 × 30,000
pixels, a PNG and a JPEG of 30,000 × 30,000. Each render is capped in pixels (MAX_RENDER_PIXELS, and
MAX_RENDER_SIDE for Tesseract); a frame that would decode past MAX_DECODE_BYTES is its page's item; blank pages are
not OCR'd one by one into 5,000 items — the file is one item. The peak memory of such a refresh against one without
the bombs is measured by benchmarks/page_bombs.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.ocr.engine import MAX_RENDER_PIXELS, MAX_RENDER_SIDE, fit_dpi

pytestmark = pytest.mark.integration
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
SIDE = 30_000


def page_bombs(folder: Path) -> None:
    """The bombs, each a few kilobytes to a few megabytes on disk (also used by benchmarks/page_bombs.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    with pymupdf.open() as doc:  # 200 × 200 inches: 3.6 gigapixels at 300 dpi, text drawn in the middle
        page = doc.new_page(width=14_400, height=14_400)
        page.insert_text((2_000, 7_000), "Акт приёмки насосов", fontsize=600, fontfile=FONT, fontname="dv")
        doc.save(folder / "огромная_страница.pdf")
    blank = Image.new("L", (SIDE, SIDE), 255)
    blank.save(folder / "огромный_скан.png", optimize=True)
    Image.new("L", (SIDE, SIDE), 255).save(folder / "огромное_фото.jpg", quality=30)
    with pymupdf.open() as doc:  # the PNG as one page's only image
        page = doc.new_page(width=7_200, height=7_200)
        page.insert_image(page.rect, filename=folder / "огромный_скан.png")
        doc.save(folder / "огромная_картинка.pdf", deflate=True)
    with pymupdf.open() as doc:
        for _ in range(5_000):
            doc.new_page()
        doc.save(folder / "пустые_5000.pdf")
    blank.convert("1").save(folder / "huge.pbm")
    subprocess.run(["cjb2", "-dpi", "300", str(folder / "huge.pbm"), str(folder / "огромная.djvu")], check=True)
    (folder / "huge.pbm").unlink()


@pytest.mark.parametrize(("width", "height"), [(8.27, 11.69), (200, 200), (200, 0.5), (0.5, 400), (3_000, 3_000)])
def test_a_render_fits_the_pixel_and_side_limits(width: float, height: float) -> None:
    dpi = fit_dpi(width, height, 300)
    assert width * dpi * height * dpi <= MAX_RENDER_PIXELS and max(width, height) * dpi <= MAX_RENDER_SIDE
    assert dpi == 300 or (width, height) != (8.27, 11.69)


def test_page_bombs_beside_good_files(models: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "archive"
    page_bombs(root)
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "письмо.txt").write_text("Письмо о поставке труб на склад.\n", encoding="utf-8")
    with pymupdf.open() as doc:  # a document with a blank back side: the blank page is no item
        doc.new_page().insert_text((72, 100), "Протокол заседания комиссии", fontfile=FONT, fontname="dv")
        doc.new_page()
        doc.save(root / "с_пустой_страницей.pdf")
    settings = Settings(data=tmp_path / "data", meta_documents=False)

    summary = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        served = {s["source_id"]: s for s in index.sources() if s["lifecycle"] == "current"}
        items = {(i["source_id"], i["page"]): i for i in index.quarantine_items("open")}
        texts = {s: " ".join(c["text"] for c in index.source_chunks(s)) for s in served}
    assert {"письмо.txt", "с_пустой_страницей.pdf", "огромная_страница.pdf"} <= set(served), (
        summary,
        {k: (i["reasons"], i["detail"]) for k, i in items.items()},
    )
    assert not [key for key in items if key[0] == "с_пустой_страницей.pdf"]
    assert "приёмки" in texts["огромная_страница.pdf"]  # OCR'd at the lower resolution, or the layer kept
    png = items[("огромный_скан.png", 1)]
    assert png["reasons"] == ["ocr-failed"] and "30000 × 30000" in png["detail"] and "MiB" in png["detail"]
    blank = items[("пустые_5000.pdf", None)]
    assert blank["reasons"] == ["empty-text"] and "5000 pages" in blank["detail"]
    assert len([k for k in items if k[0] == "пустые_5000.pdf"]) == 1
    for name in ("огромное_фото.jpg", "огромная_картинка.pdf", "огромная.djvu"):  # blank, read at a lower resolution
        assert [i["reasons"] for k, i in items.items() if k[0] == name] == [["empty-text"]], (name, items)

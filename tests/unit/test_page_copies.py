"""The searchable copy of a page image is never worse than the source (#65 item 5), as a property over images in
every orientation korpus meets — a JPEG photo's EXIF turn, OCR's own turn, both — and every colour mode:

- a JPEG goes in by its own bytes (the copy's image stream is the file, byte for byte), any other image — and a
  mirrored photo, whose pixels must be transposed — by its pixels losslessly (decoded back equal);
- the page shows upright (its /Rotate), at the source's size, and its invisible text, read back by pdftotext, is
  the words OCR placed, line by line, where OCR found them (pdftotext's boxes on the upright page);
- only KORPUS_PDF_OPTIMIZE 2 or 3 re-encodes, and only where that is smaller.
"""

from __future__ import annotations

import re
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pikepdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from korpus.core.datamodel import PageResult, PageWord
from tasks.pdf.searchable import PageFrame, write_searchable_images
from tasks.readers.image import EXIF_TURNS, copy_frame

pytestmark = pytest.mark.unit
LINES = [["Акт", "приёмки", "задвижек"], ["Принято", "без", "замечаний"]]
DPI = 150


def _image(mode: str, size: tuple[int, int], seed: int) -> Image.Image:
    noise = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(noise, "RGB").convert(mode)


def _source(tmp: Path, fmt: str, mode: str, orientation: int, seed: int) -> Path:
    stored = _image(mode, (480, 320), seed)
    path = tmp / f"page-{fmt}-{mode}-{orientation}.{fmt.lower()}"
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored.save(path, fmt, dpi=(DPI, DPI), exif=exif.tobytes(), **({"quality": 90} if fmt == "JPEG" else {}))
    return path


def _words(upright: tuple[float, float]) -> list[PageWord]:
    """OCR's words on the upright page (points, top-left origin): two lines near its top left."""
    words = []
    for line, texts in enumerate(LINES):
        x = 10.0
        for text in texts:
            width = 6.0 * len(text)
            words.append(PageWord(text=text, x0=x, y0=12.0 + 20 * line, x1=x + width, y1=22.0 + 20 * line, line=line))
            x += width + 5
    assert max(w.x1 for w in words) < upright[0] and max(w.y1 for w in words) < upright[1]
    return words


def _only_image(pdf: pikepdf.Pdf) -> pikepdf.Stream:
    (image,) = [o for o in pdf.objects if isinstance(o, pikepdf.Stream) and o.get("/Subtype") == "/Image"]
    return image


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(["JPEG", "PNG"]),
    mode=st.sampled_from(["L", "RGB"]),
    orientation=st.sampled_from([1, 2, 3, 5, 6, 8]),  # 2 and 5 mirror the image
    ocr_turn=st.sampled_from([0, 90, 180, 270]),
    seed=st.integers(0, 3),
)
def test_a_page_copy_holds_the_source_image_upright_with_the_words_where_ocr_found_them(
    tmp_path: Path, fmt: str, mode: str, orientation: int, ocr_turn: int, seed: int
) -> None:
    source = _source(tmp_path, fmt, mode, orientation, seed)
    frame = copy_frame(str(source), 1)
    mirrored = orientation not in EXIF_TURNS
    total = (EXIF_TURNS.get(orientation, 0) + ocr_turn) % 360
    width, height = frame.width * 72 / DPI, frame.height * 72 / DPI
    upright = (width, height) if total in (0, 180) else (height, width)
    words = _words(upright)
    page = PageResult(source_id="s", source_version="v", page=1, text="", method="tesseract", words=words)
    page.rotation = ocr_turn
    out = tmp_path / f"{source.name}-{ocr_turn}.pdf"
    summary = write_searchable_images(lambda _n: frame, [page], out, source.stat().st_size, "2b")
    assert summary["words"] == 6 and summary["pdfa"] == "2b"

    with pikepdf.open(out) as pdf:
        assert int(pdf.pages[0].obj.get("/Rotate", 0)) == total
        image = _only_image(pdf)
        if fmt == "JPEG" and not mirrored:  # the file itself (deflated on top where that saves: the same bytes)
            raw = image.read_raw_bytes()
            inner = zlib.decompress(raw) if image.get("/Filter") != "/DCTDecode" else raw
            assert inner == source.read_bytes()
        else:  # lossless: the pixels as the source holds them (a mirrored one's transposed upright)
            copied = pikepdf.PdfImage(image).as_pil_image()
            with Image.open(source) as original:
                expected = ImageOps.exif_transpose(original) if mirrored else original
                assert copied.mode == expected.mode and copied.tobytes() == expected.tobytes()
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert [re.findall(r"\w+", line) for line in text.splitlines() if line.strip()] == LINES
    boxes = subprocess.run(["pdftotext", "-bbox", str(out), "-"], capture_output=True, text=True, check=True).stdout
    first = re.search(r'<word xMin="([\d.]+)" yMin="([\d.]+)"[^>]*>Акт<', boxes)
    assert first is not None and abs(float(first[1]) - 10) < 2 and abs(float(first[2]) - 12) < 4, first


def test_only_the_lossy_levels_re_encode_and_only_where_smaller(tmp_path: Path) -> None:
    photo = _source(tmp_path, "PNG", "RGB", 1, 0)
    frame = copy_frame(str(photo), 1)
    page = PageResult(source_id="s", source_version="v", page=1, text="", method="tesseract", words=[])
    sizes = {}
    for level in (0, 1, 2, 3):
        out = tmp_path / f"copy-{level}.pdf"
        write_searchable_images(lambda _n: frame, [page], out, photo.stat().st_size, "2b", optimize=level)
        with pikepdf.open(out) as pdf:
            image = _only_image(pdf)
            sizes[level] = len(image.read_raw_bytes())
            assert (image.get("/Filter") == "/DCTDecode") == (level >= 2), level
    assert sizes[3] < sizes[2] < sizes[1]
    # a page whose JPEG would be bigger than its lossless form keeps the lossless one at every level
    flat = PageFrame(200, 100, DPI, image=Image.new("L", (200, 100), 255))
    out = tmp_path / "flat.pdf"
    write_searchable_images(lambda _n: flat, [page], out, 1000, "2b", optimize=3)
    with pikepdf.open(out) as pdf:
        assert _only_image(pdf).get("/Filter") != "/DCTDecode"

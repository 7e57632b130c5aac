"""PARSE for PDFs, tier 0: per page, keep a text layer the detector trusts, or send the page to OCR.

A text layer is scored by tasks/text/quality.py with the page's facts (image coverage, invisible text), so a scan
whose old OCR layer reads «npoTOKon Necepa» is OCR'd again instead of indexed. Structure (tasks/text/structure.py)
comes with every kept page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from korpus.core.datamodel import Unit
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImage, fit_dpi
from tasks.readers.base import UnreadableSourceError
from tasks.text.quality import PageFacts, TextLayerQuality, text_layer_quality
from tasks.text.regions import Box, page_boxes
from tasks.text.structure import pdf_page_structure


class UnreadablePdfError(UnreadableSourceError):
    """The file cannot be opened as a PDF (corrupt, encrypted, not a PDF)."""


def page_facts(page: pymupdf.Page) -> PageFacts:
    """Image coverage and the share of invisibly drawn characters (render mode 3: an earlier OCR layer)."""
    area = abs(page.rect) or 1.0
    covered = 0.0
    for info in page.get_image_info():
        box = pymupdf.Rect(info["bbox"]) & page.rect
        covered += abs(box) if box.is_valid else 0.0
    total = invisible = 0
    for span in page.get_texttrace():
        n = len(span["chars"])
        total += n
        if span["type"] == 3:
            invisible += n
    return PageFacts(image_coverage=min(1.0, covered / area), invisible_share=invisible / total if total else 0.0)


@dataclass
class PdfPageText:
    page: int
    text: str
    """The text layer rebuilt from its blocks (tables as `a | b` rows), whether trusted or not."""
    quality: TextLayerQuality
    """The detector's verdict on the layer as the PDF holds it (PyMuPDF's plain text, not the rebuilt one)."""
    units: list[Unit] = field(default_factory=list)
    size: tuple[float, float] | None = None
    boxes: str = ""
    """The layer's words placed on `text` (tasks/text/regions.py)."""
    blank: bool = False
    """Nothing is drawn on the page (no text, image, path or annotation): there is nothing to OCR."""


def open_pdf(path: str) -> pymupdf.Document:
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # PyMuPDF raises several types for broken input
        raise UnreadablePdfError(f"cannot open as PDF: {exc}") from exc
    if doc.needs_pass:
        doc.close()
        raise UnreadablePdfError("the PDF is password-protected")
    if doc.page_count == 0:
        doc.close()
        raise UnreadablePdfError("the PDF has no pages")
    return doc


def read_text_layers(path: str, settings: Settings) -> list[PdfPageText]:
    """One entry per page: its text layer, structure, and the detector's verdict on it."""
    pages = []
    with open_pdf(path) as doc:
        for number in range(1, doc.page_count + 1):
            try:
                page = doc.load_page(number - 1)
            except Exception as exc:  # a damaged page tree (found by fuzzing): the file cannot be trusted
                raise UnreadablePdfError(f"page {number} cannot be loaded (a damaged page tree): {exc}") from exc
            text, units = pdf_page_structure(page)
            plain, facts = page.get_text(), page_facts(page)
            quality = text_layer_quality(plain, settings, facts)
            size = (page.rect.width, page.rect.height)
            blank = not plain.strip() and not facts.image_coverage and page.first_annot is None
            blank = blank and not page.get_bboxlog()  # nothing drawn at all (asked only of a page without text)
            pages.append(PdfPageText(number, text, quality, units, size, layer_boxes(page, text), blank))
    return pages


def layer_boxes(page: pymupdf.Page, text: str) -> str:
    """The text layer's words (PyMuPDF, page coordinates in points) aligned with the page text built from it."""
    words = [Box(w[4], w[0], w[1], w[2], w[3], w[5] * 1000 + w[6]) for w in page.get_text("words")]
    return page_boxes(text, words)


def render_dpi(page: pymupdf.Page, dpi: int) -> int:
    """`dpi`, lowered for a page so large that its pixmap would pass MAX_RENDER_PIXELS or MAX_RENDER_SIDE."""
    return fit_dpi(page.rect.width / 72, page.rect.height / 72, dpi)


def render_page(path: str, page: int, dpi: int, fmt: str = "png") -> tuple[bytes, int]:
    """The page as a greyscale image, and the resolution it was rendered at (≤ `dpi`).

    `fmt="pnm"` for Tesseract: compressing a 300-dpi page to PNG takes longer (~0.6 s) than recognising it.
    """
    image = pdf_page_image(path, page, dpi, fmt)
    return image.data, image.dpi


def pdf_page_image(path: str, page: int, dpi: int, fmt: str, hidden: re.Pattern[str] | None = None) -> PageImage:
    """The page as a greyscale image for an OCR engine, with its resolution (≤ `dpi`) and size in points; text that
    `hidden` matches in the page's layer is painted over in white first (in memory: the file is not changed)."""
    with open_pdf(path) as doc:
        target = doc[page - 1]
        for match in hidden.finditer(target.get_text()) if hidden else ():
            for rect in target.search_for(match.group(0)):
                target.draw_rect(rect, color=(1, 1, 1), fill=(1, 1, 1))
        used = render_dpi(target, dpi)
        pix = target.get_pixmap(dpi=used, colorspace=pymupdf.csGRAY, alpha=False)
        return PageImage(pix.tobytes(fmt), used, target.rect.width, target.rect.height)


def save_page_image(path: str, page: int, out: Path, dpi: int = 100) -> Path | None:
    """A preview of a quarantined page for the reviewer; None if the PDF cannot be rendered."""
    try:
        png, _ = render_page(path, page, dpi)
    except (UnreadablePdfError, IndexError):
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return out

"""PARSE for PDFs: per page, keep a trustworthy text layer or send the page to OCR.

This is the foundation's decision; the full quality-gated cascade (VLM tier, structure) is its own work. A text
layer is trusted when it has enough characters and is mostly Cyrillic with few mixed-script words, so a scan whose
old OCR layer reads «npoTOKon Necepa» is OCR'd again instead of indexed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from korpus.datamodel import Unit
from korpus.settings import Settings
from tasks.structure import pdf_page_structure

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_LATIN = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)


class UnreadablePdfError(RuntimeError):
    """The file cannot be opened as a PDF (corrupt, encrypted, not a PDF)."""


@dataclass
class TextLayerQuality:
    ok: bool
    cyrillic_share: float
    mixed_script_share: float
    reasons: list[str] = field(default_factory=list)


def text_layer_quality(text: str, settings: Settings) -> TextLayerQuality:
    """Score an existing text layer: too short, not Cyrillic enough, or full of mixed-script words → not ok."""
    letters = _LETTER.findall(text)
    cyrillic = sum(1 for ch in letters if _CYRILLIC.match(ch))
    share = cyrillic / len(letters) if letters else 0.0
    word_list = _WORD.findall(text)
    mixed = sum(1 for w in word_list if _CYRILLIC.search(w) and _LATIN.search(w))
    mixed_share = mixed / len(word_list) if word_list else 0.0
    reasons = []
    if len(text.strip()) < settings.text_layer_min_chars:
        reasons.append("too-little-text")
    elif share < settings.text_layer_min_cyrillic:
        reasons.append("low-cyrillic-share")
    if mixed_share > 0.1:
        reasons.append("mixed-script-words")
    return TextLayerQuality(not reasons, round(share, 3), round(mixed_share, 3), reasons)


@dataclass
class PdfPageText:
    page: int
    text: str | None
    """The trusted text layer (rebuilt from its blocks), or None when the page must be OCR'd."""
    quality: TextLayerQuality
    units: list[Unit] = field(default_factory=list)


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
    """One entry per page: its text layer if it passes the quality check, else None (needs OCR)."""
    pages = []
    with open_pdf(path) as doc:
        for number, page in enumerate(doc, start=1):
            text, units = pdf_page_structure(page)
            quality = text_layer_quality(text, settings)
            pages.append(PdfPageText(page=number, text=text if quality.ok else None, quality=quality, units=units))
    return pages


def render_page(path: str, page: int, dpi: int) -> bytes:
    """The page as a greyscale PNG at `dpi`, for OCR."""
    with open_pdf(path) as doc:
        pix = doc[page - 1].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
        return pix.tobytes("png")


def save_page_image(path: str, page: int, out: Path, dpi: int = 100) -> Path | None:
    """A preview of a quarantined page for the reviewer; None if the PDF cannot be rendered."""
    try:
        png = render_page(path, page, dpi)
    except (UnreadablePdfError, IndexError):
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return out

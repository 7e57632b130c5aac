"""Searchable PDFs: the original pages untouched, an invisible text layer with the OCR words at their boxes.

Written with PyMuPDF (docs/ocr.md says why not ocrmypdf's renderer): each word is inserted with render mode 3
(invisible) and scaled horizontally to its box, in korpus's outline-free invisible font (tasks/pdf/invisible_font.py)
subset once per document at the end (~1 KB). Pages that kept their own text layer are copied as they are. Output goes to
`<data>/searchable/<source path>` — never over the source — as PDF/A-2b unless `KORPUS_PDFA` says otherwise
(tasks/pdf/pdfa.py).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import pymupdf
from PIL import Image

from korpus.core.datamodel import PageResult, PageWord
from tasks.pdf.invisible_font import invisible_font
from tasks.pdf.pdfa import declared_pdfa, kept_level, make_pdfa
from tasks.text.unicode_repair import (
    MIN_COVERAGE,
    Votes,
    collect_votes,
    coverage,
    learned_map,
    set_to_unicode,
    to_unicode_cmap,
)


def save_atomically(doc: pymupdf.Document, out: Path, pdfa: str = "2b") -> dict[str, str | None]:
    """Subset the fonts, write `out` under a temporary name first — finished as PDF/A of flavour `pdfa` ('off':
    plain PDF) — so a kill never leaves half a PDF. {"pdfa": the flavour written or None, "pdfa_refused": why a
    copy asked for PDF/A is plain}."""
    doc.subset_fonts()
    tmp = out.with_suffix(f".{os.getpid()}.part")
    doc.save(tmp, garbage=3, deflate=True)
    refused = make_pdfa(tmp, pdfa) if pdfa != "off" else None
    tmp.replace(out)
    written = None if pdfa == "off" or refused else pdfa
    return {"pdfa": written} | ({"pdfa_refused": refused} if refused else {})


def add_text_layer(page: pymupdf.Page, words: list[PageWord], font: pymupdf.Font) -> int:
    """Invisible text on one page, line by line at the OCR line boxes; returns the words placed.

    A line is written as one string from its left edge on its baseline, sized to the line's height and shrunk
    to the line's width if need be: text extractors (pdftotext, a viewer's search) read it back as a line, and a
    selection covers about the right place on the scan.
    """
    lines: dict[int, list[PageWord]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    writer = pymupdf.TextWriter(page.rect)
    placed = 0
    for line_words in lines.values():
        line_words.sort(key=lambda w: w.x0)
        text = " ".join(w.text for w in line_words)
        left, right = line_words[0].x0, max(w.x1 for w in line_words)
        top, bottom = min(w.y0 for w in line_words), max(w.y1 for w in line_words)
        height = max(1.0, bottom - top)
        size = height * 0.85
        natural = font.text_length(text, fontsize=size)
        if natural > right - left > 0:
            size *= (right - left) / natural
        writer.append((left, bottom - height * 0.2), text, font=font, fontsize=size)
        placed += len(line_words)
    if placed:
        writer.write_text(page, render_mode=3)
    return placed


def remove_old_text(
    doc: pymupdf.Document,
    page: pymupdf.Page,
    kept_fonts: set[int],
    learned: dict[int, str],
    shared: dict[bytes, int],
) -> str:
    """Take the text a replaced layer held out of the copy, so search, copy-paste and pdftotext read only
    trusted text (as `ocrmypdf --redo-ocr` does for old OCR).

    An invisible layer (an earlier OCR over a scan) is removed outright; the scan stays. Visible glyphs drawn with a
    font that has no Unicode map («M]heh\\guc») must stay visible: their one-byte fonts get a ToUnicode map —
    learned from the OCR where it could be (tasks/text/unicode_repair.py), every other code read as a space. Fonts that
    also serve a kept page, and two-byte (Type0) fonts, are left alone.
    """
    trace = page.get_texttrace()
    if trace and all(span["type"] == 3 for span in trace):
        page.add_redact_annot(page.rect)
        page.apply_redactions(
            images=pymupdf.PDF_REDACT_IMAGE_NONE,
            graphics=pymupdf.PDF_REDACT_LINE_ART_NONE,
            text=pymupdf.PDF_REDACT_TEXT_REMOVE,
        )
        return "removed-invisible"
    outcome = "remapped-fonts"
    for xref, _ext, font_type, *_rest in page.get_fonts(full=True):
        if xref in kept_fonts or font_type == "Type0":
            outcome = "kept-shared" if xref in kept_fonts else "type0-left"
            continue
        set_to_unicode(doc, xref, to_unicode_cmap(learned), shared)
    return outcome


def write_searchable_pdf(source_pdf: str, pages: list[PageResult], out: Path, pdfa: str = "2b") -> dict[str, float]:
    """Copy `source_pdf` to `out` with invisible OCR text on every page that has words; pages whose layer was
    replaced lose their old text first. The source's document information (title, author, dates) stays. Atomic
    write, as PDF/A of flavour `pdfa` ('off': plain PDF) — or of the source's own PDF/A level when that is higher."""
    by_page = {p.page: p for p in pages if p.words}
    font = invisible_font()
    out.parent.mkdir(parents=True, exist_ok=True)
    placed = 0
    pdfa = kept_level(declared_pdfa(source_pdf), pdfa)  # a PDF/A source keeps its level or better
    with pymupdf.open(source_pdf) as doc:
        replaced = {p.page for p in pages if p.layer_check and p.layer_check.decision == "ocr-replaced-layer"}
        replaced |= {p.page for p in pages if (p.tier or 0) >= 1 and p.quality_reasons}
        kept_fonts = {f[0] for n, page in enumerate(doc, start=1) if n not in replaced for f in page.get_fonts()}
        votes: Votes = {}
        for number in sorted(replaced & set(by_page)):
            collect_votes(doc[number - 1], by_page[number].words, votes)
        learned, shared = learned_map(votes), {}
        repaired = {n for n in replaced if coverage(doc[n - 1], learned) >= MIN_COVERAGE}
        for number, page in enumerate(doc, start=1):
            if number in replaced:
                remove_old_text(doc, page, kept_fonts, learned, shared)
            result = by_page.get(number)
            if result is not None and result.rotation in (0, None) and number not in repaired:
                placed += add_text_layer(page, result.words, font)
        archival = save_atomically(doc, out, pdfa)
    before, after = Path(source_pdf).stat().st_size, out.stat().st_size
    return {
        "pages_with_text": len(by_page),
        "words": placed,
        "pages_repaired_in_place": len(repaired),
        "size_growth": round(after / before - 1, 4),
        "path": str(out),
    } | archival


def write_searchable_images(
    frame: Callable[[int], Image.Image], pages: list[PageResult], out: Path, original_size: int, pdfa: str = "2b"
) -> dict[str, float]:
    """A searchable PDF of page images: each page upright (turned as OCR found it), greyscale JPEG at its own
    resolution, with the invisible OCR layer. Atomic write, as PDF/A of flavour `pdfa` ('off': plain PDF)."""
    font = invisible_font()
    out.parent.mkdir(parents=True, exist_ok=True)
    placed = 0
    with pymupdf.open() as doc:
        for result in sorted((p for p in pages if p.page), key=lambda p: p.page or 0):
            image = frame(result.page or 1)
            dpi = image.info["dpi"][0]
            upright = image.rotate(-result.rotation, expand=True) if result.rotation else image
            buffer = io.BytesIO()
            upright.save(buffer, "JPEG", quality=70, optimize=True)
            page = doc.new_page(width=upright.width * 72 / dpi, height=upright.height * 72 / dpi)
            page.insert_image(page.rect, stream=buffer.getvalue())
            placed += add_text_layer(page, result.words, font)
        if doc.page_count == 0:
            return {"pages_with_text": 0, "words": 0, "size_growth": 0.0}
        archival = save_atomically(doc, out, pdfa)
    growth = out.stat().st_size / original_size - 1 if original_size else 0.0
    return {
        "pages_with_text": sum(1 for p in pages if p.words),
        "words": placed,
        "size_growth": round(growth, 4),
        "path": str(out),
    } | archival

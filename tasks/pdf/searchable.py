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
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from PIL import Image

from korpus.core.datamodel import PageResult, PageWord
from tasks.pdf.invisible_font import invisible_font
from tasks.pdf.pdfa import declared_pdfa, kept_level, make_pdfa

JPEG_QUALITY = {2: 75, 3: 50}
"""The JPEG quality a page image korpus writes is re-encoded at, by KORPUS_PDF_OPTIMIZE level (as OCRmyPDF's
`--optimize 2` and `3` lower it); levels 0 and 1 never re-encode below the source's own quality."""


@dataclass
class PageFrame:
    """A page image for a searchable copy, as the source holds it: `encoded`, the source's own JPEG bytes (embedded
    as they are, never decoded and re-encoded), or `image`, the decoded page in its own mode (stored losslessly).
    `width` × `height` are its pixels as stored, `dpi` its resolution, `turn` the degrees clockwise that make it
    upright (its EXIF orientation) before OCR's own turn."""

    width: int
    height: int
    dpi: int
    turn: int = 0
    encoded: bytes | None = None
    image: Image.Image | None = None
    points: tuple[float, float] | None = None
    """The page's size in points where the pixels are not the page's resolution (a DjVu background layer kept at
    its own); None: width × height at `dpi`."""

    def decoded(self) -> Image.Image:
        return self.image if self.image is not None else Image.open(io.BytesIO(self.encoded or b""))


def page_image_bytes(frame: PageFrame, optimize: int = 1) -> bytes:
    """What goes into the copy for `frame`: its own JPEG bytes, or its pixels losslessly (PNG: stored Flate); at
    `optimize` 2 or 3 a JPEG of JPEG_QUALITY instead where that is smaller."""
    if frame.encoded is not None:
        kept = frame.encoded
    else:
        buffer = io.BytesIO()
        frame.decoded().save(buffer, "PNG", optimize=optimize >= 1)
        kept = buffer.getvalue()
    if optimize < 2:
        return kept
    image = frame.decoded()
    buffer = io.BytesIO()
    image.convert("L" if image.mode in ("1", "L", "LA") else "RGB").save(
        buffer, "JPEG", quality=JPEG_QUALITY[min(optimize, 3)], optimize=True
    )
    return buffer.getvalue() if buffer.tell() < len(kept) else kept


def save_atomically(doc: pymupdf.Document, out: Path, pdfa: str = "2b", optimize: int = 1) -> dict[str, str | None]:
    """Subset the fonts, write `out` under a temporary name first — finished as PDF/A of flavour `pdfa` ('off':
    plain PDF) — so a kill never leaves half a PDF. {"pdfa": the flavour written or None, "pdfa_refused": why a
    copy asked for PDF/A is plain}."""
    doc.subset_fonts()
    tmp = out.with_suffix(f".{os.getpid()}.part")
    doc.save(tmp, garbage=3, deflate=True)
    refused = make_pdfa(tmp, pdfa, optimize) if pdfa != "off" else None
    tmp.replace(out)
    written = None if pdfa == "off" or refused else pdfa
    return {"pdfa": written} | ({"pdfa_refused": refused} if refused else {})


def _onto_page(turn: int, upright: pymupdf.Rect, stored: pymupdf.Rect) -> pymupdf.Matrix:
    """The matrix (in PDF space, y up) taking text laid out on the upright page — the page image turned `turn`
    degrees clockwise, where OCR found its words — onto the page as stored: glyphs turned with it."""
    ws, hs = stored.width, stored.height
    back = {  # upright (u, v) → stored (x, y), both with y down: the inverse of turning the stored image clockwise
        90: pymupdf.Matrix(0, -1, 1, 0, 0, hs),
        180: pymupdf.Matrix(-1, 0, 0, -1, ws, hs),
        270: pymupdf.Matrix(0, 1, -1, 0, ws, 0),
    }[turn]
    return pymupdf.Matrix(1, 0, 0, -1, 0, upright.height) * back * pymupdf.Matrix(1, 0, 0, -1, 0, hs)


def add_text_layer(page: pymupdf.Page, words: list[PageWord], font: pymupdf.Font, turn: int = 0) -> int:
    """Invisible text on one page, line by line at the OCR line boxes; returns the words placed. `turn`: the
    degrees clockwise OCR turned the page (as stored, no /Rotate) to read it — its words' boxes are on that upright
    page, and the text goes onto the stored page turned back, so it lies over the words it reads.

    A line is written as one string from its left edge on its baseline, sized to the line's height and shrunk
    to the line's width if need be: text extractors (pdftotext, a viewer's search) read it back as a line, and a
    selection covers about the right place on the scan.
    """
    lines: dict[int, list[PageWord]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    turn %= 360
    stored = page.rect
    upright = stored if turn in (0, 180) else pymupdf.Rect(0, 0, stored.height, stored.width)
    writer = pymupdf.TextWriter(upright)
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
        writer.write_text(page, render_mode=3, matrix=_onto_page(turn, upright, stored) if turn else None)
    return placed


def _blank_cmap() -> bytes:
    """A ToUnicode CMap for a one-byte font that reads every code as a space: its glyphs stay drawn, and read as
    nothing."""
    blocks = []
    for lo in range(0, 256, 100):
        codes = range(lo, min(lo + 100, 256))
        lines = "".join(f"<{code:02X}> <0020>\n" for code in codes)
        blocks.append(f"{len(codes)} beginbfchar\n{lines}endbfchar\n")
    return (
        "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /korpus-blank def /CMapType 2 def\n"
        "1 begincodespacerange <00> <FF> endcodespacerange\n" + "".join(blocks) + "endcmap CMapName currentdict "
        "/CMap defineresource pop end end\n"
    ).encode("ascii")


BLANK_CMAP = _blank_cmap()
"""Made once: every blanked font of every copy points at a stream of these bytes (one stream a copy)."""


def set_to_unicode(doc: pymupdf.Document, font_xref: int, cmap: bytes, shared: dict[bytes, int]) -> None:
    """Point the font at a ToUnicode stream; fonts with identical maps share one stream object."""
    xref = shared.get(cmap)
    if xref is None:
        xref = doc.get_new_xref()
        doc.update_object(xref, "<<>>")
        doc.update_stream(xref, cmap)
        shared[cmap] = xref
    doc.xref_set_key(font_xref, "ToUnicode", f"{xref} 0 R")


def remove_old_text(doc: pymupdf.Document, page: pymupdf.Page, kept_fonts: set[int], shared: dict[bytes, int]) -> str:
    """Take the text a replaced layer held out of the copy, so search, copy-paste and pdftotext read only the
    text korpus indexed — the OCR layer written over the page (as `ocrmypdf --redo-ocr` does for old OCR).

    An invisible layer (an earlier OCR over a scan) is removed outright; the scan stays. Visible glyphs drawn with a
    font that has no Unicode map («M]heh\\guc») must stay visible: their one-byte fonts get a ToUnicode map that
    reads every code as a space (`BLANK_CMAP`). Until session 40 the map was learned from the OCR's votes and the
    page kept no OCR layer ("repaired in place"); on ukodeksrf.pdf that copy lost every digit, the punctuation and
    some capitals the OCR read (51 of 642 indexed words, benchmarks/real_archive.py). Fonts that also serve a kept
    page, and two-byte (Type0) fonts, are left alone.
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
    outcome = "blanked-fonts"
    for xref, _ext, font_type, *_rest in page.get_fonts(full=True):
        if xref in kept_fonts or font_type == "Type0":
            outcome = "kept-shared" if xref in kept_fonts else "type0-left"
            continue
        set_to_unicode(doc, xref, BLANK_CMAP, shared)
    return outcome


def write_searchable_pdf(
    source_pdf: str, pages: list[PageResult], out: Path, pdfa: str = "2b", optimize: int = 1
) -> dict[str, float]:
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
        shared: dict[bytes, int] = {}
        for number, page in enumerate(doc, start=1):
            if number in replaced:
                remove_old_text(doc, page, kept_fonts, shared)
            result = by_page.get(number)
            turn = (result.rotation or 0) if result is not None else 0
            # a page the source turns itself (/Rotate) and OCR turned again is left without a layer
            if result is not None and (turn == 0 or page.rotation == 0):
                placed += add_text_layer(page, result.words, font, turn)
        archival = save_atomically(doc, out, pdfa, optimize)
    before, after = Path(source_pdf).stat().st_size, out.stat().st_size
    return {
        "pages_with_text": len(by_page),
        "words": placed,
        "pages_replaced": len(replaced),
        "size_growth": round(after / before - 1, 4),
        "path": str(out),
    } | archival


def write_searchable_images(
    frame: Callable[[int], PageFrame],
    pages: list[PageResult],
    out: Path,
    original_size: int,
    pdfa: str = "2b",
    optimize: int = 1,
) -> dict[str, float]:
    """A searchable PDF of page images with the invisible OCR layer. Each page image goes in as the source holds it
    — a JPEG's own bytes, any other image's pixels losslessly (`page_image_bytes`; re-encoded only at `optimize` 2
    or 3) — at its own resolution, and the page is shown upright by its /Rotate (the EXIF orientation and OCR's
    turn together), never by turning the pixels. Atomic write, as PDF/A of flavour `pdfa` ('off': plain PDF)."""
    font = invisible_font()
    out.parent.mkdir(parents=True, exist_ok=True)
    placed = 0
    with pymupdf.open() as doc:
        for result in sorted((p for p in pages if p.page), key=lambda p: p.page or 0):
            image = frame(result.page or 1)
            width, height = image.points or (image.width * 72 / image.dpi, image.height * 72 / image.dpi)
            page = doc.new_page(width=width, height=height)
            page.insert_image(page.rect, stream=page_image_bytes(image, optimize))
            turn = (image.turn + (result.rotation or 0)) % 360
            placed += add_text_layer(page, result.words, font, turn)
            page.set_rotation(turn)
        if doc.page_count == 0:
            return {"pages_with_text": 0, "words": 0, "size_growth": 0.0}
        archival = save_atomically(doc, out, pdfa, optimize)
    growth = out.stat().st_size / original_size - 1 if original_size else 0.0
    return {
        "pages_with_text": sum(1 for p in pages if p.words),
        "words": placed,
        "size_growth": round(growth, 4),
        "path": str(out),
    } | archival

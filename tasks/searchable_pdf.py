"""Searchable PDFs: the original pages untouched, an invisible text layer with the OCR words at their boxes.

Written with PyMuPDF (docs/ocr.md says why not ocrmypdf's renderer): each word is inserted with render mode 3
(invisible) and scaled horizontally to its box, one Cyrillic-capable font (DejaVu Sans) embedded once per
document and subset at the end. Pages that kept their own text layer are copied as they are. Output goes to
`<data>/searchable/<source path>` — never over the source.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pymupdf

from korpus.datamodel import PageResult, PageWord, Source, SourceKind
from korpus.settings import Settings

FONT_FILE = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
FONT_NAME = "korpus-ocr"


def _font() -> pymupdf.Font:
    if not FONT_FILE.is_file():
        raise FileNotFoundError(f"{FONT_FILE} is missing: apt-get install fonts-dejavu-core")
    return pymupdf.Font(fontfile=str(FONT_FILE))


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


def write_searchable_pdf(source_pdf: str, pages: list[PageResult], out: Path) -> dict[str, float]:
    """Copy `source_pdf` to `out` with invisible OCR text on every page that has words. Atomic write."""
    by_page = {p.page: p for p in pages if p.words}
    font = _font()
    out.parent.mkdir(parents=True, exist_ok=True)
    placed = 0
    with pymupdf.open(source_pdf) as doc:
        for number, page in enumerate(doc, start=1):
            result = by_page.get(number)
            if result is not None:
                placed += add_text_layer(page, result.words, font)
        doc.subset_fonts()
        tmp = out.with_suffix(f".{os.getpid()}.part")
        doc.save(tmp, garbage=3, deflate=True)
    tmp.replace(out)
    before, after = Path(source_pdf).stat().st_size, out.stat().st_size
    return {"pages_with_text": len(by_page), "words": placed, "size_growth": round(after / before - 1, 4)}


def ocr_document(source_pdf: Path, out: Path, settings: Settings) -> dict[str, float]:
    """`korpus ocr`: the same cascade and writer as a refresh, for one file outside any corpus.

    Pages run side by side on `KORPUS_DASK_THREADS_PER_WORKER` threads (Tesseract is a subprocess per page).
    """
    from tasks.parse import ocr_pdf_page, parse_pdf_text_layers
    from tasks.receive import file_sha256

    if out.resolve() == source_pdf.resolve():
        raise ValueError("korpus never writes over its input: choose another output path")
    source = Source(
        source_id=source_pdf.name, version=file_sha256(source_pdf), path=str(source_pdf), kind=SourceKind.pdf,
        owner="korpus-ocr", access="local",
    )  # fmt: skip
    first = parse_pdf_text_layers(source, settings)
    if first.problems:
        raise ValueError(first.problems[0].detail)
    with ThreadPoolExecutor(settings.dask_threads_per_worker) as pool:
        done = list(pool.map(lambda page: ocr_pdf_page(source, page, settings), first.ocr_pending))
    pages = first.pages + [p for outcome in done for p in outcome.pages]
    summary = write_searchable_pdf(str(source_pdf), pages, out)
    summary.update(
        pages=first.page_count,
        ocr_pages=len(first.ocr_pending),
        refused_pages=sum(len(o.problems) for o in done),
    )
    return summary

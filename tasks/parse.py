"""PARSE stages for PDFs and plain text, with the page cache: a source (or one page of it) in, PageResults out.

Each function reports whether it called an engine (Tesseract) or served the page cache, so a refresh summary can
show that a re-run did no OCR work. Recordings: tasks/speech.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from korpus.datamodel import PageResult, QuarantineItem, ReasonCode, Source
from korpus.settings import Settings
from tasks.page_cache import PageCache
from tasks.pdf_pages import UnreadablePdfError, read_text_layers, render_page
from tasks.structure import text_structure
from tasks.tesseract import TesseractError, ocr_image, tesseract_version


@dataclass
class ParseOutcome:
    pages: list[PageResult] = field(default_factory=list)
    ocr_pending: list[int] = field(default_factory=list)
    """PDF pages whose text layer failed the check: to be OCR'd (fanned out by the flow)."""
    page_count: int = 0
    problems: list[QuarantineItem] = field(default_factory=list)
    engine_calls: int = 0
    cache_hits: int = 0
    stats: dict[str, float] = field(default_factory=dict)


def _problem(source: Source, reason: ReasonCode, detail: str, page: int | None = None) -> QuarantineItem:
    return QuarantineItem(
        source_id=source.source_id, source_version=source.version, page=page, reasons=[reason], detail=detail
    )


def parse_pdf_text_layers(source: Source, settings: Settings) -> ParseOutcome:
    """Pages with a trusted text layer become results; the rest are listed for OCR."""
    outcome = ParseOutcome()
    try:
        layers = read_text_layers(source.path, settings)
    except UnreadablePdfError as exc:
        outcome.problems.append(_problem(source, ReasonCode.unreadable_file, str(exc)))
        return outcome
    outcome.page_count = len(layers)
    for layer in layers:
        if layer.text is None:
            outcome.ocr_pending.append(layer.page)
            continue
        outcome.pages.append(
            PageResult(
                source_id=source.source_id,
                source_version=source.version,
                page=layer.page,
                text=layer.text,
                method="text-layer",
                engine="pymupdf",
                units=layer.units,
            )
        )
    return outcome


def tesseract_engine_key(settings: Settings) -> str:
    return f"{tesseract_version()}|{settings.ocr_language}|{settings.ocr_dpi}|psm3"


def ocr_pdf_page(source: Source, page: int, settings: Settings) -> ParseOutcome:
    """Tesseract on one rendered page, through the page cache."""
    outcome = ParseOutcome(page_count=1)
    cache = PageCache(settings.page_cache_dir)
    key = tesseract_engine_key(settings)
    cached = cache.get(PageResult, source.version, f"p{page:05d}", "tesseract", key)
    if cached is not None:
        outcome.pages.append(cached)
        outcome.cache_hits += 1
        return outcome
    try:
        text = ocr_image(render_page(source.path, page, settings.ocr_dpi), settings.ocr_language, settings.ocr_dpi)
    except (TesseractError, UnreadablePdfError) as exc:
        outcome.problems.append(_problem(source, ReasonCode.ocr_failed, str(exc), page))
        return outcome
    outcome.engine_calls += 1
    result = PageResult(
        source_id=source.source_id,
        source_version=source.version,
        page=page,
        text=text,
        method="tesseract",
        engine=tesseract_version(),
        units=text_structure(text),
    )
    cache.put(result, source.version, f"p{page:05d}", "tesseract", key)
    outcome.pages.append(result)
    return outcome


def read_plain_text(source: Source) -> ParseOutcome:
    """`.txt` and `.md`: the whole file is page 1. Not UTF-8 → quarantined as unreadable."""
    outcome = ParseOutcome(page_count=1)
    try:
        text = Path(source.path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        outcome.problems.append(_problem(source, ReasonCode.unreadable_file, f"not UTF-8 text: {exc}"))
        return outcome
    outcome.pages.append(
        PageResult(
            source_id=source.source_id,
            source_version=source.version,
            page=1,
            text=text,
            method="plain-text",
            engine="utf-8",
            units=text_structure(text, markdown=source.path.lower().endswith(".md")),
        )
    )
    return outcome

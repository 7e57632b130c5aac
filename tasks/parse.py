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
from tasks.pdf_pages import UnreadablePdfError, open_pdf, read_text_layers, render_page
from tasks.structure import text_structure
from tasks.tesseract import TesseractError, ocr_page_words, tesseract_version
from tasks.text_quality import text_layer_quality
from tasks.vlm import VlmError, place_on_lines, read_page


@dataclass
class ParseOutcome:
    pages: list[PageResult] = field(default_factory=list)
    ocr_pending: list[int] = field(default_factory=list)
    """PDF pages whose text layer failed the check: to be OCR'd (fanned out by the flow)."""
    page_count: int = 0
    problems: list[QuarantineItem] = field(default_factory=list)
    engine_calls: int = 0
    vlm_calls: int = 0
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
                tier=0,
                quality=layer.quality.score,
            )
        )
    return outcome


def tesseract_engine_key(settings: Settings) -> str:
    return f"{tesseract_version()}|{settings.ocr_language}|{settings.ocr_dpi}|psm3|tsv"


def vlm_engine_key(settings: Settings) -> str:
    return f"{settings.vlm_model}|{settings.vlm_dpi}|{settings.vlm_prompt}"


def _tier1(source: Source, page: int, settings: Settings, outcome: ParseOutcome) -> PageResult:
    cache = PageCache(settings.page_cache_location)
    key = tesseract_engine_key(settings)
    cached = cache.get(PageResult, source.version, f"p{page:05d}", "tesseract", key)
    if cached is not None:
        outcome.cache_hits += 1
        return cached
    image, dpi = render_page(source.path, page, settings.ocr_dpi, fmt="pnm")
    ocr = ocr_page_words(image, settings.ocr_language, dpi)
    outcome.engine_calls += 1
    result = PageResult(
        source_id=source.source_id, source_version=source.version, page=page, text=ocr.text, method="tesseract",
        engine=tesseract_version(), tier=1, words=ocr.words, units=text_structure(ocr.text),
    )  # fmt: skip
    cache.put(result, source.version, f"p{page:05d}", "tesseract", key)
    return result


def _tier2(source: Source, page: int, tier1: PageResult, settings: Settings, outcome: ParseOutcome) -> PageResult:
    cache = PageCache(settings.page_cache_location)
    key = vlm_engine_key(settings)
    cached = cache.get(PageResult, source.version, f"p{page:05d}", "vlm", key)
    if cached is not None:
        outcome.cache_hits += 1
        return cached
    png, _dpi = render_page(source.path, page, settings.vlm_dpi)
    text = read_page(png, settings)
    outcome.vlm_calls += 1
    with open_pdf(source.path) as doc:
        rect = doc[page - 1].rect
    result = PageResult(
        source_id=source.source_id, source_version=source.version, page=page, text=text, method="vlm",
        engine=settings.vlm_model, tier=2, words=place_on_lines(text, tier1.words, rect.width, rect.height),
        units=text_structure(text),
    )  # fmt: skip
    cache.put(result, source.version, f"p{page:05d}", "vlm", key)
    return result


def ocr_pdf_page(source: Source, page: int, settings: Settings, force_vlm: bool = False) -> ParseOutcome:
    """The OCR cascade for one page, every tier through the page cache.

    Tier 1 (Tesseract) is kept when the detector passes it; otherwise tier 2 (the VLM, when configured) is
    asked; a page no tier can read is quarantined with every tier's reasons. `force_vlm` (a reviewer's re-OCR)
    goes to tier 2 whatever tier 1 scored.
    """
    outcome = ParseOutcome(page_count=1)
    refusals: list[str] = []
    try:
        tier1 = _tier1(source, page, settings, outcome)
        q1 = text_layer_quality(tier1.text, settings)
        if q1.ok and not force_vlm:
            outcome.pages.append(tier1.model_copy(update={"quality": q1.score, "quality_reasons": []}))
            return outcome
        refusals.append(f"tier 1 ({tier1.engine}): {', '.join(q1.reasons) or 'forced to tier 2'}")
        if settings.vlm_url:
            tier2 = _tier2(source, page, tier1, settings, outcome)
            q2 = text_layer_quality(tier2.text, settings)
            if q2.ok:
                reasons = [r for r in q1.reasons]
                outcome.pages.append(tier2.model_copy(update={"quality": q2.score, "quality_reasons": reasons}))
                return outcome
            refusals.append(f"tier 2 ({tier2.engine}): {', '.join(q2.reasons)}")
        else:
            refusals.append("tier 2: no VLM configured (KORPUS_VLM_URL)")
        best = tier1.text.strip()
    except (TesseractError, UnreadablePdfError, VlmError) as exc:
        outcome.problems.append(_problem(source, ReasonCode.ocr_failed, str(exc), page))
        return outcome
    reason = ReasonCode.page_quality if best else ReasonCode.empty_text
    item = _problem(source, reason, "; ".join(refusals), page)
    item.evidence = best[:4000]
    outcome.problems.append(item)
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

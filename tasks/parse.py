"""PARSE: a source's own text through its reader (tasks/readers), then the OCR cascade (tasks/ocr) for each page
that needs it — with the page cache, and the rule that the indexed text is never worse than the source.

Each function reports whether it called an engine or served the page cache, so a refresh summary can show that a
re-run did no OCR work. Recordings: tasks/audio/speech.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from korpus.core.datamodel import LayerCheck, PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import OcrError, TierCounts, cached_read
from tasks.ocr.registry import cascade
from tasks.ocr.tesseract import TesseractError
from tasks.ocr.vlm import VlmError
from tasks.pdf.searchable import write_searchable_pdf
from tasks.readers.base import ParseOutcome, UnreadableSourceError, failure, problem
from tasks.readers.registry import reader_for
from tasks.runtime.chat import ChatError
from tasks.runtime.retry import TransientError, counting_retries
from tasks.text.quality import TextLayerQuality, readings_agree, text_layer_quality, word_f1

__all__ = [
    "ParseOutcome",
    "ocr_document",
    "ocr_page",
    "ocr_pdf_page",
    "parse_pdf_text_layers",
    "read_plain_text",
    "read_source",
]


def read_source(source: Source, settings: Settings) -> ParseOutcome:
    """Tier 0 for any paged or text source: what the file itself holds; pages needing OCR are listed."""
    if source.kind is None:
        raise ValueError(f"{source.source_id}: no reader (admission should have stopped it)")
    return reader_for(source.kind).read(source, settings)


def parse_pdf_text_layers(source: Source, settings: Settings) -> ParseOutcome:
    return reader_for(SourceKind.pdf).read(source, settings)


def read_plain_text(source: Source) -> ParseOutcome:
    return reader_for(SourceKind.text).read(source, Settings.model_construct())


def choose_text(
    layer: PageResult, ocr: PageResult, q_layer: TextLayerQuality, q_ocr: TextLayerQuality, agreement: float
) -> PageResult:
    """A flagged layer against the OCR of its page: the better text wins.

    Where they agree closely the layer is kept (it is exact; OCR only confirms it). Where they disagree, OCR
    replaces the layer only when it is readable and the layer is broken (garbage signals); or, for a layer over
    a scan (invisible, or a token layer on an image), when OCR reads far more Cyrillic (a Latin-only earlier
    OCR) or far more text. A readable born-digital layer stays: an English page, a code listing, a table of
    contents — Tesseract turning «SOVA ASR» into «ЗОУА АЗК» never replaces it.
    """
    similarity = word_f1(layer.text, ocr.text)
    s_layer, s_ocr = q_layer.signals, q_ocr.signals
    over_scan = bool({"invisible-layer", "too-little-text-for-image"} & {*layer.quality_reasons, *q_layer.reasons})
    replace = (
        similarity < agreement
        and q_ocr.readable
        and (
            bool(q_layer.garbage)
            or (over_scan and s_ocr["cyrillic_share"] - s_layer["cyrillic_share"] >= 0.3)
            or (over_scan and s_ocr["chars"] >= 2 * s_layer["chars"] + 100)
        )
    )
    check = LayerCheck(
        decision="ocr-replaced-layer" if replace else "layer-kept",
        similarity=round(similarity, 3),
        layer_score=q_layer.score,
        ocr_score=q_ocr.score,
        layer_reasons=q_layer.reasons,
    )
    if replace:
        return ocr.model_copy(update={"quality": q_ocr.score, "quality_reasons": q_layer.reasons, "layer_check": check})
    return layer.model_copy(update={"layer_check": check})


def ocr_page(
    source: Source, page: int, settings: Settings, force_vlm: bool = False, layer: PageResult | None = None
) -> ParseOutcome:
    """The OCR cascade for one page of any paged source, every tier through the page cache.

    A tier's text is kept when it is readable (no garbage signals); otherwise the next tier is asked; a page no
    tier reads is quarantined with every tier's reasons. `layer` is the page's flagged text layer: it and the
    OCR are compared and the better one kept (`choose_text`). `force_vlm` (a reviewer's re-OCR) reads every tier
    afresh (no cached text) and goes on to the last tier whatever tier 1 read. A transient fault that outlasts
    an engine's retries leaves the page in `unread` (neither text nor quarantine); retries are counted.
    """
    with counting_retries() as retries:
        outcome = _cascade(source, page, settings, force_vlm, layer)
    outcome.retries = retries[0]
    return outcome


def _cascade(source: Source, page: int, settings: Settings, force_vlm: bool, layer: PageResult | None) -> ParseOutcome:
    outcome = ParseOutcome(page_count=1)
    counts = TierCounts()
    refusals: list[str] = []
    refused_reasons: list[str] = []
    best_text = ""
    q_layer = text_layer_quality(layer.text, settings) if layer is not None else None
    readings = []  # every tier's refused reading, for the reviewer
    if layer is not None and q_layer is not None:
        readings.append(_reading(0, layer.engine or "text layer", layer.text, q_layer))
    try:
        image = reader_for(source.kind).page_image(source, page, settings)  # type: ignore[arg-type]
        engines = [e for e in cascade(settings) if e.available()]
        earlier: PageResult | None = None
        for position, engine in enumerate(engines):
            result = cached_read(engine, source, page, image, earlier, settings, counts, fresh=force_vlm)
            quality = text_layer_quality(result.text, settings)
            if (
                layer is not None
                and q_layer is not None
                and readings_agree(layer.text, result.text, settings.layer_agreement)
            ):
                # the page shows what the layer says (a short title page, a table of repeated cells): exact wins
                outcome.pages.append(choose_text(layer, result, q_layer, quality, settings.layer_agreement))
                return _counted(outcome, counts)
            best_text = best_text or result.text.strip()
            last = position == len(engines) - 1
            if quality.readable and quality.signals["chars"] > 0 and not (force_vlm and not last):
                kept = result.model_copy(update={"quality": quality.score, "quality_reasons": refused_reasons})
                if layer is not None and q_layer is not None:
                    kept = choose_text(layer, kept, q_layer, quality, settings.layer_agreement)
                outcome.pages.append(kept)
                return _counted(outcome, counts)
            refusals.append(f"tier {engine.tier} ({result.engine}): {', '.join(quality.reasons) or 'forced on'}")
            refused_reasons += quality.reasons
            readings.append(_reading(engine.tier, result.engine, result.text, quality))
            earlier = result
        if not any(e.tier >= 2 for e in engines):
            refusals.append("tier 2: no VLM configured (KORPUS_VLM_URL)")
    except TransientError as exc:  # still failing after the engine's retries: the page waits for the next refresh
        outcome.unread[page] = str(exc)
        return _counted(outcome, counts)
    except (TesseractError, VlmError, ChatError, OcrError, UnreadableSourceError) as exc:
        outcome.problems.append(problem(source, ReasonCode.ocr_failed, str(exc), page))
        return _counted(outcome, counts)
    except Exception as exc:  # containment: a failure of any kind on one page is that page's item
        # a frame cut short («image file is truncated»), a decoder's own error, a bug an odd page exposes: the page
        # is quarantined with what was raised, and the rest of the document and of the refresh go on
        outcome.problems.append(problem(source, ReasonCode.ocr_failed, failure(exc), page))
        return _counted(outcome, counts)
    if layer is not None and q_layer is not None and q_layer.readable:
        outcome.pages.append(layer)  # no OCR tier read it: a readable flagged layer is still the best there is
        return _counted(outcome, counts)
    item = problem(source, ReasonCode.page_quality if best_text else ReasonCode.empty_text, "; ".join(refusals), page)
    item.evidence = best_text[:4000]
    item.readings = readings
    outcome.problems.append(item)
    return _counted(outcome, counts)


def _reading(tier: int, engine: str, text: str, quality: TextLayerQuality) -> dict[str, Any]:
    """One tier's refused reading, kept on the quarantine item so a reviewer sees what each tier made of it."""
    return {
        "tier": tier,
        "engine": engine,
        "text": text[:4000],
        "score": round(float(quality.score), 3),
        "reasons": list(quality.reasons),
    }


def _counted(outcome: ParseOutcome, counts: TierCounts) -> ParseOutcome:
    outcome.engine_calls, outcome.vlm_calls, outcome.cache_hits = (
        counts.engine_calls,
        counts.vlm_calls,
        counts.cache_hits,
    )
    return outcome


ocr_pdf_page = ocr_page
"""The PDF name of `ocr_page`, kept for the benchmarks and tests that call it."""


def read_pdf(source_pdf: Path, settings: Settings) -> tuple[ParseOutcome, list[ParseOutcome]]:
    """One PDF outside any corpus through the cascade: its text layers (tier 0), then each page they left for OCR.
    Raises ValueError when the file cannot be read."""
    from tasks.receive import file_sha256

    source = Source(
        source_id=source_pdf.name,
        version=file_sha256(source_pdf),
        path=str(source_pdf),
        kind=SourceKind.pdf,
        owner="korpus-ocr",
        access="local",
    )
    first = parse_pdf_text_layers(source, settings)
    if first.problems:
        raise ValueError(first.problems[0].detail)
    with ThreadPoolExecutor(settings.dask_threads_per_worker) as pool:
        done = list(
            pool.map(
                lambda page: ocr_pdf_page(source, page, settings, layer=first.flagged.get(page)), first.ocr_pending
            )
        )
    return first, done


def ocr_document(source_pdf: Path, out: Path, settings: Settings) -> dict[str, float]:
    """`korpus ocr`: the same cascade and writer as a refresh, for one file outside any corpus.

    Pages run side by side on `KORPUS_DASK_THREADS_PER_WORKER` threads (Tesseract is a subprocess per page).
    """
    if out.resolve() == source_pdf.resolve():
        raise ValueError("korpus never writes over its input: choose another output path")
    first, done = read_pdf(source_pdf, settings)
    pages = first.pages + [p for outcome in done for p in outcome.pages]
    summary = write_searchable_pdf(str(source_pdf), pages, out, settings.pdfa, settings.pdf_optimize)
    summary.update(
        pages=first.page_count,
        ocr_pages=len(first.ocr_pending),
        refused_pages=sum(len(o.problems) for o in done),
    )
    return summary

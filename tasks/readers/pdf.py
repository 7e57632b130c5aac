"""PDF: each page's text layer is judged by the detector; trusted pages are kept, the rest go to OCR (a flagged
layer travels with its page, so OCR can decide whether the layer is kept)."""

from __future__ import annotations

from functools import partial
from typing import Any

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.pdf.pages import UnreadablePdfError, pdf_page_image, read_text_layers
from tasks.pdf.searchable import write_searchable_pdf
from tasks.readers.base import ParseOutcome, problem


def layer_pages(source: Source, path: str, settings: Settings, engine: str = "pymupdf") -> ParseOutcome:
    """Tier 0 of any PDF (an original, or one LibreOffice made): trusted layers, flagged layers, empty pages."""
    outcome = ParseOutcome()
    try:
        layers = read_text_layers(path, settings)
    except UnreadablePdfError as exc:
        outcome.problems.append(problem(source, ReasonCode.unreadable_file, str(exc)))
        return outcome
    outcome.page_count = len(layers)
    if all(layer.blank for layer in layers):
        detail = f"nothing is drawn on any of its {len(layers)} pages (no text, image, line or annotation)"
        outcome.problems.append(problem(source, ReasonCode.empty_text, detail))
        return outcome
    for layer in layers:
        if layer.blank:  # a blank page (a separator, a back side): not OCR'd, no chunk, no item
            outcome.pages.append(
                PageResult(
                    source_id=source.source_id,
                    source_version=source.version,
                    page=layer.page,
                    text="",
                    method="blank",
                    engine=engine,
                    tier=0,
                    size=layer.size,
                )
            )
            continue
        result = PageResult(
            source_id=source.source_id,
            source_version=source.version,
            page=layer.page,
            text=layer.text,
            method="text-layer",
            engine=engine,
            units=layer.units,
            tier=0,
            quality=layer.quality.score,
            quality_reasons=layer.quality.reasons,
            size=layer.size,
            boxes=layer.boxes,
        )
        outcome.add_layer(result, layer.quality)
    return outcome


class PdfReader:
    kind = SourceKind.pdf
    suffixes = (".pdf",)

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        return layer_pages(source, source.path, settings)

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        return partial(pdf_page_image, source.path, page)

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return write_searchable_pdf(
            source.path, pages, settings.data / "searchable" / source.source_id, settings.pdfa, settings.pdf_optimize
        )

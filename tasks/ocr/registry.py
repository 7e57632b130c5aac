"""The OCR engines korpus knows, as one table of names, plug-ins from the entry-point group `korpus.ocr_engines`,
and the cascade `KORPUS_OCR_TIERS` builds from them.

The table is data: an engine module imports the interface (tasks/ocr/engine.py) and nothing that imports it back;
the registry imports an engine's module only when a cascade first names it.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from korpus.core.settings import Settings
from tasks.ocr.engine import OcrEngine

BUILTIN_ENGINES = {
    "tesseract": "tasks.ocr.tesseract_engine:TesseractEngine",
    "vlm": "tasks.ocr.vlm_engine:VlmEngine",
}
ENTRY_POINTS = "korpus.ocr_engines"

ENGINES: dict[str, type[OcrEngine]] = {}
"""Engines registered in this process (a test's toy engine, a plug-in loaded), by name."""


def register_engine(engine: type[OcrEngine]) -> type[OcrEngine]:
    ENGINES[engine.name] = engine
    return engine


def engine_class(name: str) -> type[OcrEngine] | None:
    """The engine called `name`: registered, built in (imported now), or a plug-in; None when there is none."""
    if name in ENGINES:
        return ENGINES[name]
    if name in BUILTIN_ENGINES:
        module, _, attr = BUILTIN_ENGINES[name].partition(":")
        return register_engine(getattr(import_module(module), attr))
    for point in entry_points(group=ENTRY_POINTS, name=name):
        return register_engine(point.load())
    return None


def cascade(settings: Settings) -> list[OcrEngine]:
    """The configured tiers, in order; unknown names are a configuration error, said at once."""
    found = {name: engine_class(name) for name in settings.ocr_tiers}
    unknown = [name for name, engine in found.items() if engine is None]
    if unknown:
        known = sorted({*BUILTIN_ENGINES, *ENGINES, *(p.name for p in entry_points(group=ENTRY_POINTS))})
        raise ValueError(f"KORPUS_OCR_TIERS names unknown engines {unknown}; known: {known}")
    return [found[name].from_settings(settings) for name in settings.ocr_tiers]  # type: ignore[union-attr]

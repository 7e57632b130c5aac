"""The OCR engine interface and the cached tier wrapper every engine shares (the table of engines and the cascade:
tasks/ocr/registry.py).

An engine reads one page image and returns text (with word boxes where it has them). It is configured from the
settings in `from_settings`, loads anything heavy in `warm_up()`, and names its real version and every option that
changes its output in `cache_key()`, so the page cache never serves a result another configuration produced.
The cascade is `KORPUS_OCR_TIERS`, in order; a new engine is one class, and one line in the registry's table (or
an entry point of the group `korpus.ocr_engines`):

    class Toy:
        name, tier, dpi, image_format = "toy", 3, 150, "png"
        @classmethod
        def from_settings(cls, settings): return cls()
        def available(self) -> bool: return True
        def cache_key(self) -> str: return "toy-1"
        def warm_up(self) -> None: pass
        def read(self, image, earlier): return OcrRead(text="…", engine="toy 1")

    register_engine(Toy)   # tasks.ocr.registry — or a `korpus.ocr_engines` entry point
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from korpus.core.datamodel import PageResult, PageWord, Source
from korpus.core.settings import Settings
from tasks.runtime.crash_points import crash_point
from tasks.runtime.page_cache import PageCache
from tasks.text.regions import ocr_boxes
from tasks.text.structure import text_structure


class OcrError(RuntimeError):
    """An engine failed on a page (a crash, a timeout, a server error): the page is quarantined `ocr-failed`."""


@dataclass(frozen=True)
class PageImage:
    """A page as an engine sees it: encoded image bytes, the resolution it was made at, and the page size in
    points (so word boxes land on the page whatever the resolution)."""

    data: bytes
    dpi: int
    width_pt: float
    height_pt: float


MAX_RENDER_PIXELS = 60_000_000
"""A page rendered or decoded for an engine holds at most this many pixels: a bigger page (a 200-inch MediaBox, a
30,000-pixel scan) is rendered at a lower resolution."""
MAX_RENDER_SIDE = 32_767
"""Nor more than this many on either side: Tesseract (Leptonica) takes no more."""


def fit_dpi(width_in: float, height_in: float, dpi: int) -> int:
    """`dpi`, lowered so that a page of this size (inches) renders within MAX_RENDER_PIXELS and MAX_RENDER_SIDE."""
    width, height = max(width_in * dpi, 1.0), max(height_in * dpi, 1.0)
    scale = min(1.0, (MAX_RENDER_PIXELS / (width * height)) ** 0.5, MAX_RENDER_SIDE / width, MAX_RENDER_SIDE / height)
    return dpi if scale >= 1.0 else max(1, int(dpi * scale))


PageImageSource = Callable[[int, str], PageImage]
"""(dpi, format) → the page image; the reader renders it (PDF, DjVu) or loads it (a photo, a TIFF frame)."""


@dataclass
class OcrRead:
    """What an engine read: text, word boxes in points (origin top-left), the engine and version, and how far
    the image was turned to read it upright."""

    text: str
    engine: str
    words: list[PageWord] = field(default_factory=list)
    rotation: int = 0
    size: tuple[float, float] | None = None
    """The page as stored (before any turning), in points: where the word boxes are mapped back to."""


class OcrEngine(Protocol):
    name: str
    """Short name: the cache method and the KORPUS_OCR_TIERS entry."""
    tier: int
    dpi: int
    image_format: str

    @classmethod
    def from_settings(cls, settings: Settings) -> OcrEngine: ...

    def available(self) -> bool:
        """False when the engine is not configured (a VLM tier without KORPUS_VLM_URL)."""
        ...

    def cache_key(self) -> str: ...

    def warm_up(self) -> None: ...

    def read(self, image: PageImageSource, earlier: PageResult | None) -> OcrRead:
        """Read the page; `earlier` is the previous tier's result (a VLM places its lines on its boxes)."""
        ...


@dataclass
class TierCounts:
    engine_calls: int = 0
    vlm_calls: int = 0
    cache_hits: int = 0


def cached_read(
    engine: OcrEngine,
    source: Source,
    page: int,
    image: PageImageSource,
    earlier: PageResult | None,
    settings: Settings,
    counts: TierCounts,
    fresh: bool = False,
) -> PageResult:
    """One tier on one page through the page cache: (sha256, page, engine name, engine cache key). `fresh` (a
    reviewer's re-OCR) reads the page again and replaces the cached entry."""
    cache = PageCache(settings.page_cache_location)
    unit, key = f"p{page:05d}", engine.cache_key()
    cached = None if fresh else cache.get(PageResult, source.version, unit, engine.name, key)
    if cached is not None:
        counts.cache_hits += 1
        return cached
    engine.warm_up()
    read = engine.read(image, earlier)
    if engine.tier >= 2:
        counts.vlm_calls += 1
    else:
        counts.engine_calls += 1
    result = PageResult(
        source_id=source.source_id,
        source_version=source.version,
        page=page,
        text=read.text,
        method=engine.name,
        engine=read.engine,
        tier=engine.tier,
        words=read.words,
        units=text_structure(read.text),
        rotation=read.rotation,
        size=read.size,
        boxes=ocr_boxes(read.text, read.words, read.rotation, read.size),
    )
    cache.put(result, source.version, unit, engine.name, key)
    crash_point("after-ocr-page")
    return result

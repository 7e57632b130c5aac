"""Page photos and scans: JPEG, PNG, TIFF (every frame of a multi-page TIFF is a page), BMP. No text of their
own: every page goes through the OCR cascade, and a searchable PDF of the (upright) pages is written."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImage, PageImageSource
from tasks.pdf.searchable import write_searchable_images
from tasks.readers.base import ParseOutcome, UnreadableSourceError, problem

A4_WIDTH_INCHES = 8.27
MAX_PIXELS = 60_000_000


def _open(path: str) -> Image.Image:
    try:
        image = Image.open(path)
        image.load()
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise UnreadableSourceError(f"cannot open as an image: {exc}") from exc
    return image


def image_dpi(image: Image.Image) -> int:
    """The resolution the file states, or — for a photo that states none (or a screen's 72/96) — the one that
    makes the page as wide as A4, which is what a page photo usually shows."""
    stated = image.info.get("dpi", (0, 0))[0] or 0
    if stated >= 150:
        return round(stated)
    return round(min(600, max(100, image.width / A4_WIDTH_INCHES)))


def frame(path: str, page: int) -> Image.Image:
    """Page `page` (1-based) as an upright-by-EXIF greyscale image."""
    with _open(path) as image:
        for number, current in enumerate(ImageSequence.Iterator(image), start=1):
            if number == page:
                grey = ImageOps.exif_transpose(current).convert("L")
                grey.info["dpi"] = (image_dpi(current),) * 2
                return grey
    raise UnreadableSourceError(f"the image has no page {page}")


def image_page(path: str, page: int, dpi: int, fmt: str) -> PageImage:
    """The frame as the engine wants it; scaled down only when it is far above the engine's resolution."""
    grey = frame(path, page)
    own = grey.info["dpi"][0]
    scale = min(1.0, (dpi * 1.5) / own, (MAX_PIXELS / (grey.width * grey.height)) ** 0.5)
    if scale < 1.0:
        grey = grey.resize((max(1, int(grey.width * scale)), max(1, int(grey.height * scale))), Image.LANCZOS)
        own = max(36, int(own * scale))
    out = io.BytesIO()
    grey.save(out, "PPM" if fmt == "pnm" else fmt.upper())
    return PageImage(out.getvalue(), own, grey.width * 72 / own, grey.height * 72 / own)


class ImageReader:
    kind = SourceKind.image
    suffixes = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        try:
            with _open(source.path) as image:
                count = getattr(image, "n_frames", 1)
        except UnreadableSourceError as exc:
            return ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, str(exc))])
        return ParseOutcome(page_count=count, ocr_pending=list(range(1, count + 1)))

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        return lambda dpi, fmt: image_page(source.path, page, dpi, fmt)

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        out = settings.data / "searchable" / (source.source_id + ".pdf")
        return write_searchable_images(lambda page: frame(source.path, page), pages, out, source.size)

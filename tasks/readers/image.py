"""Page photos and scans: JPEG, PNG, TIFF (every frame of a multi-page TIFF is a page), BMP. No text of their
own: every page goes through the OCR cascade, and a searchable PDF of the (upright) pages is written.

Memory is bounded whatever size a frame claims: its size is read from the header before anything is decoded. A
JPEG bigger than MAX_RENDER_PIXELS is decoded at a fraction of its size (the JPEG decoder's own 1/2…1/8 scaling);
any other frame that would decode to over MAX_DECODE_BYTES is not decoded at all: that page is quarantined
`ocr-failed` with its size, and the file's other pages are read. (Pillow's own decompression-bomb check is off
here: this is the check, and it quarantines one page instead of refusing the file.)"""

from __future__ import annotations

import io
from typing import Any

from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import MAX_RENDER_PIXELS, PageImage, PageImageSource
from tasks.pdf.searchable import PageFrame, write_searchable_images
from tasks.readers.base import ParseOutcome, UnreadableSourceError, problem

A4_WIDTH_INCHES = 8.27
MAX_DECODE_BYTES = 400 << 20
"""A frame that decodes to more (a 30,000 × 30,000 PNG is 900 MB in grey) is its page's quarantine item."""
Image.MAX_IMAGE_PIXELS = None  # korpus opens only its own renders elsewhere; image files are checked by too_large


class PageTooLargeError(UnreadableSourceError):
    """A frame korpus will not decode: it would take more memory than MAX_DECODE_BYTES."""


def _open(path: str) -> Image.Image:
    """The image, its first frame decoded when that is within the limits (a damaged file fails here, whole)."""
    try:
        image = Image.open(path)
        if too_large(image) is None and not _shrinks(image):
            image.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise UnreadableSourceError(f"cannot open as an image: {exc}") from exc
    return image


def _shrinks(image: Image.Image) -> bool:
    """A JPEG over MAX_RENDER_PIXELS: decoded at a fraction of its size (Image.draft) rather than whole."""
    return image.format == "JPEG" and image.width * image.height > MAX_RENDER_PIXELS


def too_large(image: Image.Image) -> str | None:
    """Why the current frame is not decoded, or None: its pixels times bytes per pixel pass MAX_DECODE_BYTES."""
    if _shrinks(image):
        return None
    wide = len(image.getbands()) > 1 or image.mode in ("I", "F")  # Pillow keeps RGB and CMYK in four bytes
    per_pixel = 4 if wide else 2 if image.mode.startswith("I;16") else 1
    if image.width * image.height * per_pixel <= MAX_DECODE_BYTES:
        return None
    return (
        f"the page image is {image.width} × {image.height} pixels ({image.mode}): decoding it would take "
        f"{image.width * image.height * per_pixel >> 20} MiB, over korpus's {MAX_DECODE_BYTES >> 20} MiB a page — "
        "scan it at a lower resolution or save it as JPEG"
    )


def image_dpi(image: Image.Image) -> int:
    """The resolution the file states, or — for a photo that states none (or a screen's 72/96) — the one that
    makes the page as wide as A4, which is what a page photo usually shows."""
    stated = image.info.get("dpi", (0, 0))[0] or 0
    if stated >= 150:
        return round(stated)
    sideways = image.getexif().get(0x0112, 1) in (5, 6, 7, 8)  # stored turned: its upright width is its height
    return round(min(600, max(100, (image.height if sideways else image.width) / A4_WIDTH_INCHES)))


def frame(path: str, page: int) -> Image.Image:
    """Page `page` (1-based) as an upright-by-EXIF greyscale image."""
    with _open(path) as image:
        for number, current in enumerate(ImageSequence.Iterator(image), start=1):
            if number == page:
                if (why := too_large(current)) is not None:
                    raise PageTooLargeError(why)
                own, full = image_dpi(current), current.width
                if _shrinks(current):
                    scale = (MAX_RENDER_PIXELS / (current.width * current.height)) ** 0.5
                    # asked for half the size, the decoder's power-of-two scale lands within MAX_RENDER_PIXELS
                    current.draft("L", (int(current.width * scale / 2), int(current.height * scale / 2)))
                    own = max(1, round(own * current.width / full))
                current.load()
                grey = current.copy() if current.mode == "L" else current.convert("L")  # outlives the file
                ImageOps.exif_transpose(grey, in_place=True)
                grey.info["dpi"] = (own, own)
                return grey
    raise UnreadableSourceError(f"the image has no page {page}")


EXIF_TURNS = {1: 0, 3: 180, 6: 90, 8: 270}
"""EXIF orientation → degrees clockwise that show the stored image upright (2, 4, 5, 7 also mirror it)."""


def copy_frame(path: str, page: int) -> PageFrame:
    """Page `page` (1-based) as its searchable copy holds it: a JPEG (greyscale or RGB) by its own bytes; any other
    frame decoded in its own colours (a CMYK or 16-bit one brought to RGB or grey), stored losslessly. Either is
    turned upright by the page (`turn`), not by its pixels — a mirrored one (EXIF 2, 4, 5, 7) excepted."""
    with _open(path) as image:
        for number, current in enumerate(ImageSequence.Iterator(image), start=1):
            if number != page:
                continue
            dpi = image_dpi(current)
            turn = EXIF_TURNS.get(current.getexif().get(0x0112, 1))
            if image.format == "JPEG" and current.mode in ("L", "RGB") and turn is not None:
                with open(path, "rb") as raw:
                    return PageFrame(current.width, current.height, dpi, turn, encoded=raw.read())
            if (why := too_large(current)) is not None:
                raise PageTooLargeError(why)
            if _shrinks(current):  # a huge CMYK or mirrored JPEG: decoded at a fraction, as OCR read it
                grey = frame(path, page)
                return PageFrame(grey.width, grey.height, grey.info["dpi"][0], image=grey)
            current.load()
            own = current.copy() if current.mode in ("1", "L", "RGB") else current.convert(_lossless_mode(current))
            if turn is None:  # mirrored: its pixels made upright (a lossless transposition)
                own.info["exif"] = current.info.get("exif", b"")
                ImageOps.exif_transpose(own, in_place=True)
            return PageFrame(own.width, own.height, dpi, turn or 0, image=own)
    raise UnreadableSourceError(f"the image has no page {page}")


def _lossless_mode(image: Image.Image) -> str:
    """The mode a frame is stored in when it is not 1-bit, grey or RGB already: grey for grey kinds, else RGB."""
    return "L" if image.mode in ("LA", "I", "I;16", "I;16B", "I;16L", "F") else "RGB"


def image_page(path: str, page: int, dpi: int, fmt: str) -> PageImage:
    """The frame as the engine wants it; scaled down only when it is far above the engine's resolution."""
    grey = frame(path, page)
    own = grey.info["dpi"][0]
    scale = min(1.0, (dpi * 1.5) / own, (MAX_RENDER_PIXELS / (grey.width * grey.height)) ** 0.5)
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
        outcome = ParseOutcome()
        try:
            with _open(source.path) as image:
                for number, current in enumerate(ImageSequence.Iterator(image), start=1):
                    outcome.page_count = number
                    if (why := too_large(current)) is not None:
                        outcome.problems.append(problem(source, ReasonCode.ocr_failed, why, number))
                    else:
                        outcome.ocr_pending.append(number)
        except UnreadableSourceError as exc:
            return ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, str(exc))])
        return outcome

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        return lambda dpi, fmt: image_page(source.path, page, dpi, fmt)

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        out = settings.data / "searchable" / (source.source_id + ".pdf")
        return write_searchable_images(
            lambda page: copy_frame(source.path, page), pages, out, source.size, settings.pdfa, settings.pdf_optimize
        )

"""Tier 1: Tesseract (`rus+eng` by default) on the page image, with orientation detection for turned pages.

A page read with low confidence, or with most words in tall boxes (Tesseract read a quarter-turned page
sideways), is asked of Tesseract's OSD; when OSD is sure the page is turned 90/180/270°, the
image is turned upright and read again, and the better reading (higher mean word confidence) is kept. Upright
pages — the usual case — pay nothing for it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from PIL import Image

from korpus.core.datamodel import PageResult, PageWord
from korpus.core.settings import Settings
from tasks.ocr.engine import OcrRead, PageImage, PageImageSource
from tasks.ocr.tesseract import OcrPage, ocr_page_words, page_orientation, tesseract_version
from tasks.runtime.retry import RetryPolicy, with_retries

LOW_CONFIDENCE = 70.0
"""Mean word confidence below which a page is checked for rotation."""
MIN_OSD_CONFIDENCE = 1.5


def mean_confidence(words: list[PageWord]) -> float:
    confs = [w.conf for w in words if w.conf >= 0]
    return sum(confs) / len(confs) if confs else 0.0


def vertical_share(words: list[PageWord]) -> float:
    """Words of three letters or more whose box is taller than wide: Tesseract read a turned page sideways."""
    long = [w for w in words if len(w.text) >= 3]
    return sum(1 for w in long if (w.y1 - w.y0) > (w.x1 - w.x0)) / len(long) if long else 0.0


def turn_image(image: PageImage, degrees: int) -> PageImage:
    """The image turned `degrees` clockwise, as PNM, with the page size swapped for quarter turns."""
    with Image.open(io.BytesIO(image.data)) as img:
        turned = img.rotate(-degrees, expand=True)
        out = io.BytesIO()
        turned.save(out, "PPM")
    quarter = degrees in (90, 270)
    width, height = (image.height_pt, image.width_pt) if quarter else (image.width_pt, image.height_pt)
    return PageImage(out.getvalue(), image.dpi, width, height)


@dataclass
class TesseractEngine:
    language: str = "rus+eng"
    dpi: int = 300
    orientation: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    name = "tesseract"
    tier = 1
    image_format = "pnm"  # compressing a 300-dpi page to PNG takes longer (~0.6 s) than recognising it

    @classmethod
    def from_settings(cls, settings: Settings) -> TesseractEngine:
        return cls(
            language=settings.ocr_language,
            dpi=settings.ocr_dpi,
            orientation=settings.ocr_orientation,
            retry=RetryPolicy.from_settings(settings),
        )

    def available(self) -> bool:
        return True

    def cache_key(self) -> str:
        osd = "|osd-v2" if self.orientation else ""
        return f"{tesseract_version()}|{self.language}|{self.dpi}|psm3|tsv|cyr-initials{osd}"

    def warm_up(self) -> None:
        tesseract_version()

    def read(self, image: PageImageSource, earlier: PageResult | None) -> OcrRead:
        page = image(self.dpi, self.image_format)
        first = self._words(page.data, page.dpi)
        size = (page.width_pt, page.height_pt)
        best = OcrRead(text=first.text, engine=tesseract_version(), words=first.words, size=size)
        sideways = vertical_share(first.words) >= 0.5
        if not self.orientation or (mean_confidence(first.words) >= LOW_CONFIDENCE and not sideways):
            return best
        degrees, confidence = page_orientation(page.data, page.dpi)
        if degrees == 0 or confidence < MIN_OSD_CONFIDENCE:
            return best
        upright = self._words(turn_image(page, degrees).data, page.dpi)
        gain = mean_confidence(upright.words) - mean_confidence(first.words)
        if gain > 0 or (sideways and gain > -5):  # a sideways reading may be right, but its boxes are not upright
            return OcrRead(upright.text, best.engine, upright.words, rotation=degrees, size=size)
        return best

    def _words(self, data: bytes, dpi: int) -> OcrPage:
        return with_retries(lambda: ocr_page_words(data, self.language, dpi), self.retry, "tesseract")

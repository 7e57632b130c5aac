"""Tier 2: a vision-language model behind an OpenAI-compatible API (tasks/ocr/vlm.py), for pages tier 1 failed.

Its text has no geometry: lines are placed on the earlier tier's line boxes for the searchable PDF.
"""

from __future__ import annotations

from dataclasses import dataclass

from korpus.core.datamodel import PageResult
from korpus.core.settings import Settings
from tasks.ocr.engine import OcrRead, PageImageSource
from tasks.ocr.vlm import place_on_lines, read_page


@dataclass
class VlmEngine:
    settings: Settings
    name = "vlm"
    tier = 2
    image_format = "png"

    @property
    def dpi(self) -> int:
        return self.settings.vlm_dpi

    @classmethod
    def from_settings(cls, settings: Settings) -> VlmEngine:
        return cls(settings)

    def available(self) -> bool:
        return bool(self.settings.vlm_url)

    def cache_key(self) -> str:
        return f"{self.settings.vlm_model}|{self.settings.vlm_dpi}|{self.settings.vlm_prompt}"

    def warm_up(self) -> None:
        pass

    def read(self, image: PageImageSource, earlier: PageResult | None) -> OcrRead:
        page = image(self.dpi, self.image_format)
        text = read_page(page.data, self.settings)
        words = place_on_lines(text, earlier.words if earlier else [], page.width_pt, page.height_pt)
        return OcrRead(
            text=text,
            engine=self.settings.vlm_model,
            words=words,
            rotation=earlier.rotation if earlier else 0,
            size=(page.width_pt, page.height_pt),
        )

"""Text-layer quality detector: page text + page facts → score and reason codes. Pure; thresholds in settings.

A real archive holds scans whose old OCR layer reads «OTPH 1031851041431 / npoTOKon Necepa / MocKBa». A loader
that trusts any text layer indexes that garbage; korpus scores every layer (and every OCR result) first.
Signals and thresholds: docs/ocr.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from korpus.settings import Settings

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_TOKEN = re.compile(r"\S+")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_LATIN = re.compile(r"[A-Za-z\u00C0-\u024F]")
_EMPTY_TABLE_ROW = re.compile(r"^[\s|:+\-_]*\|[\s|:+\-_]*$")


@dataclass(frozen=True)
class PageFacts:
    """What the page itself says, beside its text."""

    image_coverage: float = 0.0  # share of the page area under images
    invisible_share: float = 0.0  # share of characters drawn invisibly (render mode 3)


@dataclass
class TextLayerQuality:
    ok: bool
    score: float
    reasons: list[str] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)


def _script(ch: str) -> str:
    if _CYRILLIC.match(ch):
        return "cyrillic"
    if _LATIN.match(ch):
        return "latin"
    name = unicodedata.name(ch, "")
    return name.split(" ")[0].lower() or "unknown"


def measure(text: str, facts: PageFacts) -> dict[str, float]:
    """Every signal, as a number, whether or not it fails."""
    letters = _LETTER.findall(text)
    scripts = Counter(_script(ch) for ch in letters)
    n_letters = max(1, len(letters))
    words = [w for w in _WORD.findall(text) if len(w) >= 3]
    mixed = sum(1 for w in words if _CYRILLIC.search(w) and _LATIN.search(w))
    tokens = _TOKEN.findall(text)
    one_letter = sum(1 for t in tokens if len(t) == 1 and t.isalpha())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line_counts = Counter(ln for ln in lines if len(ln) >= 3)
    repeated = sum(c for c in line_counts.values() if c >= 3)
    visible = [ch for ch in text if not ch.isspace()]
    punct = sum(1 for ch in visible if not ch.isalnum())
    return {
        "chars": float(len(visible)),
        "cyrillic_share": scripts["cyrillic"] / n_letters,
        "foreign_script_share": (n_letters - scripts["cyrillic"] - scripts["latin"]) / n_letters if letters else 0.0,
        "mixed_script_share": mixed / len(words) if words else 0.0,
        "repeated_line_share": repeated / len(lines) if lines else 0.0,
        "empty_table_share": sum(1 for ln in lines if _EMPTY_TABLE_ROW.match(ln)) / len(lines) if lines else 0.0,
        "one_letter_share": one_letter / len(tokens) if len(tokens) >= 20 else 0.0,
        "punctuation_share": punct / len(visible) if visible else 0.0,
        "image_coverage": facts.image_coverage,
        "invisible_share": facts.invisible_share,
    }


def text_layer_quality(text: str, settings: Settings, facts: PageFacts | None = None) -> TextLayerQuality:
    """Score a page's text; `ok` only when no signal fails. An invisible layer (an earlier OCR) is suspect: it
    must meet stricter script thresholds to be trusted."""
    s = measure(text, facts or PageFacts())
    suspect = s["invisible_share"] >= 0.5
    min_cyrillic = settings.text_layer_min_cyrillic + (0.2 if suspect else 0.0)
    max_mixed = settings.text_layer_max_mixed_script / (2 if suspect else 1)
    reasons = []
    if s["chars"] < settings.text_layer_min_chars:
        reasons.append("too-little-text")
    elif (
        s["image_coverage"] >= settings.text_layer_image_coverage
        and s["chars"] < settings.text_layer_min_chars_on_image
    ):
        reasons.append("too-little-text-for-image")
    if s["chars"] >= settings.text_layer_min_chars:
        if s["cyrillic_share"] < min_cyrillic:
            reasons.append("low-cyrillic-share")
        if s["mixed_script_share"] > max_mixed:
            reasons.append("mixed-script-words")
        if s["foreign_script_share"] > settings.text_layer_max_foreign_script:
            reasons.append("unexpected-script")
        if s["repeated_line_share"] > settings.text_layer_max_repeated_lines:
            reasons.append("repeated-lines")
        if s["empty_table_share"] > settings.text_layer_max_empty_table:
            reasons.append("empty-table")
        if s["one_letter_share"] > settings.text_layer_max_one_letter:
            reasons.append("one-letter-tokens")
        if s["punctuation_share"] > settings.text_layer_max_punctuation:
            reasons.append("punctuation-density")
    if suspect and reasons:
        reasons.append("invisible-layer")
    penalty = (
        max(0.0, min_cyrillic - s["cyrillic_share"])
        + s["mixed_script_share"]
        + s["foreign_script_share"]
        + s["repeated_line_share"] / 2
        + s["empty_table_share"] / 2
        + max(0.0, s["one_letter_share"] - 0.1)
        + max(0.0, s["punctuation_share"] - 0.15)
    )
    score = 0.0 if s["chars"] < settings.text_layer_min_chars else max(0.0, 1.0 - penalty)
    return TextLayerQuality(
        ok=not reasons, score=round(score, 3), reasons=reasons, signals={k: round(v, 3) for k, v in s.items()}
    )

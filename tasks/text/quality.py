"""Text-layer quality detector: page text + page facts → score and reason codes. Pure; thresholds in settings.

It judges whether text is *garbage*, not which language it is in. Two kinds of reasons:
- **garbage** — certain signs of a broken layer: Latin look-alikes inside Cyrillic words («npoTOKon»), glyph codes
  of a font without a Unicode map («M]heh\\guc dh^_dk» for «Уголовный кодекс»), mojibake («Ð¡Ð¾», «РЎРѕ»),
  replacement characters, repeated or empty layers, letter-spaced noise. Such text is never indexed as it is.
- **suspect** — what a good layer can also look like: mostly Latin letters in a Russian corpus (an English
  article, or a Latin-only earlier OCR «Cl>opMa no KHA»), dense punctuation, a scan with a token layer, an
  invisible (earlier OCR) layer. A suspect layer is compared with the OCR of its page (`compare_with_ocr`); the
  better text wins, and where both agree the exact born-digital layer is kept.
Signals are computed on the layer as the PDF holds it (not on korpus's table serialisation). Thresholds and
signals: docs/ocr.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from korpus.core.settings import Settings

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_TOKEN = re.compile(r"\S+")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_LATIN = re.compile(r"[A-Za-z\u00C0-\u024F]")
_EMPTY_TABLE_ROW = re.compile(r"^[\s|:+\-_]*\|[\s|:+\-_]*$")
# Dot leaders and rules of a table of contents or a form: «Введение ........ 3», «Подпись ________».
_LEADER = re.compile(r"([.·…_\-‒–—=*])(?:\s?\1){2,}")
# A font without a Unicode map puts ASCII symbols where Cyrillic letters were: «M]heh\guc», «dh^_dk».
_GLYPH_CODE_IN_WORD = re.compile(r"[^\W\d_][\[\]\\^`@{}][^\W\d_]|[^\W\d_]\\|\^[^\W\d_]")
# Latin look-alikes for Cyrillic capitals inside lowercase words («npoTOKon», «MocKBa», «cocTaB»); camelCase
# identifiers («getValue») switch case once, to a capitalised part, and do not count.
_ADDRESS = re.compile(r"\w@\w|://|^www\.", re.IGNORECASE)  # e-mail addresses and URLs are not glyph codes
_CASE_FLIP = re.compile(r"[a-zа-яё][A-ZА-ЯЁ]{2}|[a-zа-яё][A-ZА-ЯЁ]$")
_LATIN1_MOJIBAKE = re.compile(r"[\u00C0-\u00FF]")
_CP1251_AS_UTF8 = re.compile(r"[РС][\u0400-\u040F\u0450-\u045F\u0490-\u04FF°±µ¶·»«‚„…†‡€‰‹›‘’“”•–—™]")

GARBAGE = frozenset(
    {
        "too-little-text",
        "mixed-script-words",
        "glyph-codes",
        "case-flips",
        "mojibake",
        "broken-encoding",
        "unexpected-script",
        "repeated-lines",
        "empty-table",
        "one-letter-tokens",
    }
)
"""Reasons that mean the text itself is broken; every other reason only makes a layer suspect."""


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

    @property
    def garbage(self) -> list[str]:
        return [r for r in self.reasons if r in GARBAGE]

    @property
    def readable(self) -> bool:
        """No sign of broken text: fine for OCR output and chunks, whatever the language."""
        return not self.garbage


def _script(ch: str) -> str:
    if _CYRILLIC.match(ch):
        return "cyrillic"
    if _LATIN.match(ch):
        return "latin"
    name = unicodedata.name(ch, "")
    return name.split(" ")[0].lower() or "unknown"


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def measure(text: str, facts: PageFacts) -> dict[str, float]:
    """Every signal, as a number, whether or not it fails."""
    letters = _LETTER.findall(text)
    scripts = Counter(_script(ch) for ch in letters)
    n_letters = len(letters)
    words = [w for w in _WORD.findall(text) if len(w) >= 3]
    mixed = sum(1 for w in words if _CYRILLIC.search(w) and _LATIN.search(w))
    tokens = _TOKEN.findall(text)
    wordlike = [t for t in tokens if sum(ch.isalpha() for ch in t) >= 3 and not _ADDRESS.search(t)]
    glyph_words = sum(1 for t in wordlike if _GLYPH_CODE_IN_WORD.search(t))
    one_letter = sum(1 for t in tokens if len(t) == 1 and t.isalpha())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line_counts = Counter(ln for ln in lines if len(ln) >= 15)  # table cells repeat by nature
    repeated = sum(c for c in line_counts.values() if c >= 3)
    visible = [ch for ch in _LEADER.sub(" ", text) if not ch.isspace()]
    punct = sum(1 for ch in visible if not ch.isalnum())
    return {
        "chars": float(sum(1 for ch in text if not ch.isspace())),
        "cyrillic_share": _share(scripts["cyrillic"], n_letters),
        "latin_share": _share(scripts["latin"], n_letters),
        "foreign_script_share": _share(n_letters - scripts["cyrillic"] - scripts["latin"], n_letters),
        "mixed_script_share": _share(mixed, len(words)),
        "glyph_code_share": _share(glyph_words, len(wordlike)),
        "glyph_code_words": float(glyph_words),
        "mixed_script_words": float(mixed),
        "case_flip_share": _share(sum(1 for w in words if _CASE_FLIP.search(w)), len(words)),
        "mojibake_share": _share(
            len(_LATIN1_MOJIBAKE.findall(text)) + 2 * len(_CP1251_AS_UTF8.findall(text)), n_letters
        ),
        "replacement_share": _share(
            sum(1 for ch in text if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\n\r\t\f")),
            max(1, len(visible)),
        ),
        "repeated_line_share": _share(repeated, len(lines)),
        "empty_table_share": _share(sum(1 for ln in lines if _EMPTY_TABLE_ROW.match(ln)), len(lines)),
        "one_letter_share": _share(one_letter, len(tokens)) if len(tokens) >= 20 else 0.0,
        "punctuation_share": _share(punct, len(visible)),
        "image_coverage": facts.image_coverage,
        "invisible_share": facts.invisible_share,
    }


def _reasons(s: dict[str, float], settings: Settings, suspect_layer: bool) -> list[str]:
    reasons = []
    if s["chars"] < settings.text_layer_min_chars:
        return ["too-little-text"]
    if (
        s["image_coverage"] >= settings.text_layer_image_coverage
        and s["chars"] < settings.text_layer_min_chars_on_image
    ):
        reasons.append("too-little-text-for-image")
    max_mixed = settings.text_layer_max_mixed_script / (2 if suspect_layer else 1)
    min_cyrillic = settings.text_layer_min_cyrillic + (0.2 if suspect_layer else 0.0)
    checks = (
        ("low-cyrillic-share", s["cyrillic_share"] < min_cyrillic),
        ("mixed-script-words", s["mixed_script_share"] > max_mixed),
        ("glyph-codes", s["glyph_code_share"] > settings.text_layer_max_glyph_codes),
        ("case-flips", s["case_flip_share"] > settings.text_layer_max_case_flips),
        ("mojibake", s["mojibake_share"] > settings.text_layer_max_mojibake),
        ("broken-encoding", s["replacement_share"] > 0.02),
        ("unexpected-script", s["foreign_script_share"] > settings.text_layer_max_foreign_script),
        ("repeated-lines", s["repeated_line_share"] > settings.text_layer_max_repeated_lines),
        ("empty-table", s["empty_table_share"] > settings.text_layer_max_empty_table),
        ("one-letter-tokens", s["one_letter_share"] > settings.text_layer_max_one_letter),
        ("punctuation-density", s["punctuation_share"] > settings.text_layer_max_punctuation),
    )
    reasons += [name for name, failed in checks if failed]
    if suspect_layer and reasons:
        reasons.append("invisible-layer")
    return reasons


def text_layer_quality(text: str, settings: Settings, facts: PageFacts | None = None) -> TextLayerQuality:
    """Score a page's text; `ok` only when no signal fails (a layer that is `ok` is kept without OCR).

    An invisible layer (an earlier OCR) is held to stricter script thresholds (Cyrillic +0.2, mixed ÷2)."""
    s = measure(text, facts or PageFacts())
    reasons = _reasons(s, settings, suspect_layer=s["invisible_share"] >= 0.5)
    penalty = (
        s["mixed_script_share"]
        + s["glyph_code_share"]
        + s["case_flip_share"]
        + s["mojibake_share"]
        + s["foreign_script_share"]
        + 10 * s["replacement_share"]
        + s["repeated_line_share"] / 2
        + s["empty_table_share"] / 2
        + max(0.0, s["one_letter_share"] - 0.1)
        + max(0.0, s["punctuation_share"] - 0.15)
    )
    score = 0.0 if s["chars"] < settings.text_layer_min_chars else max(0.0, 1.0 - penalty)
    return TextLayerQuality(
        ok=not reasons, score=round(score, 3), reasons=reasons, signals={k: round(v, 3) for k, v in s.items()}
    )


def text_language(text: str) -> str:
    """The script-level language of a text: `ru` (Cyrillic letters), `en` (Latin), `und` (no letters, or other)."""
    letters = _LETTER.findall(text)
    if not letters:
        return "und"
    scripts = Counter(_script(ch) for ch in letters)
    if scripts["cyrillic"] >= 0.3 * len(letters):
        return "ru"
    if scripts["latin"] >= 0.5 * len(letters):
        return "en"
    return "und"


_NORMAL_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def word_f1(a: str, b: str) -> float:
    """How much two readings of one page agree: F1 over their words (lowercased, ё as е), as multisets."""
    wa = Counter(w.replace("ё", "е") for w in _NORMAL_WORD.findall(a.lower()))
    wb = Counter(w.replace("ё", "е") for w in _NORMAL_WORD.findall(b.lower()))
    common = sum((wa & wb).values())
    total = sum(wa.values()) + sum(wb.values())
    return 2 * common / total if total else 1.0


def readings_agree(a: str, b: str, threshold: float) -> bool:
    """Two readings say the same words (F1 ≥ threshold) — and say some: two readings without a word (a layer of
    dingbats, a page OCR reads as blank) confirm nothing."""
    return bool(_NORMAL_WORD.search(a)) and bool(_NORMAL_WORD.search(b)) and word_f1(a, b) >= threshold

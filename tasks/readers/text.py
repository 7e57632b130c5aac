"""Plain text (.txt, .md): the whole file is page 1, decoded from whatever encoding it was saved in.

UTF-8 (with or without BOM) and UTF-16 with a BOM are taken as they are. Otherwise each single-byte Russian
encoding (cp1251, koi8-r, cp866, mac-cyrillic, iso-8859-5) is tried and scored by how Russian the result reads —
how many characters are ordinary Russian letters and punctuation, and how many letters are the ten
commonest lowercase ones (`russian_score`). A text no Cyrillic code page reads as Russian — a letter in English,
German or French (cp1252, latin-1, DOS cp850), Polish or Czech (cp1250, iso-8859-2), or a Russian text too short
to score — is read by chardet's guess or by korpus's own most plausible single-byte reading
(`plausible_code_page`), whichever reads more plausibly (`plausibility`: fewest symbols and control characters,
no words mixing Latin and Cyrillic letters, not mostly accented letters, which is what Cyrillic bytes read as
latin-1 look like). Only bytes no code page reads as text are `unreadable-file`, with the encodings tried.
"""

from __future__ import annotations

import codecs
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.base import ParseOutcome, UnreadableSourceError, problem, whole_file_page
from tasks.text.quality import text_layer_quality

SINGLE_BYTE = ("cp1251", "koi8_r", "cp866", "mac_cyrillic", "iso8859_5")
WESTERN = ("cp1252", "cp1250", "iso8859_2", "cp850", "latin_1")
"""Western and Central European code pages, tried after the Cyrillic ones, in this order on a tie."""
MAX_ODD_SHARE = 0.15  # a reading with more symbols and control characters than this among its visible ones is no text
_COMMON = set("оеаинтсрвл")
MIN_RUSSIAN_SCORE = 1.2


_PLAIN = set("абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ.,;:!?\"'()«»-–—№%/")


def russian_score(text: str) -> float:
    """How Russian a decoding reads: the share of characters that are Russian letters, ASCII or ordinary
    punctuation (a wrong code page turns capitals or dashes into ƒ, √, ћ), plus the share of the ten commonest
    lowercase letters among Cyrillic ones (koi8-r read as cp1251 comes out in capitals)."""
    visible = [ch for ch in text if not ch.isspace()]
    cyrillic = [ch for ch in visible if "\u0400" <= ch <= "\u04ff"]
    if not cyrillic:
        return 0.0
    plain = sum(1 for ch in visible if ch in _PLAIN or ch.isascii()) / len(visible)
    return plain + sum(1 for ch in cyrillic if ch in _COMMON) / len(cyrillic)


_GLUED_DASH = re.compile(r"[—–]\w")


def best_code_page(raw: bytes, order: tuple[str, ...] = SINGLE_BYTE) -> tuple[str, float]:
    """(code page, score) of the single-byte Russian code page that reads a short text (a header, a file name)
    best: fewest characters that are neither Russian letters, ASCII nor ordinary punctuation, then russian_score,
    then the order given. A dash glued to the letter after it counts as odd: on a short text russian_score alone
    can prefer mac-cyrillic, which turns cp1251's «С» into «—» («—мета»)."""

    def key(name: str) -> tuple[int, float]:
        text = raw.decode(name, "replace")
        odd = sum(1 for ch in text if not (ch in _PLAIN or ch.isascii() or ch.isspace()))
        odd += len(_GLUED_DASH.findall(text))
        return odd, -russian_score(text)

    best = min(order, key=key)
    return best, -key(best)[1]


_WORD = re.compile(r"[^\W\d_]+")
_LATIN = re.compile(r"[A-Za-z\u00C0-\u024F]")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_ORDINARY = set(".,;:!?\"'()[]«»„“”‘’-–—…№%/&@#*+=<>$€£§°")


def plausibility(text: str) -> tuple[float, float]:
    """How plausibly `text` is a text in some language, lower is better: (share of odd visible characters — symbols,
    control characters, a capital right after a small letter inside a word (koi8-r read as cp1251), a letter of
    neither the Latin nor the Cyrillic script (Russian bytes read as Greek: korpus reads those two) — plus words
    mixing Latin and Cyrillic letters, minus the share of letters)."""
    visible = [ch for ch in text if not ch.isspace()]
    if not visible:
        return (1.0, 0.0)
    odd = sum(1 for ch in visible if not (ch.isalnum() or ch in _ORDINARY))
    words = _WORD.findall(text)
    mixed = sum(1 for w in words if _LATIN.search(w) and _CYRILLIC.search(w))
    odd += sum(1 for w in words for a, b in pairwise(w) if a.islower() and b.isupper())  # «рТЙЧЕФ»
    latin = [ch for w in words for ch in w if _LATIN.match(ch)]
    accented = sum(1 for ch in latin if not ch.isascii())
    if latin and accented * 2 > len(latin):  # Cyrillic bytes read as a Western code page: «Ïðèêàç»
        odd += accented
    letters = sum(1 for ch in visible if ch.isalpha())
    odd += sum(1 for w in words for ch in w if not (_LATIN.match(ch) or _CYRILLIC.match(ch)))  # Greek from Cyrillic
    return ((odd + 2 * mixed) / len(visible), -letters / len(visible))


def plausible_code_page(raw: bytes, names: tuple[str, ...] = SINGLE_BYTE + WESTERN) -> tuple[str, float] | None:
    """(code page, share of odd characters) of the reading `plausibility` likes best; None if none decodes."""
    scored = []
    for order, name in enumerate(names):
        try:
            text = raw.decode(name)
        except UnicodeDecodeError:
            continue
        scored.append((plausibility(text), order, name))
    if not scored:
        return None
    (odd, _letters), _order, name = min(scored)
    return name, odd


def decode_text(raw: bytes) -> tuple[str, str]:
    """(text, encoding) — or UnreadableSourceError naming every encoding tried."""
    for bom, name in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if raw.startswith(bom):
            try:
                return raw.decode(name), name
            except UnicodeDecodeError:
                break
    if b"\x00" in raw:  # no text encoding korpus reads has NUL bytes outside UTF-16: an executable, an archive
        raise UnreadableSourceError("binary data (NUL bytes), not text: a misnamed file")
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    readable = []
    for name in SINGLE_BYTE:
        try:
            text = raw.decode(name)
        except UnicodeDecodeError:
            continue
        if text_layer_quality(text, Settings.model_construct()).readable:
            readable.append(name)
    best, score = best_code_page(raw, tuple(readable)) if readable else ("", 0.0)
    if score >= MIN_RUSSIAN_SCORE:
        return raw.decode(best), best
    # not Russian enough to tell by Russian: a Western letter, a short note — chardet's guess or korpus's own
    # plausible reading, whichever reads more plausibly (chardet on a tie: benchmarks/encodings.py)
    readings = []
    for rank, name in enumerate((_chardet_guess(raw), (plausible_code_page(raw) or (None,))[0])):
        if name is None:
            continue
        try:
            readings.append((plausibility(raw.decode(name))[0], rank, name))  # odd share; a tie: chardet
        except (LookupError, UnicodeDecodeError):
            continue
    if not readings or min(readings)[0] > MAX_ODD_SHARE:
        tried = ", ".join(("utf-8", "utf-16 (BOM)", *SINGLE_BYTE, *WESTERN, "chardet's guess"))
        raise UnreadableSourceError(f"no encoding reads it as text (tried {tried})")
    name = min(readings)[2]
    return raw.decode(name), name


def _chardet_guess(raw: bytes) -> str | None:
    """chardet's code page when it is one a Russian office share holds (not EBCDIC, Greek or Hebrew ones)."""
    import chardet

    name = chardet.detect(raw).get("encoding")
    try:
        return name if name and codecs.lookup(name).name in _EXPECTED else None
    except LookupError:
        return None


_EXPECTED = {codecs.lookup(name).name for name in (*SINGLE_BYTE, *WESTERN, "utf-8", "ascii")}


class TextReader:
    kind = SourceKind.text
    suffixes = (".txt", ".md")

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        outcome = ParseOutcome(page_count=1)
        try:
            text, encoding = decode_text(Path(source.path).read_bytes())
        except UnreadableSourceError as exc:
            outcome.problems.append(problem(source, ReasonCode.unreadable_file, str(exc)))
            return outcome
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        outcome.pages.append(
            whole_file_page(source, text, "plain-text", encoding, markdown=source.path.lower().endswith(".md"))
        )
        return outcome

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        raise UnreadableSourceError("a text file has no page images")

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None

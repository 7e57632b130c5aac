"""How a letter's header and body bytes become text, whatever the producer did (tasks/readers/mail.py reads the
letters): RFC 2047 encoded words — a character split across two words, words folded over lines —, raw 8-bit
headers in UTF-8, cp1251 or koi8-r, RFC 2231 parameters, UTF-8 cut mid-character."""

from __future__ import annotations

import base64
import binascii
import quopri
import re
from datetime import datetime
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

from tasks.readers.text import best_code_page

_WORD = re.compile(rb"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=")
_BETWEEN_WORDS = re.compile(rb"^\s*$")


def decode_bytes(raw: bytes, declared: str | None = None) -> str:
    """Bytes of a header or body: the declared charset when it reads them, else UTF-8, else the single-byte
    Cyrillic code page that reads most like Russian. A character cut at the end (`\\ufffd`) is dropped."""
    for name in (declared, "utf-8"):
        if not name:
            continue
        try:
            return raw.decode(_charset(name))
        except (LookupError, UnicodeDecodeError):
            continue
    if raw.isascii():
        return raw.decode("ascii")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # UTF-8 cut mid-character (a name truncated by the sending program)
        if exc.reason == "unexpected end of data" and exc.start >= len(raw) - 3:
            try:
                return raw[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                pass
    best, score = best_code_page(raw)
    if score >= 1.0:
        return raw.decode(best, "replace")
    return raw.decode("utf-8", "replace").rstrip("\ufffd")


def _charset(name: str) -> str:
    name = name.strip().strip('"').lower()
    aliases = {"win-1251": "cp1251", "windows-1251": "cp1251", "x-user-defined": "cp1251", "koi8": "koi8_r"}
    return aliases.get(name, name)


def decode_header(value: Any) -> str:
    """A header's text: encoded words decoded (adjacent words of one charset joined as bytes first, so a character
    split between them survives), raw 8-bit runs decoded as decode_bytes does, folding removed."""
    if value is None:
        return ""
    raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
    raw = re.sub(rb"\r?\n[ \t]", b" ", raw)
    out: list[str] = []
    pending: tuple[str, bytes] | None = None  # (charset, bytes) of encoded words not yet decoded
    last = 0
    for match in _WORD.finditer(raw):
        between = raw[last : match.start()]
        if pending is not None and not _BETWEEN_WORDS.match(between):
            out.append(decode_bytes(pending[1], pending[0]))
            pending = None
        if pending is None and between:
            out.append(decode_bytes(between))
        charset = match[1].decode("ascii", "replace").split("*")[0]  # RFC 2231 language: utf-8*ru
        data = _word_bytes(match[2].upper(), match[3])
        if pending is not None and pending[0].lower() == charset.lower():
            pending = (charset, pending[1] + data)
        else:
            if pending is not None:
                out.append(decode_bytes(pending[1], pending[0]))
            pending = (charset, data)
        last = match.end()
    if pending is not None:
        out.append(decode_bytes(pending[1], pending[0]))
    if raw[last:]:
        out.append(decode_bytes(raw[last:]))
    return " ".join("".join(out).replace("\ufffd", " ").split())


def _word_bytes(encoding: bytes, text: bytes) -> bytes:
    if encoding == b"B":
        try:
            return base64.b64decode(text + b"=" * (-len(text) % 4))
        except binascii.Error:
            return text
    return quopri.decodestring(text.replace(b"_", b" "), header=True)


def people(values: list[str]) -> list[tuple[str, str]]:
    """(name, address) of everyone a From/To/Cc header names, names decoded."""
    decoded = [decode_header(v) for v in values if v]
    return [(name.strip("\"' "), address) for name, address in getaddresses(decoded) if name or address]


def who(people: list[tuple[str, str]]) -> str:
    return ", ".join(
        f"{name} <{address}>" if name and address and name != address else name or address for name, address in people
    )


def short_who(people: list[tuple[str, str]]) -> str:
    if not people:
        return "?"
    name, address = people[0]
    more = f" и ещё {len(people) - 1}" if len(people) > 1 else ""
    return (name or address) + more


def header_date(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return parsedate_to_datetime(decode_header(value)) if value else None
    except (TypeError, ValueError, IndexError):
        return None

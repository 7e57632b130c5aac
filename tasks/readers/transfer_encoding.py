"""Base64 as a mail client meets it: lines of a fixed length, sometimes damaged on the way — a character lost, one
added, a stray `=` in the middle. Every 4-character group that arrived intact decodes to its bytes.

MIME encoders write lines whose length is a multiple of 4 (76 characters: 57 bytes), so each line decodes on its own
and damage stays in the line it is in. A line of the wrong length (a character lost or added somewhere in it) is
decoded from both ends: the groups before the damage line up from its start, those after it from its end, and a
decoder cannot tell where in the line the damage sits, so both readings are kept (a damaged line gives up to twice
its bytes, some of them wrong — never fewer of the right ones). Characters outside the alphabet are dropped, as
every decoder does; an `=` before the last line is such a character. A part none of whose lines (but its last) is
a multiple of 4 long — an unusual encoder's — is decoded as one stream, where only its end can be repaired.

`email`'s own decoder (`get_payload(decode=True)`) decodes the whole part in one stream: damage early in a part
shifts every group after it. benchmarks/readers.py measures both over corruptions of real attachments.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

_OUTSIDE = re.compile(r"[^A-Za-z0-9+/=]")


@dataclass
class Damage:
    """What a tolerant decode found wrong with a part, for the record its member keeps."""

    lines: list[int] = field(default_factory=list)
    """Line numbers (from 1) whose length was wrong or that held an `=` before the end."""
    lost_tail: int = 0
    """Characters at the very end that made no whole byte."""

    def __bool__(self) -> bool:
        return bool(self.lines or self.lost_tail)

    def describe(self) -> str:
        parts = []
        if self.lines:
            shown = ", ".join(map(str, self.lines[:10])) + (" …" if len(self.lines) > 10 else "")
            parts.append(f"base64 damaged in {len(self.lines)} line(s) ({shown}): decoded from both ends of each")
        if self.lost_tail:
            parts.append(f"{self.lost_tail} character(s) at its end made no whole byte")
        return "; ".join(parts)


def _groups(text: str) -> bytes:
    """Whole 4-character groups, no padding expected."""
    whole = len(text) - len(text) % 4
    return binascii.a2b_base64(text[:whole]) if whole else b""


def _last(text: str, damage: Damage) -> bytes:
    """The final characters of a part: 2 or 3 make one or two bytes (padded or not); 1 makes none."""
    whole = len(text) - len(text) % 4
    rest = text[whole:]
    if len(rest) == 1:
        damage.lost_tail += 1
        rest = ""
    return _groups(text[:whole]) + (binascii.a2b_base64(rest + "=" * (-len(rest) % 4)) if rest else b"")


def _line(text: str, number: int, final: bool, damage: Damage) -> bytes:
    """One line of a part whose lines are a multiple of 4 long."""
    data = text.rstrip("=")
    padded = len(text) - len(data)
    if "=" in data:  # an `=` before the end: a stray character, dropped (what follows keeps its alignment)
        damage.lines.append(number)
        data = data.replace("=", "")
    if len(data) % 4 == 0:
        return _groups(data)
    cut = len(data) % 4
    if final and padded == 4 - cut:  # the part's end, padded as it should be
        return _last(data, damage)
    if number not in damage.lines:
        damage.lines.append(number)
    left = _last(data, damage) if final else _groups(data[: len(data) - cut])
    whole = data + "=" * padded  # from the end: the part's last group keeps its padding
    return left + _right(whole[len(whole) % 4 :])


def _right(text: str) -> bytes:
    """Groups aligned to the end of a line (its padding, if any, closing the last one)."""
    try:
        return binascii.a2b_base64(text) if text else b""
    except binascii.Error:  # padding where a group does not allow it: the groups before it
        return _groups(text.rstrip("="))


def decode_base64(raw: str, damage: Damage, block: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of a base64 part, about `block` bytes at a time, every intact group decoded; what was wrong goes
    in `damage`."""
    lines = [_OUTSIDE.sub("", line) for line in raw.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        return
    if lines[:-1] and all(len(line) % 4 for line in lines[:-1]):  # an encoder of its own line length: one stream
        stream = "".join(lines)
        data = stream.rstrip("=")
        if "=" in data:
            damage.lines.append(0)
            data = data.replace("=", "")
        step = block // 3 * 4
        for start in range(0, len(data), step):
            piece = data[start : start + step]
            yield _last(piece, damage) if start + step >= len(data) else _groups(piece)
        return
    out = bytearray()
    for number, line in enumerate(lines, start=1):
        out += _line(line, number, number == len(lines), damage)
        if len(out) >= block:
            yield bytes(out)
            out.clear()
    if out:
        yield bytes(out)

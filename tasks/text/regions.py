"""Where a chunk's words are on its page: word boxes aligned to the page text, kept compactly, and a chunk's
regions (one rectangle per line it covers) cut out of them.

A page that has a picture behind it (a PDF page, a scan, a photo, a DjVu page, an office file's converted PDF)
carries `PageResult.boxes`: every word the reader placed, as (start, end) offsets into the page text and a box in
the page's own points (origin top-left, the page as stored — a scan OCR'd after turning it upright has its boxes
turned back), with a line number. The boxes are sorted by offset, so a chunk's words are one contiguous range of
them. They are bound to the exact text they were aligned with (its CRC-32 is stored with them): a text changed
afterwards (a reviewer's edit) has no boxes, and its chunks say so by having no regions.

Alignment needs no help from the text's builder: the runs of words the reader's list and the text share in the
same order are paired first (difflib); a token left over takes the free word of the same spelling (exactly, then
case- and punctuation-blind) nearest to where its predecessor's word is (blocks the text moved, a table rebuilt as
rows), or the two halves of a word hyphenated over a line end; a token the text repeats (a table header written
twice) shares its word. A token matched by neither has no box; a line's other words still
mark the line.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import NamedTuple

import numpy as np

from korpus.core.datamodel import PageResult, PageWord, Region

_TOKEN = re.compile(r"\S+")
_NOT_WORD = re.compile(r"[\W_]+")
_HYPHENS = "-\u00ad\u2010\u2011"
_SCALE = 10  # boxes are kept to 0.1 pt
_COLUMNS = 7  # start, end, x0, y0, x1, y1, line


class Box(NamedTuple):
    """A word as a reader placed it: its text, its box in points and its line."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    line: int


def _norm(word: str) -> str:
    return _NOT_WORD.sub("", word.casefold()).replace("ё", "е")


def _nearest(candidates: list[int], after: int) -> int:
    return min(candidates, key=lambda i: abs(i - after - 1))


def align(text: str, words: Sequence[Box]) -> list[tuple[int, int, Box]]:
    """(start, end, word) for each word found in `text`, sorted by offset."""
    tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]
    placed: list[list[int]] = [[] for _ in tokens]  # the words each token was given
    used: set[int] = set()
    runs = SequenceMatcher(None, [w.text for w in words], [t[2] for t in tokens], autojunk=False)
    for first_word, first_token, size in runs.get_matching_blocks():
        for k in range(size):
            placed[first_token + k].append(first_word + k)
            used.add(first_word + k)
    halves = {
        _norm(w.text.rstrip(_HYPHENS)) + _norm(words[i + 1].text): i
        for i, w in enumerate(words[:-1])
        if w.text[-1:] in _HYPHENS
    }
    passes: list[tuple[Callable[[str], str], bool]] = [(str, False), (_norm, False), (str, True), (_norm, True)]
    for key, reuse in passes:  # free words first; then a word the text repeats (a table's header) is shared
        by_key: dict[str, list[int]] = defaultdict(list)
        for i, w in enumerate(words):
            by_key[key(w.text)].append(i)
        last = -1
        for t, (_s, _e, token) in enumerate(tokens):
            if placed[t]:
                last = placed[t][-1]
                continue
            candidates = [i for i in by_key.get(key(token), ()) if reuse or i not in used]
            if candidates:
                placed[t] = [_nearest(candidates, last)]
            elif not reuse and (i := halves.get(_norm(token))) is not None and {i, i + 1}.isdisjoint(used):
                placed[t] = [i, i + 1]  # «сло-» + «во» for «слово»
            used.update(placed[t])
            last = placed[t][-1] if placed[t] else last
    rows = [(s, e, words[i]) for (s, e, _), found in zip(tokens, placed, strict=True) for i in found]
    return sorted(rows, key=lambda r: (r[0], r[2].y0, r[2].x0))


def unturn(box: Box, degrees: int, width: float, height: float) -> Box:
    """A box read on the page turned `degrees` clockwise, back on the page as stored (`width` × `height` points)."""
    corners = [(box.x0, box.y0), (box.x1, box.y1)]
    if degrees % 360 == 90:
        back = [(y, height - x) for x, y in corners]
    elif degrees % 360 == 180:
        back = [(width - x, height - y) for x, y in corners]
    elif degrees % 360 == 270:
        back = [(width - y, x) for x, y in corners]
    else:
        return box
    xs, ys = [p[0] for p in back], [p[1] for p in back]
    return box._replace(x0=min(xs), y0=min(ys), x1=max(xs), y1=max(ys))


def encode(text: str, aligned: list[tuple[int, int, Box]]) -> str:
    """The compact form kept on the page: CRC-32 of the text, then int32 rows, zlib, base64."""
    if not aligned:
        return ""
    rows = np.array(
        [
            (s, e, round(b.x0 * _SCALE), round(b.y0 * _SCALE), round(b.x1 * _SCALE), round(b.y1 * _SCALE), b.line)
            for s, e, b in aligned
        ],
        dtype="<i4",
    )
    head = np.array([zlib.crc32(text.encode("utf-8"))], dtype="<u4").tobytes()
    return base64.b64encode(zlib.compress(head + rows.tobytes(), 6)).decode("ascii")


def decode(text: str, boxes: str) -> np.ndarray | None:
    """The rows of `boxes`, or None when there are none or they were aligned with another text."""
    if not boxes:
        return None
    raw = zlib.decompress(base64.b64decode(boxes))
    if int(np.frombuffer(raw[:4], dtype="<u4")[0]) != zlib.crc32(text.encode("utf-8")):
        return None
    return np.frombuffer(raw[4:], dtype="<i4").reshape(-1, _COLUMNS)


def page_boxes(text: str, words: Sequence[Box], rotation: int = 0, size: tuple[float, float] | None = None) -> str:
    """A reader's words as `PageResult.boxes` for `text`; `rotation`: how far the page was turned to read them."""
    if rotation % 360 and size:
        words = [unturn(w, rotation, *size) for w in words]
    return encode(text, align(text, words))


def ocr_boxes(text: str, words: Sequence[PageWord], rotation: int, size: tuple[float, float] | None) -> str:
    """An OCR engine's words (PageWord, upright page) as `PageResult.boxes` on the page as stored."""
    return page_boxes(text, [Box(w.text, w.x0, w.y0, w.x1, w.y1, w.line) for w in words], rotation, size)


def regions(page: PageResult, start: int, end: int) -> list[Region]:
    """The chunk at [start, end) of `page.text`: one rectangle per line of its words, in reading order. A page
    with an image but no word boxes (a VLM reading without boxes) gives the whole page, marked as such; a page
    without geometry (a text file, a recording) or whose text changed since its boxes were kept gives none."""
    if page.page is None or page.size is None:
        return []
    width, height = page.size
    rows = decode(page.text, page.boxes)
    if rows is None:
        if page.boxes or page.method == "text-layer":
            return []
        return [Region(page=page.page, x0=0, y0=0, x1=width, y1=height, width=width, height=height, whole_page=True)]
    chosen = rows[(rows[:, 0] < end) & (rows[:, 1] > start)]
    lines: dict[int, list[float]] = {}
    for _s, _e, x0, y0, x1, y1, line in chosen.tolist():
        box = lines.setdefault(line, [x0, y0, x1, y1])
        box[:] = [min(box[0], x0), min(box[1], y0), max(box[2], x1), max(box[3], y1)]
    return [
        Region(
            page=page.page,
            x0=b[0] / _SCALE,
            y0=b[1] / _SCALE,
            x1=b[2] / _SCALE,
            y1=b[3] / _SCALE,
            width=width,
            height=height,
        )
        for b in lines.values()
    ]


def pack(found: Sequence[Region]) -> str | None:
    """A chunk's regions as the index stores them: `[[page, x0, y0, x1, y1, width, height, whole], …]`."""
    if not found:
        return None
    return json.dumps(
        [[r.page, r.x0, r.y0, r.x1, r.y1, round(r.width, 1), round(r.height, 1), int(r.whole_page)] for r in found],
        separators=(",", ":"),
    )


def unpack(stored: str | None) -> list[dict]:
    """The stored regions as a hit gives them."""
    if not stored:
        return []
    fields = ("page", "x0", "y0", "x1", "y1", "width", "height")
    return [{**dict(zip(fields, row[:7], strict=True)), "whole_page": bool(row[7])} for row in json.loads(stored)]

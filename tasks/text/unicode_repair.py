"""Repair the text of visible glyphs drawn with a font that has no Unicode map («M]heh\\guc dh^_dk»).

Such a page looks right and reads wrong: each glyph's one-byte code is read as a Latin character. OCR has read the
same page, with word boxes; where an OCR word and the glyphs under its box have the same length, each glyph code
is paired with the letter OCR saw there. Over all replaced pages of a document the votes give one code → letter
map (majority, at least 60 %; the fonts of one broken document share their generator's encoding), written as
the ToUnicode CMap of each one-byte font on those pages. When the learned maps cover nearly
every glyph on a page, that page needs no extra invisible layer: its own glyphs now read as Cyrillic, at their
exact places, and the file grows by a few hundred bytes instead of an embedded font. Codes never learned read as
spaces (digits as digits), so no old garbage survives.
"""

from __future__ import annotations

from collections import Counter

import pymupdf

from korpus.core.datamodel import PageWord

MIN_SHARE = 0.6
MIN_COVERAGE = 0.97
"""A page is repaired in place only when learned codes cover this share of its glyphs."""

Votes = dict[int, Counter[str]]  # code → letters OCR saw


def _code(ucs: int) -> int | None:
    """The one-byte code behind a character MuPDF decoded through WinAnsi (no ToUnicode)."""
    if ucs < 256:
        return ucs
    try:
        return chr(ucs).encode("cp1252")[0]
    except UnicodeEncodeError:
        return None


def _glyphs(page: pymupdf.Page) -> list[tuple[int, pymupdf.Rect]]:
    """(code, box) of every visible, non-space glyph."""
    out = []
    for span in page.get_texttrace():
        if span["type"] == 3:
            continue
        for ucs, _gid, _origin, bbox in span["chars"]:
            code = _code(ucs)
            if code is not None and not chr(ucs).isspace():
                out.append((code, pymupdf.Rect(bbox)))
    return out


def collect_votes(page: pymupdf.Page, words: list[PageWord], votes: Votes) -> None:
    glyphs = _glyphs(page)
    for word in words:
        box = pymupdf.Rect(word.x0 - 1, word.y0 - 1, word.x1 + 1, word.y1 + 1)
        inside = sorted(
            (g for g in glyphs if box.contains(pymupdf.Point((g[1].x0 + g[1].x1) / 2, (g[1].y0 + g[1].y1) / 2))),
            key=lambda g: g[1].x0,
        )
        if inside and len(inside) == len(word.text):
            for (code, _), letter in zip(inside, word.text, strict=True):
                votes.setdefault(code, Counter())[letter] += 1


def learned_map(votes: Votes) -> dict[int, str]:
    learned = {}
    for code, letters in votes.items():
        letter, n = letters.most_common(1)[0]
        if n / sum(letters.values()) >= MIN_SHARE:
            learned[code] = letter
    return learned


def coverage(page: pymupdf.Page, learned: dict[int, str]) -> float:
    glyphs = _glyphs(page)
    if not glyphs:
        return 0.0
    return sum(1 for code, _ in glyphs if code in learned) / len(glyphs)


def to_unicode_cmap(mapping: dict[int, str]) -> bytes:
    """A ToUnicode CMap for a one-byte font: learned codes to their letters, unlearned digits to themselves (a
    broken font's digit codes are digits: its letters sit elsewhere), every other code to a space."""
    entries = [(code, mapping.get(code, chr(code) if 0x30 <= code <= 0x39 else " ")) for code in range(256)]
    blocks = []
    for lo in range(0, 256, 100):
        part = entries[lo : lo + 100]
        lines = "".join(f"<{code:02X}> <{''.join(f'{ord(ch):04X}' for ch in text)}>\n" for code, text in part)
        blocks.append(f"{len(part)} beginbfchar\n{lines}endbfchar\n")
    return (
        "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /korpus-repaired def /CMapType 2 def\n"
        "1 begincodespacerange <00> <FF> endcodespacerange\n" + "".join(blocks) + "endcmap CMapName currentdict "
        "/CMap defineresource pop end end\n"
    ).encode("ascii")


def set_to_unicode(doc: pymupdf.Document, font_xref: int, cmap: bytes, shared: dict[bytes, int]) -> None:
    """Point the font at a ToUnicode stream; fonts with identical maps share one stream object."""
    xref = shared.get(cmap)
    if xref is None:
        xref = doc.get_new_xref()
        doc.update_object(xref, "<<>>")
        doc.update_stream(xref, cmap)
        shared[cmap] = xref
    doc.xref_set_key(font_xref, "ToUnicode", f"{xref} 0 R")

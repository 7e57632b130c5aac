"""The font of korpus's invisible text layers: a glyph for every character it may write, none of them drawn.

An invisible layer (render mode 3) needs character codes, widths and a Unicode map — never outlines. A real font
(DejaVu Sans, the first choice) embedded a ~16-40 KB subset per document: +30 % on a small file with one scanned
page. This one is built once per process with fontTools: empty glyphs for Latin, Cyrillic, Greek, punctuation,
currency, letterlike and math symbols, 500 units wide (each line is scaled to its OCR box anyway). PyMuPDF embeds
the used subset with a ToUnicode map, so pdftotext, search and copy-paste read the text; a whole document's font
costs about a kilobyte.
"""

from __future__ import annotations

import io
from functools import lru_cache

import pymupdf
from fontTools.fontBuilder import FontBuilder
from fontTools.pens.ttGlyphPen import TTGlyphPen

RANGES = ((0x20, 0x7F), (0xA0, 0x250), (0x370, 0x530), (0x2000, 0x2300))
"""Latin with its supplements and extensions, Greek, Cyrillic (with supplement), punctuation → math operators."""


def invisible_font_bytes() -> bytes:
    chars = [c for lo, hi in RANGES for c in range(lo, hi)]
    names = [".notdef", *(f"u{c:04X}" for c in chars)]
    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap({c: f"u{c:04X}" for c in chars})
    empty = TTGlyphPen(None).glyph()
    builder.setupGlyf(dict.fromkeys(names, empty))
    builder.setupHorizontalMetrics(dict.fromkeys(names, (500, 0)))
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": "KorpusInvisible", "styleName": "Regular"})
    builder.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    builder.setupPost()
    out = io.BytesIO()
    builder.save(out)
    return out.getvalue()


@lru_cache(maxsize=1)
def invisible_font() -> pymupdf.Font:
    return pymupdf.Font(fontbuffer=invisible_font_bytes())

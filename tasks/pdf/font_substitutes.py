"""Metric-compatible substitutes for the fonts a kept born-digital page draws with but its source did not embed.

PDF/A needs every font program inside the file. Word and old PDF tools leave the common faces out: a real Russian
office PDF draws its spaces, digits and Latin letters with an unembedded `Times New Roman` or `Arial` (a simple
TrueType font, WinAnsi), beside the embedded CID fonts of its Cyrillic; old tools draw with `Helvetica`. A viewer
shows such a page with a substitute of its own choosing. korpus embeds the substitute a viewer would take, chosen so
the page does not move: Liberation 2 (Debian's `fonts-liberation2`, SIL OFL), whose Sans, Serif and Mono have the
advance widths of Arial/Helvetica, Times New Roman/Times and Courier New/Courier glyph for glyph.

Only what cannot move a glyph or change the text is done:
- a simple font (Type1 or TrueType) of one of those families, whose codes reach glyphs by name or Unicode (a standard
  encoding, or Differences of Adobe glyph names) — the codes, so the text extracted from the page, stay as they were;
- every glyph keeps the width the page was laid out with: the font dictionary's widths, or for one of the standard 14
  (which has none) the standard metrics every viewer uses (MuPDF's URW clones of Adobe's faces). The embedded subset
  takes those widths for its glyphs — where Liberation's own differs (Helvetica's `·` is 278/1000 em, Arial's 333),
  the page's win, so the dictionary and the program agree (PDF/A §6.2.11.5) and no glyph moves;
- every code the font gives a width must have a glyph in the face, or the font is left alone;
- the font becomes a non-symbolic TrueType font with a WinAnsi base encoding (PDF/A-2 §6.2.11.6: a Unicode cmap,
  glyph names from the Adobe Glyph List).
Anything else — another family, a CID font, a symbolic encoding, a glyph the face lacks — is left as it is, and the
copy stays plain PDF saying which fonts (tasks/pdf/pdfa.py). Ghostscript's PDF/A conversion substitutes too, but
rewrites every page and garbled the invisible Cyrillic layer when tried.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pikepdf
import pymupdf
from fontTools import agl, subset
from fontTools.encodings.StandardEncoding import StandardEncoding
from fontTools.ttLib import TTFont

LIBERATION = Path("/usr/share/fonts/truetype/liberation2")
"""Where Debian's fonts-liberation2 puts the substitutes (make setup installs it)."""
FAMILIES = (
    (re.compile(r"courier", re.I), "LiberationMono"),
    (re.compile(r"times|tms ?rmn|liberation ?serif|roman", re.I), "LiberationSerif"),
    (re.compile(r"arial|helvetica|helv|liberation ?sans", re.I), "LiberationSans"),
)
"""A font's base name → the Liberation family with its widths (Times New Roman before the plain 'roman' fallback)."""
STANDARD_14 = {
    "Helvetica": "helv",
    "Helvetica-Bold": "hebo",
    "Helvetica-Oblique": "heit",
    "Helvetica-BoldOblique": "hebi",
    "Times-Roman": "tiro",
    "Times-Bold": "tibo",
    "Times-Italic": "tiit",
    "Times-BoldItalic": "tibi",
    "Courier": "cour",
    "Courier-Bold": "cobo",
    "Courier-Oblique": "coit",
    "Courier-BoldOblique": "cobi",
}
"""The standard fonts a PDF may draw with without widths of its own → MuPDF's face of the same metrics."""
BASE_ENCODINGS = {"/WinAnsiEncoding": "cp1252", "/MacRomanEncoding": "mac_roman"}
_WINANSI_BULLETS = {127, 129, 141, 143, 144, 157}
"""Codes WinAnsiEncoding draws as a bullet where cp1252 defines nothing (PDF 1.7, Annex D, note 6)."""


@dataclass(frozen=True)
class Substitute:
    """A face of Liberation 2: its file and its advance widths per Unicode character, in 1/1000 em."""

    path: Path
    widths: dict[int, int]
    descriptor: dict[str, int | float | list[int]]
    units: int
    """units per em"""


def substitute_fonts(pdf: pikepdf.Pdf, folder: Path = LIBERATION) -> set[str]:
    """Embed a metric-compatible substitute in every unembedded simple font of `pdf` that can take one, in place;
    the base names of the unembedded fonts left (none: the file's fonts are all embedded now)."""
    return {name for name, font in _unembedded(pdf) if not _substitute(pdf, font, folder)}


def unembedded_fonts(pdf: pikepdf.Pdf) -> set[str]:
    """The base names of the fonts of `pdf` whose programs are not in the file."""
    return {name for name, _font in _unembedded(pdf)}


def _unembedded(pdf: pikepdf.Pdf) -> list[tuple[str, pikepdf.Dictionary]]:
    """The fonts whose programs are not in the file, with their base names. A Type 3 font draws with the file's own
    content streams and needs none; a CIDFont is judged through the Type0 font that uses it."""
    found = []
    for obj in list(pdf.objects):
        if not isinstance(obj, pikepdf.Dictionary) or obj.get("/Type") != pikepdf.Name.Font:
            continue
        subtype = obj.get("/Subtype")
        if subtype in (pikepdf.Name.Type3, pikepdf.Name.CIDFontType0, pikepdf.Name.CIDFontType2):
            continue
        font = obj.DescendantFonts[0] if subtype == pikepdf.Name.Type0 else obj
        descriptor = font.get("/FontDescriptor")
        if descriptor is None or not any(k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3")):
            found.append((str(obj.get("/BaseFont", "unnamed")).lstrip("/"), obj))
    return found


def face_of(base_font: str, descriptor: pikepdf.Dictionary | None, folder: Path = LIBERATION) -> Path | None:
    """The Liberation file standing in for a font of this base name (its style from the name, else the descriptor's
    weight and angle), or None for a family Liberation has no widths of."""
    family = next((name for pattern, name in FAMILIES if pattern.search(base_font)), None)
    if family is None:
        return None
    bold = bool(re.search(r"bold|black|heavy|,bd|-bd", base_font, re.I))
    italic = bool(re.search(r"italic|oblique|,it|-it", base_font, re.I))
    if descriptor is not None:
        bold = (
            bold or int(descriptor.get("/FontWeight", 400)) >= 600 or bool(int(descriptor.get("/Flags", 0)) >> 18 & 1)
        )
        italic = italic or float(descriptor.get("/ItalicAngle", 0)) != 0
    style = {(False, False): "Regular", (True, False): "Bold", (False, True): "Italic", (True, True): "BoldItalic"}
    path = folder / f"{family}-{style[bold, italic]}.ttf"
    return path if path.is_file() else None


@lru_cache(maxsize=16)
def _face(path: Path) -> Substitute:
    font = TTFont(path, lazy=True)
    scale = 1000 / font["head"].unitsPerEm
    hmtx = font["hmtx"]
    widths = {uni: round(hmtx[glyph][0] * scale) for uni, glyph in font.getBestCmap().items()}
    head, hhea, os2, post = font["head"], font["hhea"], font["OS/2"], font["post"]
    descriptor = {
        "/FontBBox": [round(v * scale) for v in (head.xMin, head.yMin, head.xMax, head.yMax)],
        "/Ascent": round(hhea.ascent * scale),
        "/Descent": round(hhea.descent * scale),
        "/CapHeight": round(getattr(os2, "sCapHeight", hhea.ascent) * scale),
        "/ItalicAngle": float(post.italicAngle),
        "/StemV": 80 if os2.usWeightClass < 600 else 140,
    }
    return Substitute(path, widths, descriptor, font["head"].unitsPerEm)


def code_points(font: pikepdf.Dictionary) -> dict[int, int] | None:
    """Code → Unicode for a simple font's codes: its base encoding (WinAnsi, MacRoman; Standard when none is named)
    with its Differences. None when a code reaches its glyph otherwise (a symbolic font's own encoding, a glyph name
    outside the Adobe Glyph List)."""
    encoding = font.get("/Encoding")
    base, differences = encoding, None
    if isinstance(encoding, pikepdf.Dictionary):
        base, differences = encoding.get("/BaseEncoding"), encoding.get("/Differences")
    if base is None:
        if font.get("/Subtype") == pikepdf.Name.TrueType:
            return None  # a TrueType font without an encoding reaches glyphs through its own cmap
        mapping = {code: ord(agl.toUnicode(name)) for code, name in enumerate(StandardEncoding) if name != ".notdef"}
    elif str(base) in BASE_ENCODINGS:
        mapping = {}
        for code in range(32, 256):
            char = bytes([code]).decode(BASE_ENCODINGS[str(base)], errors="ignore")
            if char:
                mapping[code] = ord(char)
            elif str(base) == "/WinAnsiEncoding" and code in _WINANSI_BULLETS:
                mapping[code] = 0x2022
    else:
        return None
    code = 0
    for item in differences or []:
        if isinstance(item, int):
            code = int(item)
            continue
        text = agl.toUnicode(str(item).lstrip("/"))
        if len(text) != 1:
            return None
        mapping[code] = ord(text)
        code += 1
    return mapping


def _substitute(pdf: pikepdf.Pdf, font: pikepdf.Dictionary, folder: Path) -> bool:
    if font.get("/Subtype") not in (pikepdf.Name.Type1, pikepdf.Name.TrueType, pikepdf.Name.MMType1):
        return False
    descriptor = font.get("/FontDescriptor")
    path = face_of(str(font.get("/BaseFont", "")).lstrip("/"), descriptor, folder)
    mapping = code_points(font)
    if path is None or mapping is None:
        return False
    face = _face(path)
    if "/Widths" in font:  # the widths the page was laid out with
        first = int(font.get("/FirstChar", 0))
        drawn = {first + i: float(w) for i, w in enumerate(font.Widths) if float(w) != 0}
    else:  # a standard font drawn with the standard metrics, or another with the face's own (as a viewer does)
        standard = STANDARD_14.get(str(font.get("/BaseFont", "")).lstrip("/"))
        metrics = pymupdf.Font(standard) if standard else None
        drawn = {
            code: round(1000 * metrics.glyph_advance(uni)) if metrics else face.widths[uni]
            for code, uni in mapping.items()
            if code >= 32 and uni in face.widths and (metrics is None or metrics.has_glyph(uni))
        }
        if not drawn:
            return False
        first, last = min(drawn), max(drawn)
        font.FirstChar, font.LastChar = first, last
        font.Widths = pikepdf.Array([drawn.get(code, 0) for code in range(first, last + 1)])
    widths: dict[int, float] = {}
    for code, width in drawn.items():
        uni = mapping.get(code)
        if uni is None or uni not in face.widths or widths.setdefault(uni, width) != width:
            return False  # a glyph the face lacks, or one character drawn at two widths
    program = _subset(face, widths)
    stream = pdf.make_stream(program)
    stream.Length1 = len(program)
    new = pikepdf.Dictionary(Type=pikepdf.Name.FontDescriptor)
    if descriptor is not None:
        for key, value in descriptor.items():
            if key not in ("/FontFile", "/FontFile2", "/FontFile3", "/CharSet", "/CIDSet"):
                new[key] = value
    for key, value in face.descriptor.items():
        if key not in new:
            new[key] = pikepdf.Array(value) if isinstance(value, list) else value
    name = font.get("/BaseFont", pikepdf.Name("/Substitute"))
    new.FontName = name
    new.Flags = (int(new.get("/Flags", 0)) | 32) & ~4  # non-symbolic: its codes are Unicode characters
    new.FontFile2 = stream
    font.Subtype = pikepdf.Name.TrueType
    font.BaseFont = name
    font.FontDescriptor = pdf.make_indirect(new)
    encoding = font.get("/Encoding")
    if encoding is None or (isinstance(encoding, pikepdf.Dictionary) and "/BaseEncoding" not in encoding):
        # PDF/A-2 §6.2.11.6: a non-symbolic TrueType font names WinAnsi (or MacRoman) as its base; codes that read
        # otherwise in the old encoding keep their glyphs through Differences
        font.Encoding = _winansi_with(mapping)
    return True


def _winansi_with(mapping: dict[int, int]) -> pikepdf.Dictionary:
    differences: list = []
    for code in sorted(mapping):
        winansi = bytes([code]).decode("cp1252", errors="ignore") if code >= 32 else ""
        if winansi and ord(winansi) == mapping[code]:
            continue
        if not differences or _last_code(differences) != code - 1:
            differences.append(code)
        differences.append(pikepdf.Name("/" + agl.UV2AGL.get(mapping[code], f"uni{mapping[code]:04X}")))
    return pikepdf.Dictionary(
        Type=pikepdf.Name.Encoding, BaseEncoding=pikepdf.Name.WinAnsiEncoding, Differences=pikepdf.Array(differences)
    )


def _last_code(differences: list) -> int:
    """The code the last name of a Differences array stands for."""
    code, names = 0, 0
    for item in differences:
        if isinstance(item, int):
            code, names = item, 0
        else:
            names += 1
    return code + names - 1


@lru_cache(maxsize=64)
def _subset_of(path: Path, unicodes: frozenset[int]) -> bytes:
    """The face with only the glyphs these characters need (and .notdef), its Unicode cmap kept."""
    options = subset.Options()
    options.layout_features = []
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6]
    options.notdef_outline = True
    options.recalc_bounds = True
    options.drop_tables += ["GSUB", "GPOS", "GDEF", "kern", "DSIG", "FFTM"]
    font = TTFont(path)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=unicodes)
    subsetter.subset(font)
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def _subset(face: Substitute, widths: dict[int, float]) -> bytes:
    """The subset for these characters (and the space), each glyph advancing by the width the page gives it (in
    1/1000 em): where the face's own differs, the program takes the page's."""
    program = _subset_of(face.path, frozenset(widths) | {0x20})
    if all(abs(face.widths[uni] - width) < 0.5 for uni, width in widths.items()):
        return program
    font = TTFont(io.BytesIO(program))
    cmap, hmtx = font.getBestCmap(), font["hmtx"]
    for uni, width in widths.items():
        glyph = cmap[uni]
        hmtx[glyph] = (round(width * face.units / 1000), hmtx[glyph][1])
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()

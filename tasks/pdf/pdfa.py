"""PDF/A for korpus's searchable copies (ISO 19005): what turns the copy PyMuPDF wrote into an archival one.

The copy is finished with pikepdf (qpdf), in place, before it replaces the previous one:
- an output intent with an sRGB ICC profile (built by Little CMS through Pillow, so no profile file is carried), which
  PDF/A needs for any device colour (a scan's DeviceGray or DeviceRGB image);
- XMP metadata identifying the part and conformance (`pdfaid`), carried over from the document information the
  source had — its title, author, subject, keywords, creation and modification dates — and kept in step with it;
- every Type 2 CIDFont with its CIDToGIDMap (`/Identity`, which is also the default PDF readers assume: PyMuPDF's
  embedded subset of the invisible font leaves it out, and PDF/A requires it);
- graphics states without transfer functions (`/TR`), and images without `/Interpolate`, which PDF/A forbids and a
  kept page may carry;
- a metric-compatible substitute embedded for a font a kept page draws with but its source did not embed, where the
  glyphs keep their places (tasks/pdf/font_substitutes.py);
- JPEG images deflated on top where that saves ≥ 1 % (lossless, as OCRmyPDF's `--optimize 1`);
- none of what PDF/A forbids and a scan's copy could carry: encryption (PyMuPDF writes none), JavaScript and
  additional actions (taken out: a copy for an archive runs no code), a trailer without an ID (qpdf writes one).
A kept born-digital page that draws with fonts the source did not embed (Word's Times New Roman and Arial for spaces
and Latin, old tools' Helvetica) gets Liberation 2 embedded in their place where its widths are those the page was
laid out with (tasks/pdf/font_substitutes.py). A copy with a font that has no such substitute cannot conform without
changing its pages (Ghostscript's PDF/A conversion embeds substitutes by rewriting every page, and garbled the
invisible Cyrillic layer when tried: «АКТ № 7» read back as «ēĝĥ Ė 7»), so it is written as plain PDF and says why
(`make_pdfa`'s answer, the copy's summary `pdfa_refused`).

`FLAVOURS` names what `KORPUS_PDFA` may ask for. The default is PDF/A-2b: the level OCRmyPDF writes by default,
accepted by every archive validator, and one a mixed copy can reach — a born-digital page kept as it is may draw
glyphs whose fonts have no Unicode map, which 2u refuses; 3b adds only arbitrary attachments, which a copy has none
of. veraPDF checks every copy the tests write (tests/integration/test_pdfa.py).
"""

from __future__ import annotations

import warnings
import zlib
from functools import lru_cache
from pathlib import Path

import pikepdf
from PIL import ImageCms

from tasks.pdf.font_substitutes import LIBERATION, substitute_fonts

FLAVOURS = {"2b": (2, "B"), "2u": (2, "U"), "3b": (3, "B"), "3u": (3, "U")}
"""`KORPUS_PDFA` value → (part, conformance); `off` writes plain PDF."""


def declared_pdfa(path: Path | str) -> str | None:
    """The PDF/A flavour a PDF's XMP declares ('1b', '2u', '3a', …), or None (also for a file qpdf cannot read)."""
    try:
        with pikepdf.open(path) as pdf:
            meta = pdf.open_metadata()
            part, conformance = meta.get("pdfaid:part"), meta.get("pdfaid:conformance")
    except (pikepdf.PdfError, pikepdf.PasswordError, ValueError):
        return None
    return f"{part}{conformance.lower()}" if part and conformance else None


def kept_level(source: str | None, asked: str) -> str:
    """The flavour of a copy of a source that declares `source` when `asked` is configured: the source's level or
    better — part 2 at least (what korpus writes), Unicode (`u`) when either asks for it. Level A (tagged, for
    accessibility) cannot be kept: the text layer korpus adds is not tagged, so an `a` source's copy is `u`."""
    if asked == "off" or source is None or source[:1] not in "123":
        return asked
    part = max(int(source[0]), FLAVOURS[asked][0])
    unicode = source[1:] in ("u", "a") or FLAVOURS[asked][1] == "U"
    return f"{part}{'u' if unicode else 'b'}"


FORBIDDEN_IN_CATALOG = ("/AA", "/JavaScript")


@lru_cache(maxsize=1)
def srgb_profile() -> bytes:
    """An sRGB ICC profile made by Little CMS (Pillow's ImageCms), the output intent's colour space."""
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def make_pdfa(path: Path, flavour: str = "2b", optimize: int = 1, fonts: Path = LIBERATION) -> str | None:
    """Turn the PDF at `path` into PDF/A of `flavour` (a key of FLAVOURS), rewriting it in place; None when done.
    A font a kept born-digital page draws with but its source did not embed gets a metric-compatible substitute
    where one keeps every glyph in its place (tasks/pdf/font_substitutes.py). A copy that cannot conform is left as
    it is and not called PDF/A — the reason is returned: a font that has no such substitute (PDF/A needs every font
    program inside the file). `fonts`: the folder of the Liberation 2 faces."""
    part, conformance = FLAVOURS[flavour]
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        missing = substitute_fonts(pdf, fonts)
        if missing:
            return f"fonts not embedded in the source: {', '.join(sorted(missing)[:5])}"
        _output_intent(pdf)
        _fonts(pdf)
        _no_code(pdf)
        _no_transfer_functions(pdf)
        _no_interpolation(pdf)
        if optimize >= 1:  # KORPUS_PDF_OPTIMIZE 0: nothing beyond what PDF/A needs
            _deflate_jpegs(pdf)
        with pdf.open_metadata(set_pikepdf_as_editor=False) as meta, warnings.catch_warnings():
            # a field XMP has no place for (Word's /Company, /SourceModified) stays in the document information
            warnings.simplefilter("ignore", UserWarning)
            meta.load_from_docinfo(pdf.docinfo, raise_failure=False)
            meta["pdfaid:part"] = str(part)
            meta["pdfaid:conformance"] = conformance
        pdf.save(path, min_version="1.7" if part >= 2 else "1.4")
    return None


def _output_intent(pdf: pikepdf.Pdf) -> None:
    profile = pdf.make_stream(srgb_profile())
    profile.N = 3
    intent = pikepdf.Dictionary(
        Type=pikepdf.Name.OutputIntent,
        S=pikepdf.Name.GTS_PDFA1,
        OutputConditionIdentifier=pikepdf.String("sRGB"),
        Info=pikepdf.String("sRGB IEC61966-2.1"),
        DestOutputProfile=profile,
    )
    pdf.Root.OutputIntents = pikepdf.Array([pdf.make_indirect(intent)])


def _fonts(pdf: pikepdf.Pdf) -> None:
    for obj in pdf.objects:
        if isinstance(obj, pikepdf.Dictionary) and obj.get("/Subtype") == pikepdf.Name.CIDFontType2:
            if "/CIDToGIDMap" not in obj:
                obj.CIDToGIDMap = pikepdf.Name.Identity


def _no_interpolation(pdf: pikepdf.Pdf) -> None:
    """Images without `/Interpolate true` (PDF/A §6.2.8: a smoothing hint a viewer may or may not follow; a Word
    page's picture had it)."""
    for obj in pdf.objects:
        if isinstance(obj, pikepdf.Stream) and obj.get("/Subtype") == pikepdf.Name.Image and obj.get("/Interpolate"):
            obj.Interpolate = False


def _deflate_jpegs(pdf: pikepdf.Pdf) -> None:
    """A JPEG image's bytes also deflated where that saves at least 1 % (`[/FlateDecode /DCTDecode]`): lossless — the
    same JPEG comes out — as OCRmyPDF's default `--optimize 1` does; a scan's copy was 2 % larger than its without."""
    for obj in pdf.objects:
        if not isinstance(obj, pikepdf.Stream) or obj.get("/Subtype") != pikepdf.Name.Image:
            continue
        if obj.get("/Filter") != pikepdf.Name.DCTDecode or "/DecodeParms" in obj:
            continue
        raw = obj.read_raw_bytes()
        packed = zlib.compress(raw, 6)
        if len(packed) <= 0.99 * len(raw):
            obj.write(packed, filter=pikepdf.Array([pikepdf.Name.FlateDecode, pikepdf.Name.DCTDecode]))


def _no_transfer_functions(pdf: pikepdf.Pdf) -> None:
    """Graphics states without transfer functions (`/TR`; `/TR2` other than `/Default`), which PDF/A forbids: they
    adjust a particular output device's tones, and conforming readers ignore them (a scanned law from the real
    archive, whose broken layer korpus replaced, had one)."""
    states = [o for o in pdf.objects if isinstance(o, pikepdf.Dictionary) and o.get("/Type") == "/ExtGState"]
    for page in pdf.pages:
        found = page.obj.get("/Resources", {}).get("/ExtGState", {})
        states += [found[name] for name in found.keys()]
    for state in states:
        if "/TR" in state:
            del state["/TR"]
        if "/TR2" in state and state.TR2 != pikepdf.Name.Default:
            state.TR2 = pikepdf.Name.Default


def _no_code(pdf: pikepdf.Pdf) -> None:
    for key in FORBIDDEN_IN_CATALOG:
        if key in pdf.Root:
            del pdf.Root[key]
    names = pdf.Root.get("/Names")
    if names is not None and "/JavaScript" in names:
        del names["/JavaScript"]
    action = pdf.Root.get("/OpenAction")
    if isinstance(action, pikepdf.Dictionary) and action.get("/S") == pikepdf.Name.JavaScript:
        del pdf.Root["/OpenAction"]
    for page in pdf.pages:
        if "/AA" in page.obj:
            del page.obj["/AA"]

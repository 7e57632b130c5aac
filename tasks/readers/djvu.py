"""DjVu through djvulibre (`djvused`, `djvutxt`, `ddjvu`): a page's own hidden text, when present, is judged by the
same detector as a PDF layer; pages without a good one are rendered and OCR'd. Citations use DjVu page numbers."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from PIL import Image

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImage, PageImageSource, fit_dpi
from tasks.pdf.searchable import PageFrame, write_searchable_images
from tasks.readers.base import ParseOutcome, UnreadableSourceError, problem
from tasks.runtime.processes import run_owned
from tasks.text.quality import text_layer_quality
from tasks.text.regions import Box, page_boxes
from tasks.text.structure import text_structure

TIMEOUT = 120


def _djvu(program: str, *arguments: str, binary: bool = False) -> Any:
    if shutil.which(program) is None:
        raise UnreadableSourceError(f"{program} is not installed: apt-get install djvulibre-bin")
    try:
        done = run_owned([program, *arguments], timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise UnreadableSourceError(
            f"{program} did not finish in {TIMEOUT} s (the decoder hangs on this file)"
        ) from exc
    if done.returncode != 0:
        raise UnreadableSourceError(f"{program} failed: {done.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    return done.stdout if binary else done.stdout.decode("utf-8", "replace")


def page_count(path: str) -> int:
    return int(_djvu("djvused", path, "-e", "n").strip())


@lru_cache(maxsize=8)
def _dump(path: str, version: str) -> str:
    """`djvudump` of a file version, read once for its page sizes and its layers."""
    return _djvu("djvudump", path)


@lru_cache(maxsize=64)
def page_sizes(path: str, version: str) -> list[tuple[int, int, int]]:
    """Width and height in pixels and the scan resolution of every page, from one `djvudump` (cached per file
    version, so OCR of page after page does not ask again)."""
    dump = _dump(path, version)
    return [
        (int(w), int(h), int(d)) for w, h, d in re.findall(r"INFO \[\d+\]\s+DjVu (\d+)x(\d+), v\d+, (\d+) dpi", dump)
    ]


def page_dpi(path: str, page: int) -> tuple[int, int, int]:
    sizes = page_sizes(path, str(Path(path).stat().st_mtime_ns))
    if len(sizes) >= page:
        return sizes[page - 1]
    width, height = (int(v) for v in re.findall(r"\d+", _djvu("djvused", path, "-e", f"select {page}; size"))[:2])
    return width, height, 300


_LINE = re.compile(r"\(line ")
_WORD = re.compile(r'\(word (-?\d+) (-?\d+) (-?\d+) (-?\d+) "((?:[^"\\]|\\.)*)"')


def hidden_words(path: str, page: int) -> list[Box]:
    """The page's hidden-text words with their boxes, in points from the top-left (DjVu counts pixels from the
    bottom-left), one line number per `line` zone."""
    _width, height, dpi = page_dpi(path, page)
    scale = 72 / dpi
    words = []
    for line, zone in enumerate(_LINE.split(_djvu("djvutxt", f"--page={page}", "--detail=word", path))[1:]):
        for x0, y0, x1, y1, text in _WORD.findall(zone):
            text = text.replace('\\"', '"').replace("\\\\", "\\")
            words.append(
                Box(
                    text, int(x0) * scale, (height - int(y1)) * scale, int(x1) * scale, (height - int(y0)) * scale, line
                )
            )
    return words


def djvu_page_image(path: str, page: int, dpi: int, fmt: str) -> PageImage:
    width, height, own = page_dpi(path, page)
    dpi = fit_dpi(width / own, height / own, dpi)  # ddjvu decodes a huge page at the lower resolution itself
    with tempfile.TemporaryDirectory(prefix="korpus-djvu-") as tmp:
        out = Path(tmp) / "page.pgm"
        _djvu("ddjvu", "-format=pgm", f"-page={page}", f"-scale={dpi}", path, str(out))
        data = out.read_bytes()
    if fmt != "pnm":
        buffer = io.BytesIO()
        Image.open(io.BytesIO(data)).save(buffer, fmt.upper())
        data = buffer.getvalue()
    return PageImage(data, dpi, width * 72 / own, height * 72 / own)


def djvu_frame(path: str, page: int) -> PageFrame:
    """Page `page` for the searchable copy, losslessly and no larger than the page holds (#65):
    - a page whose bilevel mask draws nothing (a photo DjVu: the picture is all background) is its background layer at
      the layer's own resolution — djvulibre keeps it at a third of the page's or less, and the copy held it
      upscaled to the page's (the real-archive DjVu: 2.3 MB a page where the layer is 828×1170);
    - any other page as djvulibre composes it at its own resolution (at most what `fit_dpi` lets a huge page have);
    either in the fewest colours that hold it exactly: two (a bilevel page: 1 bit a pixel), grey, or colour — a colour
    page is no longer turned grey."""
    width, height, own = page_dpi(path, page)
    points = (width * 72 / own, height * 72 / own)
    scale = fit_dpi(width / own, height / own, own)
    with tempfile.TemporaryDirectory(prefix="korpus-djvu-") as tmp:
        background, out = _background_subsample(path, page), Path(tmp) / "page.ppm"
        if background > 1 and _mask_empty(path, page, scale, Path(tmp) / "mask.pbm"):
            _djvu(
                "ddjvu", "-format=ppm", "-mode=background", f"-page={page}", f"-subsample={background}", path, str(out)
            )
        else:
            _djvu("ddjvu", "-format=ppm", f"-page={page}", f"-scale={scale}", path, str(out))
        image = fewest_colours(Image.open(out))
    dpi = round(image.width * 72 / points[0])
    return PageFrame(image.width, image.height, dpi, image=image, points=points)


def _mask_empty(path: str, page: int, scale: int, out: Path) -> bool:
    """The page's bilevel mask draws nothing (no black pixel where djvulibre renders it)."""
    _djvu("ddjvu", "-format=pbm", "-mode=mask", f"-page={page}", f"-scale={scale}", path, str(out))
    return Image.open(out).convert("L").getextrema()[0] == 255


def fewest_colours(image: Image.Image) -> Image.Image:
    """The same pixels in the smallest lossless mode: 1 bit for black and white, grey where every pixel is grey,
    else RGB. (A palette would not help: PyMuPDF stores a palette image's pixels as RGB.)"""
    image.load()
    image = image.convert("RGB")
    colours = image.getcolors(maxcolors=2)
    if colours is not None and {c for _n, c in colours} <= {(0, 0, 0), (255, 255, 255)}:
        return image.convert("L").convert("1", dither=Image.Dither.NONE)
    red, green, blue = image.split()
    if red.tobytes() == green.tobytes() == blue.tobytes():
        return red
    return image


def _background_subsample(path: str, page: int) -> int:
    """How many times smaller than the page the page's background layer is kept (1: none, or at the page's own
    resolution), from its first IW44 chunk in `djvudump`."""
    layers = page_layers(path, str(Path(path).stat().st_mtime_ns))
    if len(layers) < page or layers[page - 1] is None:
        return 1
    width, _height, _own = page_dpi(path, page)
    return max(1, round(width / layers[page - 1]))


@lru_cache(maxsize=64)
def page_layers(path: str, version: str) -> list[int | None]:
    """Each page's background layer width in pixels (its first `BG44` chunk), or None where it has none."""
    widths: list[int | None] = []
    for form in re.split(r"FORM:DJVU ", _dump(path, version))[1:]:
        found = re.search(r"BG44 \[\d+\]\s+IW4 data #1, \d+ slices, v[\d.]+ \([^)]*\), (\d+)x\d+", form)
        widths.append(int(found.group(1)) if found else None)
    return widths


class DjvuReader:
    kind = SourceKind.djvu
    suffixes = (".djvu", ".djv")

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        try:
            count = page_count(source.path)
            page_sizes(source.path, str(Path(source.path).stat().st_mtime_ns))  # the whole file decodes
            texts = [_djvu("djvutxt", f"--page={page}", source.path) for page in range(1, count + 1)]
        except (UnreadableSourceError, ValueError, subprocess.TimeoutExpired) as exc:
            return ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, f"not a readable DjVu: {exc}")])
        outcome = ParseOutcome(page_count=count)
        for page, text in enumerate(texts, start=1):
            quality = text_layer_quality(text, settings)
            width, height, dpi = page_dpi(source.path, page)
            boxes = page_boxes(text, hidden_words(source.path, page)) if text.strip() else ""
            result = PageResult(
                source_id=source.source_id,
                source_version=source.version,
                page=page,
                text=text,
                method="text-layer",
                engine="djvutxt",
                units=text_structure(text),
                tier=0,
                quality=quality.score,
                quality_reasons=quality.reasons,
                size=(width * 72 / dpi, height * 72 / dpi),
                boxes=boxes,
            )
            outcome.add_layer(result, quality)
        return outcome

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        return lambda dpi, fmt: djvu_page_image(source.path, page, dpi, fmt)

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        """A searchable PDF (PDF/A unless KORPUS_PDFA=off) of the DjVu's pages, as for page images: each page at its
        own resolution with the text korpus indexed (its hidden text, or OCR's) as the invisible layer. (A DjVu
        with a new hidden-text layer, djvused set-txt, would keep the format but no archive standard.)"""
        out = settings.data / "searchable" / (source.source_id + ".pdf")
        return write_searchable_images(
            lambda page: djvu_frame(source.path, page), pages, out, source.size, settings.pdfa, settings.pdf_optimize
        )

"""Office documents (.docx, .doc, .odt, .rtf): LibreOffice headless turns each into a PDF under
`<data>/converted/`, and that PDF's exact text layer is read like any born-digital PDF — so a citation names the
page a reader sees when opening the document, and headings (the document's heading styles, set larger or bold)
and tables (ruled) come through the PDF structure reader. The original file stays the source, untouched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from functools import partial
from pathlib import Path
from typing import Any

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.pdf.pages import layer_boxes, open_pdf, pdf_page_image
from tasks.readers.base import ParseOutcome, UnreadableSourceError, problem
from tasks.readers.pdf import layer_pages
from tasks.runtime.processes import run_owned


def soffice() -> str:
    for name in ("soffice", "libreoffice"):
        if found := shutil.which(name):
            return found
    raise UnreadableSourceError("LibreOffice is not installed: apt-get install libreoffice-writer-nogui")


ZIP, OLE2 = b"PK\x03\x04", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MEMBERS = ("[Content_Types].xml", "mimetype")  # OOXML (.docx) and ODF (.odt) containers
MARKUP = (b"{\\rtf", b"<?xml", b"<html", b"<!doctype html")  # RTF; Word 2003 XML and «Web page» .doc


def check_signature(path: Path) -> None:
    """LibreOffice opens almost anything as *some* document (a damaged .docx as an empty page), so the bytes
    are checked first: an OLE2 Word file, an OOXML/ODF zip container that opens, RTF, or Word's XML/HTML — by
    content, not name (a real archive holds ODF files named .doc). Anything else is refused."""
    with open(path, "rb") as handle:
        head = handle.read(512)
    if head.startswith(OLE2) or head.lstrip().lower().startswith(MARKUP):
        return
    if head.startswith(ZIP):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError) as exc:
            raise UnreadableSourceError(f"a damaged office file (its zip container does not open: {exc})") from exc
        if names & set(ZIP_MEMBERS):
            return
        raise UnreadableSourceError("a zip archive, not an office document (no [Content_Types].xml or mimetype)")
    raise UnreadableSourceError(
        "not an office document (its bytes are none of Word, OOXML, ODF, RTF or HTML): if it is text, name it .txt"
    )


def converted_pdf(source: Source, settings: Settings) -> Path:
    """The PDF of an office document, made once per version (sha256) and reused by every later stage."""
    target = settings.converted_dir / source.version[:2] / f"{source.version}.pdf"
    if target.is_file():
        return target
    check_signature(Path(source.path))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="korpus-office-") as tmp:
        # a private profile per conversion: two LibreOffice processes never share one
        profile = Path(tmp) / "profile"
        suffix = Path(source.source_id).suffix.lower()
        original = Path(tmp) / f"document{suffix}"
        shutil.copyfile(source.path, original)  # LibreOffice reads a copy; the source is never touched
        command = [
            soffice(),
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--norestore",
            "--convert-to",
            "pdf",
            "--outdir",
            tmp,
            str(original),
        ]
        try:
            # its own process group, killed whole: soffice hands the work to soffice.bin, which a plain
            # subprocess timeout would leave running
            done = run_owned(command, timeout=settings.office_timeout, env=dict(os.environ, HOME=tmp))
        except subprocess.TimeoutExpired as exc:
            raise UnreadableSourceError(f"LibreOffice took over {settings.office_timeout:.0f} s") from exc
        made = Path(tmp) / "document.pdf"
        if done.returncode != 0 or not made.is_file() or made.stat().st_size == 0:
            said = (done.stderr or done.stdout).decode("utf-8", "replace").splitlines()
            detail = "; ".join(line for line in said if line.strip() and "javaldx" not in line)[-300:]
            raise UnreadableSourceError(
                f"LibreOffice could not convert it (damaged, password-protected or not an office file): "
                f"{detail or 'no PDF written'}"
            )
        tmp_target = target.with_suffix(f".{os.getpid()}.part")
        shutil.copyfile(made, tmp_target)
        tmp_target.replace(target)
    return target


_CONVERSION_PATH = re.compile(re.escape(tempfile.gettempdir()) + r"/korpus-office-[^/\s]+/document\.\w+")


def without_conversion_path(outcome: ParseOutcome, source: Source, pdf: Path) -> None:
    """A FILENAME field («Файл: C:\\Docs\\приказ.doc» in a footer) is drawn by LibreOffice with the path of the copy it
    converted — /tmp/korpus-office-…/document.doc, a path that never held the document. The page text shows the
    source's own file name there instead (padded with spaces, so the structure's offsets hold; the words' boxes are
    aligned again). The converted PDF keeps what LibreOffice drew; the page image OCR reads has it painted over
    (`OfficeReader.page_image`), so a page sent to OCR does not read it back."""
    name = Path(source.source_id).name
    fill = lambda m: name.ljust(len(m.group(0))) if len(name) <= len(m.group(0)) else " " * len(m.group(0))  # noqa: E731
    pages = [*outcome.pages, *outcome.flagged.values()]  # a flagged layer travels to OCR: mended there too
    if not any(_CONVERSION_PATH.search(page.text) for page in pages):
        return
    with open_pdf(str(pdf)) as doc:

        def mended(page: PageResult) -> PageResult:
            if not _CONVERSION_PATH.search(page.text):
                return page
            text = _CONVERSION_PATH.sub(fill, page.text)
            boxes = layer_boxes(doc.load_page((page.page or 1) - 1), text) if page.boxes else ""
            return page.model_copy(update={"text": text, "boxes": boxes})

        outcome.pages = [mended(page) for page in outcome.pages]
        outcome.flagged = {number: mended(page) for number, page in outcome.flagged.items()}


class OfficeReader:
    kind = SourceKind.office
    suffixes = (".docx", ".doc", ".odt", ".rtf", ".docm", ".dotm", ".dotx", ".dot", ".wps")

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        try:
            pdf = converted_pdf(source, settings)
        except UnreadableSourceError as exc:
            return ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, str(exc))])
        outcome = layer_pages(source, str(pdf), settings, engine="libreoffice+pymupdf")
        without_conversion_path(outcome, source, pdf)
        return outcome

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        # OCR of a page with too little layer text would read the conversion path LibreOffice drew: it is hidden
        return partial(pdf_page_image, str(converted_pdf(source, settings)), page, hidden=_CONVERSION_PATH)

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None  # the converted PDF under <data>/converted/ already holds the document's text

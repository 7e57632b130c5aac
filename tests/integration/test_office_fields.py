"""A Word file's FILENAME field («Файл: C:\\Docs\\приказ.docx» in a footer) is drawn by LibreOffice with the path of
the copy it converted. A real manual's served text showed «/tmp/korpus-office-…/document.doc» there (the eleventh
register set's windows of poi_ob_is.doc); the page text names the source's own file instead, and its words keep
their boxes (tasks/readers/office.py `without_conversion_path`)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from korpus.core.datamodel import Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.office import OfficeReader
from tasks.text.regions import decode
from tests.builders import zipped

pytestmark = pytest.mark.integration
TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships'
    '+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
    'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)


def docx_with_a_filename_field() -> bytes:
    body = (
        "<w:p><w:r><w:t>Приказ о проведении проверки склада.</w:t></w:r></w:p>"
        '<w:p><w:r><w:t xml:space="preserve">Файл: </w:t></w:r><w:fldSimple w:instr=" FILENAME \\p ">'
        "<w:r><w:t>C:\\Docs\\приказ.docx</w:t></w:r></w:fldSimple></w:p>"
        "<w:p><w:r><w:t>Ответственный: начальник склада.</w:t></w:r></w:p>"
    )
    document = (
        '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
        f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>'
    )
    return zipped(
        {"[Content_Types].xml": TYPES.encode(), "_rels/.rels": RELS.encode(), "word/document.xml": document.encode()}
    )


def test_a_filename_field_shows_the_sources_name_not_the_conversion_copys_path(tmp_path: Path) -> None:
    path = tmp_path / "приказ.docx"
    path.write_bytes(docx_with_a_filename_field())
    source = Source(
        source_id="приказы/приказ.docx",
        version=hashlib.sha256(path.read_bytes()).hexdigest(),
        path=str(path),
        kind=SourceKind.office,
        owner="склад",
        access="public",
    )
    outcome = OfficeReader().read(source, Settings(data=tmp_path / "data"))
    assert not outcome.problems and len(outcome.pages) == 1
    page = outcome.pages[0]
    assert "korpus-office" not in page.text and "Файл: приказ.docx" in page.text, page.text
    assert "Ответственный: начальник склада." in page.text
    boxes = decode(page.text, page.boxes)  # aligned again with the mended text: the page keeps its regions
    assert boxes is not None and len(boxes) == 9  # every word but the path, whose drawn letters are not the text
    assert all(0 <= unit.start <= unit.end <= len(page.text) for unit in page.units)


def test_the_page_image_ocr_reads_does_not_show_the_conversion_copys_path(tmp_path: Path) -> None:
    """A page holding little more than the field (a title page's footer: poi_ob_is.doc pages 21 and 27) is sent to
    OCR, which read the drawn path back into the served text; the image it reads has the path painted over."""
    from tasks.ocr.tesseract import ocr_page_words

    path = tmp_path / "приказ.docx"
    path.write_bytes(docx_with_a_filename_field())
    source = Source(
        source_id="приказ.docx",
        version=hashlib.sha256(path.read_bytes()).hexdigest(),
        path=str(path),
        kind=SourceKind.office,
        owner="склад",
        access="public",
    )
    image = OfficeReader().page_image(source, 1, Settings(data=tmp_path / "data"))(300, "png")
    read = ocr_page_words(image.data, dpi=image.dpi).text
    # unhidden, Russian OCR read the path as «Файл: /5тр/Когри$-оЙсе- м984а\\м/аоситепЕ.аосх»: nothing follows now
    assert "Ответственный" in read and re.search(r"Файл:[ \t]*\S", read) is None, read

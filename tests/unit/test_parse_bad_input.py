"""Bad input ends as a quarantine item with a reason; nothing raises into the flow."""

from pathlib import Path

import pymupdf
import pytest

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.parse import parse_pdf_text_layers, read_plain_text

pytestmark = pytest.mark.unit


def _source(path: Path, kind: SourceKind) -> Source:
    return Source(source_id=path.name, version="ff" * 32, path=str(path), kind=kind, owner="o", access="public")


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("zero.pdf", b""),
        ("not_a_pdf.pdf", "Это обычный текст, а не PDF".encode()),
        ("truncated.pdf", b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog"),
    ],
)
def test_unreadable_pdfs_are_quarantined(tmp_path: Path, name: str, payload: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(payload)
    outcome = parse_pdf_text_layers(_source(path, SourceKind.pdf), Settings())
    assert outcome.pages == [] and outcome.ocr_pending == []
    assert [p.reasons for p in outcome.problems] == [[ReasonCode.unreadable_file]]


def test_password_protected_pdf_is_quarantined(tmp_path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "secret")
    path = tmp_path / "locked.pdf"
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o", user_pw="u")
    outcome = parse_pdf_text_layers(_source(path, SourceKind.pdf), Settings())
    assert "password" in outcome.problems[0].detail


def test_a_page_without_text_goes_to_ocr_and_one_with_nothing_drawn_is_blank(tmp_path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().draw_rect(pymupdf.Rect(50, 50, 300, 300))  # drawn, no text layer: OCR decides
    doc.new_page()  # nothing drawn at all
    path = tmp_path / "blank.pdf"
    doc.save(path)
    outcome = parse_pdf_text_layers(_source(path, SourceKind.pdf), Settings())
    assert outcome.ocr_pending == [1] and [(p.page, p.method, p.text) for p in outcome.pages] == [(2, "blank", "")]
    doc.delete_page(0)
    doc.save(path)
    outcome = parse_pdf_text_layers(_source(path, SourceKind.pdf), Settings())
    assert outcome.pages == outcome.ocr_pending == [] and [p.reasons for p in outcome.problems] == [["empty-text"]]


def test_a_short_cp1251_text_is_read_not_quarantined(tmp_path: Path) -> None:
    """One word is too short to score as Russian; it is read by the code page that reads it best (it was refused)."""
    path = tmp_path / "cp1251.txt"
    path.write_bytes("Протокол".encode("cp1251"))
    outcome = read_plain_text(_source(path, SourceKind.text))
    assert not outcome.problems and outcome.pages[0].text == "Протокол"


def test_bytes_no_code_page_reads_as_text_are_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "noise.txt"
    path.write_bytes(bytes(range(128, 256)) * 4)
    outcome = read_plain_text(_source(path, SourceKind.text))
    assert outcome.problems[0].reasons == [ReasonCode.unreadable_file]


def test_zero_page_pdf_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "empty.pdf"
    path.write_bytes(
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n"
        b"trailer << /Root 1 0 R >>\n%%EOF\n"
    )
    outcome = parse_pdf_text_layers(_source(path, SourceKind.pdf), Settings())
    assert [p.reasons for p in outcome.problems] == [[ReasonCode.unreadable_file]]
    assert "no pages" in outcome.problems[0].detail


def test_broken_xref_is_repaired_or_quarantined_never_raised(tmp_path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Protocol")
    good = doc.tobytes()
    start = good.rfind(b"startxref")
    broken = good[:start] + b"startxref\n999999\n%%EOF\n"  # the xref offset points nowhere
    path = tmp_path / "broken_xref.pdf"
    path.write_bytes(broken)
    outcome = parse_pdf_text_layers(_source(path, SourceKind.pdf), Settings())
    assert outcome.page_count == 1 or [p.reasons for p in outcome.problems] == [[ReasonCode.unreadable_file]]

"""Page furniture (#29 item 4): a drawing's stamp frame and rotated or letter-spaced service text become no heading
and no part of another chunk's body, yet stay in the index as a chunk of their own — on a real GOST document, on a
page built like the one users saw («Подпись и дата › АННОТАЦИЯ»), and for any order of stamp and text lines."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from korpus.core.datamodel import FURNITURE_SECTION, PageResult, Source, SourceKind, UnitKind
from tasks.contract.chunking import build_chunks, chars_as_tokens
from tasks.text.furniture import is_stamp_text
from tasks.text.structure import pdf_page_structure, text_structure

pytestmark = pytest.mark.unit
REAL_GOST = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive" / "digital" / "gost_multipage_table_2.pdf"
SOURCE = Source(source_id="пз.pdf", version="cd" * 32, path="/r", kind=SourceKind.pdf, owner="А", access="public")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
STAMP_LINES = [
    "Подп. и дата",
    "Взам. инв. №",
    "Инв. № дубл.",
    "Инв. № подл.",
    "По дп ись и дат а",
    "Изм. Кол.уч. Лист № док. Подп. Дата",
    "Разраб. Пров. Н. контр. Утв.",
    "В з а м .  и н в .  №",
    "Изм. № Лит № докиум. Maan. Дата",
]  # the last as OCR read it


@pytest.mark.parametrize("line", STAMP_LINES)
def test_a_stamp_frames_labels_are_recognised_however_spaced(line: str) -> None:
    assert is_stamp_text(line)


@pytest.mark.parametrize(
    "line",
    [
        "Дата",
        "Лист 3",
        "Подпись",
        "АННОТАЦИЯ",
        "Дата подписания договора",
        "Лист согласования",
        "Разработал Иванов",
        "Инвентарный номер 12",
        "Справка",
        "Подпись и дата рождения заявителя",
        "Документа",
        "Номер документа и дата",
        "Дата подписания документа 12",
        "1 1 1 1 1 1 1 1 1 1 1 1 x",
    ],
)
def test_words_a_document_writes_are_not_furniture(line: str) -> None:
    assert not is_stamp_text(line)


def _pages(path: Path) -> list[PageResult]:
    out = []
    with pymupdf.open(path) as doc:
        for number, page in enumerate(doc, start=1):
            text, units = pdf_page_structure(page)
            out.append(
                PageResult(
                    source_id=SOURCE.source_id,
                    source_version=SOURCE.version,
                    page=number,
                    text=text,
                    method="pdf-text",
                    units=units,
                )
            )
    return out


def _gost_page(path: Path) -> Path:
    """A page laid out like an explanatory note: the margin strip's labels rotated 90°, a letter-spaced label in
    large type above the heading, the title block's row at the bottom."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_font(fontname="dv", fontfile=FONT)
    for n, label in enumerate(["Инв. № подл.", "Подп. и дата", "Взам. инв. №", "Инв. № дубл.", "Подп. и дата"]):
        page.insert_text((30, 800 - n * 150), label, fontname="dv", fontsize=9, rotate=90)
    page.insert_text((90, 60), "П о д п и с ь   и   д а т а", fontname="dv", fontsize=16)
    page.insert_text((250, 120), "АННОТАЦИЯ", fontname="dv", fontsize=16)
    body = [
        "Настоящая пояснительная записка описывает устройство насосной станции второго подъёма,",
        "её производительность и порядок эксплуатации в зимний период года.",
    ]
    for n, line in enumerate(body):
        page.insert_text((90, 160 + n * 14), line, fontname="dv", fontsize=11)
    page.insert_text((90, 790), "Изм. Кол.уч. Лист № док. Подп. Дата", fontname="dv", fontsize=8)
    doc.save(path)
    return path


def _furniture(chunks) -> list:
    return [c for c in chunks if c.section_path == [FURNITURE_SECTION]]


def test_a_gost_page_keeps_its_stamp_out_of_headings_and_bodies(tmp_path: Path) -> None:
    pages = _pages(_gost_page(tmp_path / "пз.pdf"))
    chunks, empty = build_chunks(SOURCE, pages, "structure-v2", count=chars_as_tokens)
    assert not empty
    furniture, content = _furniture(chunks), [c for c in chunks if c not in _furniture(chunks)]
    assert len(furniture) == 1 and content
    assert all(c.section_path == ["АННОТАЦИЯ"] for c in content), [c.section_path for c in content]
    assert "насосной станции" in " ".join(c.body for c in content)
    for label in ("Взам. инв. №", "Инв. № дубл.", "П о д п и с ь", "Изм. Кол.уч."):
        assert label in furniture[0].body and not any(label in c.body for c in content), label
    for chunk in chunks:  # every body is still the page text between its offsets
        assert pages[0].text[chunk.locator.start : chunk.locator.end] == chunk.body


def test_a_real_gost_documents_stamp_rows_leave_its_tables() -> None:
    pages = _pages(REAL_GOST)
    chunks, _ = build_chunks(SOURCE, pages, "structure-v2", count=chars_as_tokens)
    furniture = _furniture(chunks)
    content = " ".join(c.body for c in chunks if c not in furniture)
    assert {c.locator.page for c in furniture} == {1, 2}
    for label in ("Взам. инв. №", "Подпись и дата", "Инв. № подл.", "Н.контролер", "№док"):
        assert all(label in c.body for c in furniture) and label not in content, label
    assert "ОБЩАЯ ЧАСТЬ" in content and "Клозпроект" in content and "SAMPLE TEXT" in content  # the title block's own
    assert not any(is_stamp_text(part) for c in chunks for part in c.section_path if part != FURNITURE_SECTION)


PARAGRAPHS = [
    "Решили принять проект к исполнению.",
    "Насосная станция работает в две смены.",
    "Срок поставки оборудования — третий квартал.",
    "Ответственный назначен приказом директора.",
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(STAMP_LINES), st.sampled_from(PARAGRAPHS)), min_size=1, max_size=12),
    st.booleans(),
)
def test_stamp_lines_anywhere_in_ocr_text_are_furniture_and_nothing_is_lost(lines: list[str], heading: bool) -> None:
    """OCR output interleaves a frame's labels with the text wherever the page's reading order put them: every label
    ends in a furniture chunk and in no other body or section path, every paragraph in a content chunk."""
    text = "\n\n".join((["ПОЯСНИТЕЛЬНАЯ ЗАПИСКА"] if heading else []) + lines)
    page = PageResult(
        source_id=SOURCE.source_id,
        source_version=SOURCE.version,
        page=1,
        text=text,
        method="ocr",
        units=text_structure(text),
    )
    chunks, _ = build_chunks(SOURCE, [page], "structure-v2", count=chars_as_tokens)
    furniture = _furniture(chunks)
    content = [c for c in chunks if c not in furniture]
    for chunk in chunks:
        assert text[chunk.locator.start : chunk.locator.end] == chunk.body
        assert not any(is_stamp_text(part) for part in chunk.section_path)
    for line in lines:
        if line in STAMP_LINES:
            assert any(line in c.body for c in furniture) and not any(line in c.body for c in content), line
        else:
            assert any(line in c.body for c in content), line
    assert all(u.kind is UnitKind.furniture for u in page.units if is_stamp_text(text[u.start : u.end]))

"""Spreadsheets as blocks of rows with their header and a sheet-and-rows label (tasks/readers/sheet.py), on a real
XLS budget (tests/fixtures/real-archive-2, Apache-2.0) and on workbooks built here: merged cells, formulas,
dates, CSV in legacy encodings and delimiters, ODS, a damaged file, thousands of rows."""

from __future__ import annotations

import datetime as dt
import zipfile
from pathlib import Path

import openpyxl
import pytest

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.contract.chunking import address_line
from tasks.readers.registry import kind_of
from tasks.readers.sheet import BLOCK_CHARS, SheetReader, cell_text, sheet_blocks

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive-2" / "office"


def read(path: Path):  # type: ignore[no-untyped-def]
    source = Source(source_id=path.name, version="v", path=str(path), kind=kind_of(path))
    return source, SheetReader().read(source, Settings.model_construct())


def test_kinds() -> None:
    for name in ("бюджет.xls", "a.XLSX", "b.xlsm", "c.ods", "d.csv", "e.tsv"):
        assert kind_of(name) is SourceKind.sheet


def test_the_real_budget_sheets_are_cited_by_name_and_rows() -> None:
    source, outcome = read(FIXTURES / "poi_57925_budget.xls")
    assert not outcome.problems
    labels = [p.label for p in outcome.pages]
    assert {label.split(" · ")[0] for label in labels} == {"лист «Доходы»", "лист «Расходы»", "лист «Дефициты»"}
    deficit = next(p for p in outcome.pages if "источники внешнего финансирования бюджетов | 620" in p.text)
    assert deficit.label.startswith("лист «Дефициты» · строки ")
    assert address_line(source, deficit, None) == f"[poi_57925_budget.xls · {deficit.label}]"
    assert "57020 | -57020" in "".join(p.text for p in outcome.pages)  # numbers as the sheet holds them


def test_header_repeated_merged_cells_formulas_and_dates(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Расходы"
    sheet.append(["Смета на 2003 год"])
    sheet.merge_cells("A1:D1")  # a title across the columns: written once
    sheet.append(["Раздел", "Статья", "Дата", "Сумма, руб."])
    for n in range(200):
        sheet.append(
            ["Ремонт" if n % 50 == 0 else None, f"статья расходов номер {n}", dt.date(2003, 5, 1 + n % 28), 1000.5 + n]
        )
        if n % 50 == 0:
            sheet.merge_cells(f"A{n + 3}:A{n + 52}")  # a category spanning 50 rows: repeated down
    sheet.append(["Итого", None, None, "=SUM(D3:D202)"])
    path = tmp_path / "смета.xlsx"
    book.save(path)
    _, outcome = read(path)
    title, *blocks = outcome.pages
    assert title.text == "Смета на 2003 год" and title.label == "лист «Расходы» · строка 1"
    assert len(blocks) > 3 and all(p.text.startswith("Раздел | Статья | Дата | Сумма, руб.\n") for p in blocks)
    assert all(len(p.text) <= BLOCK_CHARS + 200 for p in blocks)
    row = next(p for p in blocks if "статья расходов номер 120" in p.text)
    assert "Ремонт | статья расходов номер 120 | 09.05.2003 | 1120,5" in row.text
    first, last = (int(x) for x in row.label.split("строки ")[1].split("–"))
    assert first <= 123 <= last  # row 123 of the sheet holds item 120
    assert blocks[-1].text.endswith("Итого") or "Итого" in blocks[-1].text  # a formula openpyxl never computed


def test_csv_in_cp1251_with_semicolons(tmp_path: Path) -> None:
    path = tmp_path / "реестр.csv"
    path.write_bytes("№;Контрагент;Сумма\n1;ООО «Ромашка»;15 000,00\n2;ИП Петров;2 500,50\n".encode("cp1251"))
    _, outcome = read(path)
    [page] = outcome.pages
    assert page.text == "№ | Контрагент | Сумма\n1 | ООО «Ромашка» | 15 000,00\n2 | ИП Петров | 2 500,50"
    assert page.label == "лист «реестр» · строки 2–3"


def test_tsv(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("Фамилия\tДолжность\nИванов\tкладовщик\n", encoding="utf-8")
    assert read(path)[1].pages[0].text == "Фамилия | Должность\nИванов | кладовщик"


def test_an_ods_read_as_a_stream(tmp_path: Path) -> None:
    content = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0">
<office:body><office:spreadsheet><table:table table:name="Кадры">
<table:table-row><table:table-cell office:value-type="string"><text:p>Фамилия</text:p></table:table-cell>
<table:table-cell office:value-type="string"><text:p>Оклад</text:p></table:table-cell></table:table-row>
<table:table-row><table:table-cell office:value-type="string"><text:p>Смирнова</text:p></table:table-cell>
<table:table-cell office:value-type="float" office:value="45000.5"><text:p>45 000,50</text:p></table:table-cell>
</table:table-row>
<table:table-row table:number-rows-repeated="1048570"><table:table-cell table:number-columns-repeated="1024"/>
</table:table-row></table:table></office:spreadsheet></office:body></office:document-content>"""
    path = tmp_path / "кадры.ods"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", content)
    [page] = read(path)[1].pages
    assert page.text == "Фамилия | Оклад\nСмирнова | 45000,5" and page.label == "лист «Кадры» · строка 2"


def test_a_damaged_workbook_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    for name, data in (("битый.xlsx", b"PK\x03\x04 not really"), ("битый.xls", b"\xd0\xcf\x11\xe0 garbage" * 10)):
        path = tmp_path / name
        path.write_bytes(data)
        outcome = read(path)[1]
        assert not outcome.pages and outcome.problems[0].reasons == [ReasonCode.unreadable_file]
        assert "does not open" in outcome.problems[0].detail


def test_cells_and_blocks() -> None:
    assert [cell_text(v) for v in (3.0, 0.25, True, None, dt.datetime(2003, 5, 12, 9, 30))] == [
        "3",
        "0,25",
        "да",
        "",
        "12.05.2003 09:30",
    ]
    rows = [(n, [f"значение {n}", str(n)]) for n in range(1, 1001)]
    blocks = list(sheet_blocks(iter(rows)))  # no header (no row of words): blocks of rows alone
    assert blocks[0][0] == 1 and blocks[-1][1] == 1000 and sum(b[2].count("\n") + 1 for b in blocks) == 1000

"""Spreadsheets (.xlsx/.xlsm, .xls, .ods, .csv/.tsv): each sheet read as a table, in blocks of rows.

A block is one page of the source: the sheet's header row, then as many rows as fit about one chunk, the cells of a
row joined by ` | ` (one table unit). Its label — what a citation shows — names the sheet and the rows as the
spreadsheet numbers them: `[бюджет.xls · лист «Расходы» · строки 40–75]`. The header row is repeated at the top of
every block, so a row found alone is still understood. Formulas come as the values the file stores for them; dates
as `ДД.ММ.ГГГГ`; numbers as written in Russian (`1234,5`). A merged range's value is repeated down its first column
(a category spanning rows stays with each row), not across (a title spanning columns is written once). Rows are
streamed: an .xlsx over LOAD_WHOLE_BYTES is read row by row (openpyxl read-only: no merged ranges), an .ods through
its content.xml (iterparse), a .csv after decoding.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind, Unit, UnitKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.base import ParseOutcome, UnreadableSourceError, failure, problem
from tasks.readers.text import decode_text

BLOCK_CHARS = 900  # rows a block takes: within one chunk of the default policy (350 tokens, ~1 000 characters)
LOAD_WHOLE_BYTES = 8 * 1024 * 1024  # an .xlsx up to this is loaded whole (merged ranges known), larger streamed
HEADER_SEARCH_ROWS = 30
MAX_CELL_CHARS = 2000

Row = tuple[int, list[str]]  # (the row's number as the spreadsheet shows it, its cells as text)


def cell_text(value: Any) -> str:
    """A cell's value as a reader of the sheet sees it: numbers with a decimal comma, dates as ДД.ММ.ГГГГ."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "да" if value else "нет"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g").replace(".", ",")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.strftime("%d.%m.%Y") if value.time() == dt.time() else value.strftime("%d.%m.%Y %H:%M")
    if isinstance(value, dt.date):
        return value.strftime("%d.%m.%Y")
    if isinstance(value, dt.time):
        return value.strftime("%H:%M")
    return " ".join(str(value).split())[:MAX_CELL_CHARS]


def _trimmed(cells: list[str]) -> list[str]:
    while cells and not cells[-1]:
        cells.pop()
    return cells


# --- the formats: each yields (sheet name, rows) -----------------------------------------------------------


def xlsx_sheets(path: Path) -> Iterator[tuple[str, Iterable[Row]]]:
    import openpyxl

    whole = path.stat().st_size <= LOAD_WHOLE_BYTES
    try:
        book = openpyxl.load_workbook(path, read_only=not whole, data_only=True)
    except Exception as exc:  # zipfile, XML and openpyxl's own errors all mean the same: not a readable workbook
        raise UnreadableSourceError(f"the workbook does not open: {failure(exc)}") from exc
    try:
        for sheet in book.worksheets:
            if not hasattr(sheet, "iter_rows"):  # a chart sheet
                continue
            fill: dict[tuple[int, int], Any] = {}
            for merged in getattr(sheet, "merged_cells", None) or ():
                value = sheet.cell(merged.min_row, merged.min_col).value
                fill.update({(r, merged.min_col): value for r in range(merged.min_row + 1, merged.max_row + 1)})
            yield sheet.title, _xlsx_rows(sheet, fill)
    finally:
        book.close()


def _xlsx_rows(sheet: Any, fill: dict[tuple[int, int], Any]) -> Iterator[Row]:
    for number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
        if not any(value is not None and value != "" for value in row):
            continue  # a row the merged ranges above would fill alone says nothing new
        cells = [cell_text(fill.get((number, col), value)) for col, value in enumerate(row, start=1)]
        yield number, _trimmed(cells)


def xls_sheets(path: Path) -> Iterator[tuple[str, Iterable[Row]]]:
    import xlrd

    try:
        book = xlrd.open_workbook(str(path), formatting_info=True, on_demand=True)
    except Exception as exc:  # xlrd raises its own, struct and compound-document errors on a damaged file
        try:  # formatting records xlrd cannot parse: read the values without merged ranges
            book = xlrd.open_workbook(str(path), on_demand=True)
        except Exception:
            raise UnreadableSourceError(f"the workbook does not open: {failure(exc)}") from exc
    try:
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            fill = {}
            for r0, r1, c0, _c1 in sheet.merged_cells:
                value = sheet.cell_value(r0, c0)
                fill.update({(r, c0): value for r in range(r0 + 1, r1)})
            yield sheet.name, _xls_rows(sheet, fill, book.datemode)
            book.unload_sheet(index)
    finally:
        book.release_resources()


def _xls_rows(sheet: Any, fill: dict[tuple[int, int], Any], datemode: int) -> Iterator[Row]:
    import xlrd

    for r in range(sheet.nrows):
        if not any(cell.value != "" for cell in sheet.row(r)):
            continue
        cells = []
        for c, cell in enumerate(sheet.row(r)):
            value = fill.get((r, c), cell.value)
            if cell.ctype == xlrd.XL_CELL_DATE and (r, c) not in fill:
                try:
                    value = xlrd.xldate.xldate_as_datetime(cell.value, datemode)
                except (ValueError, OverflowError):
                    pass
            elif cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
                value = fill.get((r, c), "")
            cells.append(cell_text(value))
        yield r + 1, _trimmed(cells)


_ODS = {
    "table": "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}",
    "office": "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}",
    "text": "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}",
}
ODS_MAX_REPEAT = 1000  # a row or cell «repeated» to the sheet's end (1 048 576 rows) is the blank tail


def ods_sheets(path: Path) -> Iterator[tuple[str, Iterable[Row]]]:
    """An OpenDocument spreadsheet through its content.xml, parsed as a stream: one sheet's rows at a time."""
    t, o = _ODS["table"], _ODS["office"]
    try:
        archive = zipfile.ZipFile(path)
        content = archive.open("content.xml")
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise UnreadableSourceError(f"not an OpenDocument spreadsheet (no content.xml): {failure(exc)}") from exc
    with archive, content:
        name, rows, number, cells = "", [], 0, []
        try:
            for event, element in ElementTree.iterparse(content, events=("start", "end")):
                if event == "start":
                    if element.tag == f"{t}table":
                        name, rows, number = element.get(f"{t}name", ""), [], 0
                    continue
                if element.tag == f"{t}table-cell" or element.tag == f"{t}covered-table-cell":
                    value = element.get(f"{o}value") or element.get(f"{o}date-value")
                    if element.get(f"{o}value-type") == "float" and value is not None:
                        value = float(value)
                    elif element.get(f"{o}value-type") != "date" or value is None:
                        value = "\n".join("".join(p.itertext()) for p in element.iter(f"{_ODS['text']}p"))
                    repeat = min(int(element.get(f"{t}number-columns-repeated", "1")), ODS_MAX_REPEAT)
                    cells.extend([cell_text(value)] * repeat)
                    element.clear()
                elif element.tag == f"{t}table-row":
                    repeat = int(element.get(f"{t}number-rows-repeated", "1"))
                    cells = _trimmed(cells)
                    for _ in range(min(repeat, ODS_MAX_REPEAT) if cells else 0):
                        number += 1
                        rows.append((number, list(cells)))
                    if not cells:
                        number += repeat
                    cells = []
                    element.clear()
                elif element.tag == f"{t}table":
                    yield name, rows
                    element.clear()
        except ElementTree.ParseError as exc:
            raise UnreadableSourceError(f"a damaged OpenDocument spreadsheet: {exc}") from exc


def csv_sheets(path: Path, name: str | None = None) -> Iterator[tuple[str, Iterable[Row]]]:
    """A .csv or .tsv in any encoding decode_text reads, its delimiter guessed from the first lines."""
    text, _ = decode_text(path.read_bytes())
    sample = text[:65536]
    if path.suffix.lower() == ".tsv":
        delimiter = "\t"
    else:
        try:
            delimiter = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        except csv.Error:
            counts = {d: sample.count(d) for d in ";,\t|"}
            delimiter = max(counts, key=counts.get)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    yield name or path.stem, ((number, _trimmed([cell_text(c) for c in row])) for number, row in enumerate(reader, 1))


FORMATS = {
    ".xlsx": xlsx_sheets,
    ".xlsm": xlsx_sheets,
    ".xls": xls_sheets,
    ".ods": ods_sheets,
    ".csv": csv_sheets,
    ".tsv": csv_sheets,
}


# --- rows → blocks ---------------------------------------------------------------------------------------------


def _is_header(cells: list[str]) -> bool:
    """A row of column names: two or more filled cells, most of them words (not numbers or column numbers)."""
    filled = [c for c in cells if c]
    words = [c for c in filled if any(ch.isalpha() for ch in c) and len(c) > 1]
    return len(filled) >= 2 and len(words) * 2 > len(filled)


def sheet_blocks(rows: Iterable[Row], block_chars: int = BLOCK_CHARS) -> Iterator[tuple[int, int, str]]:
    """(first row, last row, text) of each block of a sheet: the header row (once found within the first
    HEADER_SEARCH_ROWS filled rows) and then rows up to about block_chars. Empty rows are skipped; rows above the
    header (a title, an address) are a block of their own."""
    header: str | None = None
    header_row = 0
    block: list[str] = []
    first = last = size = 0
    given, seen = False, 0
    for number, cells in rows:
        if not any(cells):
            continue
        line = " | ".join(cells)
        seen += 1
        if header is None and not given and seen <= HEADER_SEARCH_ROWS and _is_header(cells):
            if block:
                yield first, last, "\n".join(block)
                block = []
            header, header_row = line, number
            continue
        if block and size + len(line) > block_chars:
            yield first, last, "\n".join([header, *block] if header is not None else block)
            block, given = [], True
        if not block:
            first, size = number, len(header or "")
        block.append(line)
        size += len(line) + 1
        last = number
    if block:
        yield first, last, "\n".join([header, *block] if header is not None else block)
    elif header is not None and not given:
        yield header_row, header_row, header


def table_unit(text: str) -> Unit:
    """A block is one table whatever its rows look like (a one-cell row is a group heading of the price list)."""
    rows, start = [], 0
    for line in text.split("\n"):
        rows.append((start, start + len(line)))
        start += len(line) + 1
    return Unit(kind=UnitKind.table, start=0, end=len(text), rows=rows)


def rows_label(sheet: str, first: int, last: int) -> str:
    rows = f"строка {first}" if first == last else f"строки {first}–{last}"
    return f"лист «{sheet}» · {rows}"


class SheetReader:
    kind = SourceKind.sheet
    suffixes = tuple(FORMATS)

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        outcome = ParseOutcome()
        path = Path(source.path)
        suffix = Path(source.source_id).suffix.lower()
        read_sheets = FORMATS[suffix]
        try:  # a .csv's one sheet is named after the file (its name, not the stored copy's of an attachment)
            sheets = csv_sheets(path, Path(source.file_name).stem) if read_sheets is csv_sheets else read_sheets(path)
            for sheet, rows in sheets:
                for first, last, text in sheet_blocks(rows):
                    number = len(outcome.pages) + 1
                    outcome.pages.append(
                        PageResult(
                            source_id=source.source_id,
                            source_version=source.version,
                            page=number,
                            text=text,
                            method="spreadsheet",
                            engine=f"{read_sheets.__name__.removesuffix('_sheets')}",
                            units=[table_unit(text)],
                            label=rows_label(sheet, first, last),
                        )
                    )
        except UnreadableSourceError as exc:
            return ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, str(exc))])
        outcome.page_count = len(outcome.pages)
        if not outcome.pages:
            outcome.problems.append(problem(source, ReasonCode.empty_text, "every sheet is empty"))
        return outcome

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        raise UnreadableSourceError("a spreadsheet has no page images")

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None

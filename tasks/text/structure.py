"""Structure: a page's text as typed units (headings, sentences of paragraphs, list items, tables, code) with the
character offsets of each unit in that text.

Three readers share one block classifier:
- `pdf_page_structure` — PyMuPDF blocks with font sizes and weights, ruled tables from `find_tables`; it also
  writes the page text the units point into (blocks joined by blank lines, table rows as `a | b | c`);
- `text_structure` — OCR output, `.txt` and `.md` (Markdown headings, lists, fenced code, pipe tables);
- `transcript_structure` — `[чч:мм:сс]` paragraphs of a transcript, each one unit with its start time.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pymupdf
from razdel import sentenize

from korpus.core.datamodel import Unit, UnitKind
from tasks.text.furniture import is_stamp_text

logger = logging.getLogger("korpus.structure")

LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}[.)]|[a-zа-я][)]|[-•–—*])\s+\S", re.IGNORECASE)
MD_HEADING = re.compile(r"^(#{1,6})\s+\S")
TABLE_TITLE = re.compile(r"^\s*(?:Таблица|Табл\.)\s*\d*", re.IGNORECASE)
TABLE_NOTE = re.compile(r"^\s*(?:Примечани[ея]|Прим\.|Источник)", re.IGNORECASE)
TIMECODE = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] ")
_BLANK = re.compile(r"\n[ \t]*\n+")
_NOT_HEADINGS = ("за исключением", "кроме ", "если иное", "при этом", "однако")
pymupdf.no_recommend_layout()  # it prints an advertisement to stdout, which korpus's --json output cannot have


@dataclass
class Block:
    start: int
    end: int
    hint: str | None = None  # "heading", "table", "code" when the reader knows better than the text
    level: int = 0
    rows: list[tuple[int, int]] = field(default_factory=list)


def _blocks(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    for gap in _BLANK.finditer(text):
        if text[pos : gap.start()].strip():
            yield pos, gap.start()
        pos = gap.end()
    if text[pos:].strip():
        yield pos, len(text)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    out, pos = [], start
    for line in text[start:end].split("\n"):
        s, e = _trim(text, pos, pos + len(line))
        if s < e:
            out.append((s, e))
        pos += len(line) + 1
    return out


def _looks_like_heading(line: str) -> bool:
    stripped = line.strip()
    return (
        0 < len(stripped) <= 90
        and not stripped.endswith((".", ",", ";", ":", "—", "-"))
        and (stripped[0].isupper() or stripped[0].isdigit())
        and not TABLE_TITLE.match(stripped)
        and not stripped.lower().startswith(_NOT_HEADINGS)
    )


def _pipe_table(lines: list[str]) -> bool:
    return len(lines) >= 2 and all(line.count("|") >= 1 for line in lines)


def classify(text: str, blocks: list[Block], markdown: bool = False) -> list[Unit]:
    """Blocks → units. Table titles and notes join their table; paragraphs split into razdel sentences; a block of
    a stamp frame's labels is furniture."""
    units: list[Unit] = []
    merged = _attach_table_titles_and_notes(text, blocks)
    for block_id, block in enumerate(merged):
        start, end = _trim(text, block.start, block.end)
        if start == end:
            continue
        lines = _lines(text, start, end)
        line_texts = [text[s:e] for s, e in lines]
        if block.hint == "furniture" or (block.hint is None and is_stamp_text(text[start:end])):
            units.append(Unit(kind=UnitKind.furniture, start=start, end=end, block=block_id))
        elif block.hint == "table" or (block.hint is None and _pipe_table(line_texts)):
            rows = block.rows or [ln for ln, t in zip(lines, line_texts, strict=True) if not _is_separator(t)]
            units.append(Unit(kind=UnitKind.table, start=start, end=end, block=block_id, rows=rows))
        elif block.hint == "code" or (markdown and line_texts[0].startswith("```")):
            units.append(Unit(kind=UnitKind.code, start=start, end=end, block=block_id))
        elif block.hint == "heading":
            units.append(Unit(kind=UnitKind.heading, start=start, end=end, level=block.level or 2, block=block_id))
        elif markdown and (m := MD_HEADING.match(line_texts[0])) and len(lines) == 1:
            units.append(Unit(kind=UnitKind.heading, start=start, end=end, level=len(m.group(1)), block=block_id))
        elif block.hint is None and len(lines) == 1 and _looks_like_heading(line_texts[0]) and not markdown:
            units.append(Unit(kind=UnitKind.heading, start=start, end=end, level=2, block=block_id))
        else:
            units.extend(_prose_units(text, lines, block_id))
    return units


def _is_separator(line: str) -> bool:
    return bool(re.fullmatch(r"[\s|:\-+]+", line))


def _attach_table_titles_and_notes(text: str, blocks: list[Block]) -> list[Block]:
    out: list[Block] = []
    for block in blocks:
        body = text[block.start : block.end]
        is_table = block.hint == "table" or (block.hint is None and _pipe_table(body.strip().split("\n")))
        if is_table and out and TABLE_TITLE.match(text[out[-1].start : out[-1].end]):
            title = out.pop()
            rows = block.rows or []
            block = Block(title.start, block.end, "table", rows=rows or _table_rows(text, block))
        elif out and out[-1].hint == "table" and TABLE_NOTE.match(body):
            table = out.pop()
            block = Block(table.start, block.end, "table", rows=table.rows)
        elif is_table and block.hint is None:
            block = Block(block.start, block.end, "table", rows=_table_rows(text, block))
        out.append(block)
    return out


def _table_rows(text: str, block: Block) -> list[tuple[int, int]]:
    return [(s, e) for s, e in _lines(text, block.start, block.end) if not _is_separator(text[s:e])]


_ENDS_SENTENCE = (".", "!", "?", "…", ".»", '."')
_ENDS_ENUMERATION = (":", ";")


def _prose_units(text: str, lines: list[tuple[int, int]], block_id: int) -> list[Unit]:
    """List items and paragraphs of one block, told apart line by line.

    A line joins the one before when it is a wrap continuation (the line before ends mid-sentence). A line after
    one ending with «:» or «;» is the next item of an enumeration, marked or not; a line after a finished
    sentence opens a new paragraph — so a law written one paragraph per line never becomes one giant item.
    """
    groups: list[list[int]] = []  # [start, end, is_item]
    for s, e in lines:
        line = text[s:e]
        marker = bool(LIST_MARKER.match(line))
        if groups:
            before = text[groups[-1][0] : groups[-1][1]].rstrip()
            finished = before.endswith(_ENDS_SENTENCE) or before.endswith(_ENDS_ENUMERATION)
            if not marker and not finished:
                groups[-1][1] = e
                continue
            enumerated = before.endswith(_ENDS_ENUMERATION) and not line[:1].isupper()
            groups.append([s, e, int(marker or enumerated)])
        else:
            groups.append([s, e, int(marker)])
    units: list[Unit] = []
    for start, end, is_item in groups:
        if is_item:
            units.append(Unit(kind=UnitKind.list_item, start=start, end=end, block=block_id))
        else:
            units += [
                Unit(kind=UnitKind.sentence, start=start + sent.start, end=start + sent.stop, block=block_id)
                for sent in sentenize(text[start:end])
            ]
    return units


def text_structure(text: str, markdown: bool = False) -> list[Unit]:
    """Units of plain text: OCR output, `.txt`, or `.md` with `markdown=True`; a stamp frame's labels are furniture."""
    blocks = [Block(s, e) for s, e in _fenced_blocks(text)] if markdown else [Block(s, e) for s, e in _blocks(text)]
    return classify(text, blocks, markdown=markdown)


def _fenced_blocks(text: str) -> list[tuple[int, int]]:
    """Blank-line blocks, except that a ``` fence keeps everything up to its closing fence in one block."""
    out: list[tuple[int, int]] = []
    pos = 0
    for fence in re.finditer(r"^```[^\n]*\n.*?^```[ \t]*$", text, flags=re.M | re.S):
        out += [(pos + s, pos + e) for s, e in _blocks(text[pos : fence.start()])]
        out.append((fence.start(), fence.end()))
        pos = fence.end()
    out += [(pos + s, pos + e) for s, e in _blocks(text[pos:])]
    return out


def transcript_structure(text: str) -> list[Unit]:
    """One paragraph unit per `[чч:мм:сс]` line, with its start time."""
    units, pos = [], 0
    for i, line in enumerate(text.split("\n")):
        m = TIMECODE.match(line)
        if m and line.strip():
            seconds = int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])
            units.append(
                Unit(kind=UnitKind.paragraph, start=pos, end=pos + len(line.rstrip()), block=i, t_start=seconds)
            )
        pos += len(line) + 1
    return units


def pdf_page_structure(page) -> tuple[str, list[Unit]]:
    """Page text rebuilt from PyMuPDF blocks in reading order, and its units.

    Headings: a line whose largest span is ≥ 1.15× the page's body size, or bold and short. Tables: ruled tables
    found by `find_tables`, written row by row as `cell | cell`. Furniture — rotated lines on a page that is mostly
    upright, a stamp frame's labels in a line or a table row (tasks/text/furniture.py) — goes to the end of the
    page text as one furniture unit, so no heading and no other chunk's body holds it.
    """
    tables = _find_tables(page)
    data = page.get_text("dict", sort=True)
    furniture: list[str] = []
    rotated = _rotated_lines(data)
    for number, (bbox, rows) in enumerate(tables):
        kept = []
        for row in rows:
            if _stamp_row(row):
                furniture.append(row)
                continue
            cells = row.split(" | ")
            stamp = {n for n, cell in enumerate(cells) if cell.strip() and is_stamp_text(cell)}
            furniture += [cells[n].strip() for n in sorted(stamp)]  # a label beside the title block's content
            row = " | ".join("" if n in stamp else cell for n, cell in enumerate(cells))
            if row.strip(" |"):
                kept.append(row)
        tables[number] = (bbox, kept)
    sizes: list[float] = []
    for block in data["blocks"]:
        for line in block.get("lines", []):
            for span in line["spans"]:
                if span["text"].strip():
                    sizes += [span["size"]] * len(span["text"])
    body = sorted(sizes)[len(sizes) // 2] if sizes else 11.0
    parts: list[str] = []
    blocks: list[Block] = []
    pos = 0

    def emit(chunk: str, hint: str | None = None, level: int = 0, rows: list | None = None) -> None:
        nonlocal pos
        if parts:
            parts.append("\n\n")
            pos += 2
        blocks.append(Block(pos, pos + len(chunk), hint, level, rows or []))
        parts.append(chunk)
        pos += len(chunk)

    emitted_tables: set[int] = set()
    previous: tuple[dict, str] | None = None  # the last plain paragraph block, which the next may continue
    for block in data["blocks"]:
        if block.get("type") != 0:
            continue
        table_id = next((i for i, (bbox, _) in enumerate(tables) if _inside(block["bbox"], bbox)), None)
        if table_id is not None:
            if table_id not in emitted_tables and tables[table_id][1]:
                emitted_tables.add(table_id)
                rows_text = tables[table_id][1]
                text = "\n".join(rows_text)
                rows, offset = [], pos + (2 if parts else 0)
                for row in rows_text:
                    rows.append((offset, offset + len(row)))
                    offset += len(row) + 1
                emit(text, "table", rows=rows)
            previous = None
            continue
        kept = []
        for line in block.get("lines", []):
            text = _line_text(line["spans"]).strip()
            if text and (id(line) in rotated or is_stamp_text(text)):
                furniture.append(text)
            elif text:
                kept.append((line, text))
        lines = [text for _line, text in kept]
        if not lines:
            continue
        spans = [span for line, _text in kept for span in line["spans"] if span["text"].strip()]
        biggest = max(span["size"] for span in spans)
        bold = all(span["flags"] & 16 for span in spans)
        text = "\n".join(lines)
        short = len(lines) <= 2 and len(text) <= 120 and not text.rstrip().endswith((".", ";", ","))
        if biggest >= body * 1.15 and short:
            emit(text, "heading", level=1 if biggest >= body * 1.4 else 2)
        elif bold and short and not TABLE_TITLE.match(text):
            emit(text, "heading", level=3)
        elif previous is not None and _continues(previous, block, text, body):
            parts[-1] += "\n" + text
            pos += 1 + len(text)
            blocks[-1].end = pos
        else:
            emit(text)
        previous = (block, text) if blocks and blocks[-1].hint is None else None
    if furniture:
        emit("\n".join(furniture), "furniture")
    page_text = "".join(parts)
    return page_text, classify(page_text, blocks)


def _rotated_lines(data: dict) -> set[int]:
    """Ids of the lines not written left to right, when they hold at most a quarter of the page's characters (a
    margin stamp, a vertical label; a page typeset sideways is all rotated and keeps its text)."""
    rotated, chars, turned = set(), 0, 0
    for block in data["blocks"]:
        for line in block.get("lines", []):
            size = sum(len(span["text"].strip()) for span in line["spans"])
            chars += size
            if abs(line.get("dir", (1.0, 0.0))[0]) < 0.9:
                rotated.add(id(line))
                turned += size
    return rotated if turned <= chars / 4 else set()


def _stamp_row(row: str) -> bool:
    """A table row whose filled cells are all a stamp frame's labels: «| Взам. инв. № |  |  |»."""
    cells = [cell.strip() for cell in row.split(" | ") if cell.strip(" |")]
    return bool(cells) and (is_stamp_text(" ".join(cells)) or all(is_stamp_text(cell) for cell in cells))


def _continues(previous: tuple[dict, str], block: dict, text: str, body: float) -> bool:
    """Generated PDFs often make every line its own block: a block just under the one before, at about its left
    edge, continues that paragraph when the one before stops mid-sentence or this one starts in lowercase."""
    before, before_text = previous
    gap = block["bbox"][1] - before["bbox"][3]
    aligned = abs(block["bbox"][0] - before["bbox"][0]) <= body * 4
    mid_sentence = not before_text.rstrip().endswith((".", ":", ";", "!", "?", "…"))
    lowercase = text[:1].islower()
    return -body * 0.3 <= gap <= body * 0.6 and aligned and (mid_sentence or lowercase)


def _find_tables(page) -> list[tuple[tuple[float, float, float, float], list[str]]]:
    try:
        found = page.find_tables()
    except Exception as exc:  # find_tables is heuristic; a page it cannot read simply has no ruled tables
        logger.warning(
            "page %s: table detection failed (%s: %s); its text is read without ruled tables",
            page.number + 1,
            type(exc).__name__,
            exc,
        )
        return []
    tables = []
    for table in found.tables:
        rows = [" | ".join((cell or "").replace("\n", " ").strip() for cell in row) for row in table.extract()]
        rows = [r for r in rows if r.strip(" |")]
        if rows:
            tables.append((tuple(table.bbox), rows))
    return tables


def _inside(inner: tuple, outer: tuple, slack: float = 2.0) -> bool:
    """Mostly inside: at least half of the inner box lies in the outer one (a cell's text block often pokes out of
    the ruled table by a few points; counting it twice would put the cell in the page text twice)."""
    x0, y0 = max(inner[0], outer[0] - slack), max(inner[1], outer[1] - slack)
    x1, y1 = min(inner[2], outer[2] + slack), min(inner[3], outer[3] + slack)
    area = max(1e-6, (inner[2] - inner[0]) * (inner[3] - inner[1]))
    return x1 > x0 and y1 > y0 and (x1 - x0) * (y1 - y0) / area >= 0.5


def _line_text(spans: list[dict]) -> str:
    """A line's spans joined; a space goes between two spans with a visible gap (a footnote mark «⁶Литвинова»,
    columns of a form) unless one of them already has it."""
    out = ""
    right, size = None, 0.0
    for span in spans:
        text = span["text"]
        if out and right is not None and text and not out.endswith(" ") and not text.startswith(" "):
            gap = span["bbox"][0] - right > 0.15 * span["size"]
            superscript = abs(span["size"] - size) > 0.25 * max(size, span["size"]) and (
                out[-1].isdigit() != text[0].isdigit()
            )
            if gap or superscript:
                out += " "
        out += text
        right, size = span["bbox"][2], span["size"]
    return out

"""BOUND / CONNECT / ENRICH: typed units → chunks, by a versioned policy.

- `page-v1` — one chunk per page or per ~1 minute of speech (the foundation's policy).
- `structure-v2` (default) — `structure-v1` whose chunks always carry their ancestors' headings in the context line.
- `structure-v1` — structure-aware (docs/chunking.md): breaks at headings and structural transitions inside a
  token range, a heading travels with what follows it, a sentence opening with an exception marker («за
  исключением», «кроме», …) stays with the rule before it, a table stays whole with its title and notes (an
  oversized one splits by rows, the header row repeated as context), a numbered procedure splits by steps with
  its title in the section path.

Invariant for every policy: a chunk's `body` is byte-for-byte `page.text[locator.start:locator.end]`. Context
(the address line, a section path, a repeated table header) goes into `text` before the body, never into it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from razdel import sentenize

from korpus.core.datamodel import (
    Chunk,
    Locator,
    PageResult,
    QuarantineItem,
    ReasonCode,
    Source,
    SourceKind,
    Unit,
    UnitKind,
    chunk_id_for,
    timecode,
)
from tasks.contract.furniture import content_units, drop_running_lines, furniture_spans
from tasks.contract.policies import DEFAULT_POLICY, POLICIES, ChunkPolicy
from tasks.text.regions import regions

TokenCounter = Callable[[str], int]

EXCEPTION_MARKERS = (
    "за исключением",
    "кроме",
    "если иное",
    "однако",
    "при этом",
    "вместе с тем",
    "в случае если",
    "в случае, если",
    "исключение составляют",
    "не распространяется",
    "не применяется",
    "тем не менее",
    "но ",
)
"""A sentence opening with one of these qualifies the one before it: they are never split apart."""


def chars_as_tokens(text: str) -> int:
    """A rough counter (~4 characters per token) for tests and when no tokenizer is at hand."""
    return max(1, len(text) // 4)


@dataclass
class _Piece:
    """Consecutive units that must stay together, or a run of table rows."""

    start: int
    end: int
    kinds: list[UnitKind]
    units: list[Unit] = field(default_factory=list)
    context: str = ""  # a repeated table header

    @property
    def starts_with_heading(self) -> bool:
        return self.kinds[0] is UnitKind.heading

    @property
    def kind_class(self) -> str:
        body = [k for k in self.kinds if k is not UnitKind.heading] or self.kinds
        return {UnitKind.sentence: "prose", UnitKind.paragraph: "prose"}.get(body[0], body[0].value)


def is_exception_sentence(text: str) -> bool:
    head = text.lstrip(' «"(—-').lower()
    return head.startswith(EXCEPTION_MARKERS)


def address_line(source: Source, page: PageResult, part: int | None) -> str:
    if source.kind is SourceKind.meta:  # one part a page: «[Хронология событий · часть 7]»
        return f"[{source.file_name} · часть {page.page}]"
    if page.page is None:
        return f"[{source.file_name} · {timecode(page.t_start or 0.0)}]"
    if page.label:  # a spreadsheet's «лист «Расходы» · строки 40–75», a letter's date, sender and subject
        return f"[{source.file_name} · {page.label}" + ("]" if part is None else f" · часть {part}]")
    if source.kind is SourceKind.text and page.page == 1:
        return f"[{source.file_name}]" if part is None else f"[{source.file_name} · часть {part}]"
    suffix = "" if part is None else f" · часть {part}"
    return f"[{source.file_name} · лист {page.page}{suffix}]"


# --- the foundation policy -------------------------------------------------------------------------------


def _body_span(text: str) -> tuple[int, int]:
    start = len(text) - len(text.lstrip())
    return start, max(start, len(text.rstrip()))


def page_spans(page: PageResult) -> list[tuple[int, int, list[str], str]]:
    start, end = _body_span(page.text)
    return [(start, end, [], "")] if start < end else []


# --- structure-v1 ------------------------------------------------------------------------------------------


def _pieces(text: str, units: Sequence[Unit], more_follows: bool = False, walls: Sequence[int] = ()) -> list[_Piece]:
    """Glue what must not be separated: headings to what follows, exception sentences to what precedes — never
    across a wall (page furniture between them: a heading before it stays in the section path only).

    Headings at the end of a page that has more pages after it open the next page's section: they travel in
    the section path of its first chunk instead of ending a chunk here."""
    pieces: list[_Piece] = []
    pending_headings: list[Unit] = []
    for unit in units:
        if unit.kind is UnitKind.heading:
            pending_headings.append(unit)
            continue
        walled = [w for w in walls if (pending_headings[0].start if pending_headings else unit.start) < w < unit.start]
        pending_headings = [h for h in pending_headings if not walled or h.start > walled[-1]]
        glue = (
            pieces
            and not pending_headings
            and unit.kind is UnitKind.sentence
            and is_exception_sentence(text[unit.start : unit.end])
            and not any(pieces[-1].end <= w < unit.start for w in walls)
        )
        if glue:
            pieces[-1].end = unit.end
            pieces[-1].kinds.append(unit.kind)
            pieces[-1].units.append(unit)
            continue
        group = [*pending_headings, unit]
        pending_headings = []
        pieces.append(_Piece(group[0].start, unit.end, [u.kind for u in group], list(group)))
    if pending_headings and not more_follows:  # headings closing the document: their own chunk
        pieces.append(
            _Piece(
                pending_headings[0].start,
                pending_headings[-1].end,
                [u.kind for u in pending_headings],
                list(pending_headings),
            )
        )
    return pieces


def _split_table(text: str, piece: _Piece, count: TokenCounter, limit: int) -> list[_Piece]:
    """An oversized table: runs of whole rows, the header row repeated as context of every later part."""
    table = next(u for u in piece.units if u.kind is UnitKind.table)
    if len(table.rows) < 3:
        return [piece]
    header = text[table.rows[0][0] : table.rows[0][1]]
    parts: list[_Piece] = []
    start = piece.start
    run_end = table.rows[0][1]
    for row_start, row_end in table.rows[1:]:
        grown = text[start:row_end]
        context = header if parts else ""
        if count(context + "\n" + grown) > limit and run_end > start:
            parts.append(_Piece(start, run_end, [UnitKind.table], [table], context=context))
            start = row_start
        run_end = row_end
    parts.append(_Piece(start, piece.end, [UnitKind.table], [table], context=header if parts else ""))
    return parts


def _split_long(text: str, piece: _Piece, count: TokenCounter, limit: int) -> list[_Piece]:
    """An over-long paragraph or list item (a law written one paragraph per line): runs of whole sentences
    (razdel) up to the limit; a single sentence longer than that is cut at the last space that fits."""
    cuts: list[tuple[int, int]] = []
    for sentence in sentenize(text[piece.start : piece.end]):
        s, e = piece.start + sentence.start, piece.start + sentence.stop
        if cuts and count(text[cuts[-1][0] : e]) <= limit:
            cuts[-1] = (cuts[-1][0], e)
            continue
        while count(text[s:e]) > limit:
            cut = text.rfind(" ", s, s + max(1, (e - s) * limit // count(text[s:e])))
            cut = cut if cut > s else s + max(1, (e - s) // 2)
            cuts.append((s, cut))
            s = cut
            while s < e and text[s].isspace():
                s += 1
        if s < e:
            cuts.append((s, e))
    if len(cuts) <= 1:
        return [piece]
    first_kinds = piece.kinds[:1] if piece.starts_with_heading else []
    return [
        _Piece(s, e, [*(first_kinds if i == 0 else []), UnitKind.sentence], [], piece.context if i == 0 else "")
        for i, (s, e) in enumerate(cuts)
    ]


def structure_spans(
    page: PageResult, units: Sequence[Unit], policy: ChunkPolicy, count: TokenCounter, more_follows: bool = False
) -> list[tuple[int, int, list[str], str]]:
    """(start, end, extra section path, context) for each chunk of one page."""
    text = page.text
    every_unit, units = units, content_units(units)
    pieces: list[_Piece] = []
    walls = [u.start for u in every_unit if u.kind is UnitKind.furniture]
    for piece in _pieces(text, units, more_follows, walls):
        is_table = UnitKind.table in piece.kinds
        if is_table and count(text[piece.start : piece.end]) > policy.max_tokens:
            pieces += _split_table(text, piece, count, policy.max_tokens)
        elif not is_table and count(text[piece.start : piece.end]) > policy.max_tokens:
            pieces += _split_long(text, piece, count, policy.max_tokens)
        else:
            pieces.append(piece)
    spans: list[tuple[int, int, list[str], str]] = []
    current: list[_Piece] = []

    def flush() -> None:
        if current:
            spans.append(
                (current[0].start, current[-1].end, _procedure_title(text, units, current[0]), current[0].context)
            )
            current.clear()

    for piece in pieces:
        if current:
            size = count(text[current[0].start : piece.end])
            transition = piece.kind_class != current[-1].kind_class
            enough = count(text[current[0].start : current[-1].end]) >= policy.min_tokens
            if (
                piece.starts_with_heading
                or piece.context
                or size > policy.max_tokens
                or (transition and enough)
                or UnitKind.table in current[-1].kinds
                or UnitKind.table in piece.kinds
                or any(current[-1].end <= w < piece.start for w in walls)
            ):
                flush()
        current.append(piece)
    flush()
    return spans


def _procedure_title(text: str, units: Sequence[Unit], first: _Piece) -> list[str]:
    """A chunk starting inside a numbered procedure keeps the procedure's title in its section path."""
    if first.kinds[0] is not UnitKind.list_item:
        return []
    before = [u for u in units if u.end <= first.start and u.kind is not UnitKind.list_item]
    if before and text[before[-1].start : before[-1].end].rstrip().endswith(":"):
        return [text[before[-1].start : before[-1].end].strip()]
    return []


# --- both policies ------------------------------------------------------------------------------------------


@dataclass
class HeadingTrail:
    """The heading chain as a source is read page by page: level → heading text."""

    levels: dict[int, str] = field(default_factory=dict)

    def update(self, text: str, units: Sequence[Unit], upto: int) -> list[str]:
        for unit in units:
            if unit.kind is UnitKind.heading and unit.start < upto:
                self.levels = {lv: t for lv, t in self.levels.items() if lv < unit.level}
                self.levels[unit.level] = " ".join(text[unit.start : unit.end].lstrip("#").split())
        return [self.levels[lv] for lv in sorted(self.levels)]


def build_chunks(
    source: Source,
    pages: list[PageResult],
    policy_name: str = DEFAULT_POLICY,
    count: TokenCounter = chars_as_tokens,
    language: str = "ru",
    spans_override: Callable[[PageResult], list[tuple[int, int, list[str], str]] | None] | None = None,
) -> tuple[list[Chunk], list[QuarantineItem]]:
    """Chunk a source's pages. An empty page becomes a quarantine item, never a silent drop.

    `spans_override` lets an external splitter propose a page's spans; None means "use the policy".
    """
    if source.owner is None or source.access is None:
        raise ValueError(f"{source.source_id}: chunks need owner and access (admission should have stopped it)")
    policy = POLICIES[policy_name]
    pages = drop_running_lines(pages)
    chunks: list[Chunk] = []
    empty: list[QuarantineItem] = []
    trail = HeadingTrail()
    for number, page in enumerate(pages, start=1):
        if policy.name == "page-v1" or not page.units:
            spans = page_spans(page)
        else:
            spans = (spans_override(page) if spans_override else None) or structure_spans(
                page, page.units, policy, count, more_follows=number < len(pages)
            )
        furniture = furniture_spans(page.units) if policy.name != "page-v1" else []
        if not spans and page.text.strip() and not furniture:
            if any(later.text.strip() for later in pages[number:]):
                trail.update(page.text, page.units, len(page.text) + 1)  # only headings: they open the next page
                continue
            spans = [(0, len(page.text), [], "")]  # headings no text follows (a title page, a cover): a chunk
        if not spans and not furniture and page.method != "blank":
            empty.append(
                QuarantineItem(
                    source_id=source.source_id,
                    source_version=source.version,
                    page=page.page,
                    t_start=page.t_start,
                    reasons=[ReasonCode.empty_text],
                    detail=f"{page.method} produced no text",
                )
            )
            continue
        for part, (start, end, extra_path, context) in enumerate(spans + furniture, start=1):
            body = page.text[start:end]
            aside = part > len(spans)  # furniture: its own section, no heading of the page's
            headings = trail.update(page.text, page.units, start + 1) if not aside else []
            section = [*headings, *extra_path] if policy.name != "page-v1" else [source.file_name]
            t_start, t_end = _times(page, start, end)
            address = address_line(source, page, part if len(spans) + len(furniture) > 1 else None)
            lines = [address]
            if policy.name != "page-v1" and section:
                path = section if not body.startswith(section[-1][:20]) else section[:-1] if policy.full_path else []
                if path:
                    lines.append("§ " + " › ".join(path))
            if context:
                lines.append(context)
            ordinal = len(chunks)
            chunks.append(
                Chunk(
                    chunk_id=chunk_id_for(source.version, source.source_id, ordinal),
                    source_id=source.source_id,
                    source_version=source.version,
                    section_path=section,
                    locator=Locator(
                        page=page.page,
                        t_start=t_start,
                        t_end=t_end,
                        heading=headings[-1] if headings else None,
                        start=start,
                        end=end,
                    ),
                    text="\n".join([*lines, body]),
                    body=body,
                    owner=source.owner,
                    access_rule=source.access,
                    tenant=source.tenant or "default",
                    policy_version=policy.name,
                    language=language,
                    regions=regions(page, start, end),
                )
            )
        trail.update(page.text, page.units, len(page.text) + 1)
    for before, after in itertools.pairwise(chunks):
        before.next_id = after.chunk_id
        after.previous_id = before.chunk_id
    return chunks, empty


_STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] ", re.M)


def _times(page: PageResult, start: int, end: int) -> tuple[float | None, float | None]:
    """Speech chunks: from the first timecode in the body to the next one after it (or the stretch's end)."""
    if page.t_start is None:
        return None, None
    stamps = [(m.start(), int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])) for m in _STAMP.finditer(page.text)]
    inside = [t for pos, t in stamps if start <= pos < end]
    after = [t for pos, t in stamps if pos >= end]
    t0 = float(inside[0]) if inside else page.t_start
    t1 = float(after[0]) if after else page.t_end
    return max(t0, page.t_start), t1


def page_chunks(
    source: Source, pages: list[PageResult], language: str = "ru"
) -> tuple[list[Chunk], list[QuarantineItem]]:
    """The foundation policy: one chunk per page or stretch of speech."""
    return build_chunks(source, pages, "page-v1", language=language)

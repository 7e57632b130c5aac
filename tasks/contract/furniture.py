"""Page furniture as the chunker sees it: running headers and footers, which start no chunk and enter no section
path, and furniture units (a stamp frame's labels, rotated margin text — tasks/text/furniture.py), which become a
chunk of their own under the section «Служебные надписи» so `korpus exact` finds them while no heading and no other
chunk's body holds them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from korpus.core.datamodel import FURNITURE_SECTION, PageResult, Unit, UnitKind

_DIGITS = re.compile(r"\d+")


def _running_key(text: str) -> str:
    return " ".join(_DIGITS.sub("#", text.lower()).split())


def running_lines(pages: Sequence[PageResult]) -> set[str]:
    """Running headers and footers: a short unit (a document code «41327606.425000.462-01 33 01», a page number)
    that opens or closes at least half the pages (and three), digits counted as one."""
    paged = [p for p in pages if p.page is not None and p.t_start is None and p.units]
    if len(paged) < 3:
        return set()
    seen: Counter[str] = Counter()
    for page in paged:
        content = content_units(page.units) or page.units
        edges = [content[0], content[-1]]
        seen.update({_running_key(page.text[u.start : u.end]) for u in edges if u.end - u.start <= 80})
    return {key for key, n in seen.items() if key and n >= max(3, len(paged) / 2)}


def drop_running_lines(pages: list[PageResult]) -> list[PageResult]:
    """Pages whose running headers and footers are left out of the units: they start no chunk and enter no
    section path. The page text is untouched (chunk bodies stay exact substrings of it)."""
    running = running_lines(pages)
    if not running:
        return pages
    out = []
    for page in pages:
        content = content_units(page.units)
        edge = {id(content[0]), id(content[-1])} if content else set()
        units = [u for u in page.units if not (id(u) in edge and _running_key(page.text[u.start : u.end]) in running)]
        out.append(page.model_copy(update={"units": units}) if len(units) != len(page.units) else page)
    return out


def content_units(units: Sequence[Unit]) -> list[Unit]:
    """The units a chunk is made of: everything but furniture."""
    return [u for u in units if u.kind is not UnitKind.furniture]


def furniture_spans(units: Sequence[Unit]) -> list[tuple[int, int, list[str], str]]:
    """One span per run of consecutive furniture units, in the chunker's (start, end, section path, context)."""
    spans: list[tuple[int, int, list[str], str]] = []
    run: list[Unit] = []
    for unit in [*units, None]:
        if unit is not None and unit.kind is UnitKind.furniture:
            run.append(unit)
            continue
        if run:
            spans.append((run[0].start, run[-1].end, [FURNITURE_SECTION], ""))
            run = []
    return spans

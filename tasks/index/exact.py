"""`search_exact` and `count_mentions` as every backend answers them: the backend finds the chunks holding the
phrase, this module locates each occurrence in their bodies."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from korpus.core.datamodel import timecode
from tasks.text.regions import unpack

_STAMP = re.compile(r"\[(\d\d:\d\d:\d\d)\]")


def no_occurrences(text: str) -> dict[str, Any]:
    return {"query": text, "total": 0, "by_source": {}, "occurrences": []}


def locate_occurrences(
    text: str, rows: Iterable[tuple[str, int | None, float | None, str, str, str | None]], limit: int
) -> dict[str, Any]:
    """Every occurrence of `text` (case-insensitive, any run of whitespace between its words) in the bodies of
    `rows` — (source id, page, start time, body, chunk id, packed regions) of chunks that matched the phrase — with
    file, page or timecode, the line, ±80 characters of context, the chunk's regions, counts per source and the
    total."""
    pattern = re.compile(r"\s+".join(re.escape(part) for part in text.split()), re.IGNORECASE)
    occurrences: list[dict[str, Any]] = []
    by_source: dict[str, int] = {}
    for source_id, page, t_start, body, chunk_id, regions in rows:
        for match in pattern.finditer(body):
            by_source[source_id] = by_source.get(source_id, 0) + 1
            if len(occurrences) >= limit:
                continue
            line_start = body.rfind("\n", 0, match.start()) + 1
            line_end = body.find("\n", match.end())
            stamp = _STAMP.findall(body[: match.start()])
            occurrences.append(
                {
                    "source_id": source_id,
                    "page": page,
                    "timecode": stamp[-1] if stamp else (timecode(t_start) if t_start is not None else None),
                    "line": body[line_start : line_end if line_end >= 0 else len(body)].strip(),
                    "context": body[max(0, match.start() - 80) : match.end() + 80].replace("\n", " "),
                    "chunk_id": chunk_id,
                    "regions": unpack(regions),
                }
            )
    return {"query": text, "total": sum(by_source.values()), "by_source": by_source, "occurrences": occurrences}


def mentions(found: dict[str, Any]) -> dict[str, Any]:
    """`count_mentions` from a `locate_occurrences` answer: the total and the count per source."""
    return {"query": found["query"], "total": found["total"], "by_source": found["by_source"]}

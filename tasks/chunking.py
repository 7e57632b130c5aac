"""BOUND / CONNECT / ENRICH, foundation policy `page-v1`: one chunk per page or per ~1 minute of speech.

Every chunk's text starts with its own address, so a citation survives any RAG engine that drops metadata:
`[том_2.pdf · лист 147]`, `[допрос_03.mp3 · 00:12:34]`. The body after the address line is the page (or
transcript stretch) text itself, at recorded character offsets — never rewritten.
"""

from __future__ import annotations

import itertools

from korpus.datamodel import (
    POLICY_VERSION,
    Chunk,
    Locator,
    PageResult,
    QuarantineItem,
    ReasonCode,
    Source,
    chunk_id_for,
)
from tasks.audio import timecode


def address_line(file_name: str, page: PageResult) -> str:
    if page.page is not None:
        return f"[{file_name} · лист {page.page}]"
    return f"[{file_name} · {timecode(page.t_start or 0.0)}]"


def _body_span(text: str) -> tuple[int, int]:
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    return start, max(start, end)


def page_chunks(
    source: Source, pages: list[PageResult], language: str = "ru"
) -> tuple[list[Chunk], list[QuarantineItem]]:
    """One chunk per non-empty page; an empty page becomes a quarantine item, never a silent drop."""
    if source.owner is None or source.access is None:
        raise ValueError(f"{source.source_id}: chunks need owner and access (admission should have stopped it)")
    chunks: list[Chunk] = []
    empty: list[QuarantineItem] = []
    for page in pages:
        start, end = _body_span(page.text)
        if start == end:
            empty.append(
                QuarantineItem(
                    source_id=source.source_id,
                    source_version=source.version,
                    page=page.page,
                    reasons=[ReasonCode.empty_text],
                    detail=f"{page.method} produced no text",
                )
            )
            continue
        body = page.text[start:end]
        ordinal = len(chunks)
        chunks.append(
            Chunk(
                chunk_id=chunk_id_for(source.version, source.source_id, ordinal),
                source_id=source.source_id,
                source_version=source.version,
                section_path=[source.file_name],
                locator=Locator(page=page.page, t_start=page.t_start, t_end=page.t_end, start=start, end=end),
                text=f"{address_line(source.file_name, page)}\n{body}",
                body=body,
                owner=source.owner,
                access_rule=source.access,
                tenant=source.tenant or "default",
                policy_version=POLICY_VERSION,
                language=language,
            )
        )
    for before, after in itertools.pairwise(chunks):
        before.next_id = after.chunk_id
        after.previous_id = before.chunk_id
    return chunks, empty

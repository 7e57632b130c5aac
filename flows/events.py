"""Prefect events a refresh emits, for automations and the event feed of the Prefect UI.

- `korpus.sources.indexed` — a group of source versions was published (one event a group of up to 100, Prefect's
  limit on related resources, not a document: at 1,000
  letters an event each cost the refresh 2 s of its 16, and the Prefect server 1.5 CPU-seconds); each source is a
  related resource (role `source`), the payload lists each one's version, kind, chunks, pages and method counts;
- `korpus.source.quarantined` — a refresh put items of a source into the review queue (count, reason codes);
- `korpus.refresh.completed` — the refresh ended (counts from its summary, and the open queue size).

Each event's resource is the source (`korpus.source.<source id>`) or the data directory (`korpus.data.<path>`);
Prefect relates it to the flow run that emitted it. Events carry identifiers, counts and reason codes only — never
document text: whoever can read the Prefect event feed is not thereby granted an access scope.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from prefect.events import emit_event

from korpus.core.datamodel import QuarantineItem, Source

SOURCES_INDEXED = "korpus.sources.indexed"
SOURCE_QUARANTINED = "korpus.source.quarantined"
REFRESH_COMPLETED = "korpus.refresh.completed"


def _source_resource(source_id: str, access: str | None) -> dict[str, str]:
    return {
        "prefect.resource.id": f"korpus.source.{source_id}",
        "prefect.resource.name": source_id,
        "korpus.access": access or "none",
    }


MAX_RELATED = 100
"""Prefect refuses an event with more related resources (pydantic: «The maximum number of related resources is
100»): a larger group is told in several events."""


def sources_indexed(data: str, published: list[tuple[Source, int, int, Counter[str]]]) -> None:
    """One event per published group of up to MAX_RELATED documents: (source, chunks, pages, methods) of each."""
    for start in range(0, len(published), MAX_RELATED):
        _sources_indexed(data, published[start : start + MAX_RELATED])


def _sources_indexed(data: str, published: list[tuple[Source, int, int, Counter[str]]]) -> None:
    related = [
        {**_source_resource(source.source_id, source.access), "prefect.resource.role": "source"}
        for source, *_ in published
    ]
    each = [
        {
            "source": source.source_id,
            "version": source.version,
            "kind": source.kind.value if source.kind else None,
            "chunks": chunks,
            "pages": pages,
            "methods": dict(methods),
        }
        for source, chunks, pages, methods in published
    ]
    emit_event(
        event=SOURCES_INDEXED,
        resource={"prefect.resource.id": f"korpus.data.{data}", "prefect.resource.name": data},
        related=related,
        payload={"chunks": sum(item["chunks"] for item in each), "sources": each},
    )


def sources_quarantined(problems: Iterable[QuarantineItem]) -> int:
    """One event per source with items in this refresh's quarantine; returns how many were emitted."""
    by_source: dict[str, list[QuarantineItem]] = {}
    for item in problems:
        by_source.setdefault(item.source_id, []).append(item)
    for source_id, items in by_source.items():
        emit_event(
            event=SOURCE_QUARANTINED,
            resource=_source_resource(source_id, items[0].access),
            payload={
                "version": items[0].source_version,
                "items": len(items),
                "reasons": dict(Counter(r.value for i in items for r in i.reasons)),
                "pages": sorted({i.page for i in items if i.page}),
            },
        )
    return len(by_source)


def refresh_completed(data: str, summary: dict[str, Any], open_items: int) -> None:
    keys = ("sources", "changes", "chunks_indexed", "quarantined", "quarantine_reasons", "pending_sources", "seconds")
    emit_event(
        event=REFRESH_COMPLETED,
        resource={"prefect.resource.id": f"korpus.data.{data}", "prefect.resource.name": data},
        payload={**{k: summary.get(k) for k in keys}, "quarantine_open": open_items, "review": summary.get("review")},
    )

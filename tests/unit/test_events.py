"""The refresh's Prefect events are ones Prefect accepts: a group of more than 100 published documents (Prefect's
limit on related resources) is told in several `korpus.sources.indexed` events, none lost."""

from __future__ import annotations

from collections import Counter

import pytest
from prefect.events.schemas.events import Event

import flows.events as events
from korpus.core.datamodel import Source, SourceKind

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("documents", [1, 100, 101, 250])
def test_every_published_document_is_in_an_event_prefect_accepts(monkeypatch, documents: int) -> None:
    emitted: list[Event] = []
    monkeypatch.setattr(events, "emit_event", lambda **kwargs: emitted.append(Event(**kwargs)))
    published = [
        (
            Source(
                source_id=f"письма/{n}.txt",
                version=f"{n:064x}",
                path="/r",
                kind=SourceKind.text,
                owner="А",
                access="public",
            ),
            1,
            1,
            Counter({"plain-text": 1}),
        )
        for n in range(documents)
    ]
    events.sources_indexed("/data", published)
    assert [len(e.related) for e in emitted] == [min(100, documents - start) for start in range(0, documents, 100)]
    told = [item["source"] for e in emitted for item in e.payload["sources"]]
    assert told == [source.source_id for source, *_ in published]

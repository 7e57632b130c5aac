"""The refresh's first documents, indexed before its Dask cluster starts (#47 item 2).

Starting the cluster, sending the first read batch out and waiting for a thread to embed its first group took
~2.5 s of a 1,000-letter refresh before anything was searchable (the embed task queued behind the read batches
running on both threads). So the first few small text files and web pages (read by Python alone: no OCR, conversion
or unpacking) are read, chunked, embedded and published here, from the flow's thread, while nothing else runs — the
same tasks, the same gate, the same publish — and the cluster then takes the rest. On a cluster of its own
(`KORPUS_DASK_ADDRESS`: process workers, a GPU worker for embedding) nothing is done here: the reading and the
embedding stay where the user put them. The files are read like any other, in the flow thread's reading child
(tasks/runtime/reader_child.py), which `warm_reader` starts as the refresh begins, so its start overlaps discovery.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from flows.refresh_tasks import read_own_text
from korpus.core.settings import Settings
from tasks.receive import RefreshPlan
from tasks.runtime.reader_child import PURE_PYTHON

if TYPE_CHECKING:
    from flows.refresh_stream import Indexer

FIRST_DOCUMENTS = 8
"""Documents indexed before the cluster starts: the first group's size (flows/refresh_stream.py `FIRST_GROUP`)."""
FIRST_DOCUMENT_BYTES = 256 * 1024
"""A file read before the cluster starts is at most this big: a letter, not a long book."""


def first_documents(plan: RefreshPlan, settings: Settings, indexer: Indexer) -> RefreshPlan:
    """Index the plan's first small text documents now; the plan of what is left for the cluster."""
    if settings.dask_address:
        return plan
    first = [s for s in plan.to_process if s.kind in PURE_PYTHON and s.size <= FIRST_DOCUMENT_BYTES][:FIRST_DOCUMENTS]
    if not first:
        return plan
    for source, outcome in zip(first, read_own_text(sources=first, settings=settings), strict=True):
        indexer.add(source, outcome)
    indexer.flush()
    taken = {s.source_id for s in first}
    return replace(plan, to_process=[s for s in plan.to_process if s.source_id not in taken])

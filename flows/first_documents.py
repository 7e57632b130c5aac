"""The refresh's first documents, indexed before any work goes to Dask (#47 item 2, #63).

Starting the cluster, sending the first read batch out and waiting for a thread to embed its first group took
~2.5 s of a 1,000-letter refresh before anything was searchable (the embed task queued behind the read batches
running on both threads). So the first few small text files and web pages (read by Python alone: no OCR, conversion
or unpacking) are read, chunked, embedded and published here, from the flow's thread, while nothing else runs — the
same tasks, the same gate, the same publish — and the cluster then takes the rest. The files are read like any
other, in the flow thread's reading child (tasks/runtime/reader_child.py), which `warm_reader` starts as the refresh
begins, so its start overlaps discovery.

On a cluster of the user's own (`KORPUS_DASK_ADDRESS`) the same holds: on the production topology the first group
went through Prefect's task bookkeeping for its read, waited for a worker thread behind read batches to embed, and
became searchable 10.8–12.0 s into a 100 s refresh (benchmarks/topology_first_searchable.py); here the flow's process
embeds those few letters on its own CPU (a GPU worker would gain nothing on a few dozen chunks). Where the flow's
machine has no embedding model, or `KORPUS_FIRST_DOCUMENTS=0`, everything goes to the cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any

from flows.refresh_tasks import load_embedder, read_own_text
from korpus.core.datamodel import Source
from korpus.core.model_store import ModelMissingError, embed_model_path
from korpus.core.settings import Settings
from tasks.receive import RefreshPlan
from tasks.retrieval.embedding import token_counter
from tasks.runtime.reader_child import PURE_PYTHON

if TYPE_CHECKING:
    from flows.refresh_stream import Indexer

FIRST_DOCUMENT_BYTES = 256 * 1024
"""A file read before the cluster starts is at most this big: a letter, not a long book."""


def first_documents(plan: RefreshPlan, settings: Settings, indexer: Indexer) -> RefreshPlan:
    """Index the plan's first small text documents now; the plan of what is left for the cluster."""
    if not settings.first_documents or not _model_here(settings):
        return plan
    first = list(islice(_small(plan), settings.first_documents))
    if not first:
        return plan
    for source, outcome in zip(first, read_own_text(sources=first, settings=settings), strict=True):
        indexer.add(source, outcome)
    indexer.flush()
    taken = {s.source_id for s in first}
    return replace(plan, to_process=[s for s in plan.to_process if s.source_id not in taken])


class Warmer:
    """Loads the embedder (and its tokenizer) the refresh's first documents' `embed` asks for, in threads of their
    own, as early as the refresh knows it will need them: discovery calls `found` for each file it finds, and the
    first small text file the catalog neither serves nor refused in that version starts the load, while the rest
    of the archive is still being discovered (discovering 1,000 letters took 1.1–2.6 s of the topology's first
    7 s, benchmarks/topology_first_searchable.py). `planned` starts it from the plan when discovery did not (a
    refresh given no callback; a refused version admitted again). A refresh with nothing to embed loads nothing
    (tests/integration/test_refresh_sample.py counts the embedder's calls of an unchanged refresh)."""

    def __init__(
        self,
        settings: Settings,
        indexed: Mapping[str, Mapping[str, Any]] | None = None,
        refused: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.settings = settings
        self.known = [indexed or {}, refused or {}]  # the catalog's current and refused versions: not read again
        self.thread: threading.Thread | None = None
        self._wanted: bool | None = None  # first documents are on, and the model is on this machine (asked once)

    def found(self, source: Source) -> None:
        """Discovery's callback: start the load at the first small text file the catalog neither serves nor refused
        in its version."""
        if (
            self.thread is None
            and _first_kind(source)
            and not any(source.version in k.get(source.source_id, ()) for k in self.known)
        ):
            self._start()

    def planned(self, plan: RefreshPlan) -> threading.Thread | None:
        """The loading thread once the plan is known: None when the plan has no first documents for this process."""
        if self.thread is None and next(_small(plan), None) is not None:
            self._start()
        return self.thread

    def _start(self) -> None:
        if self._wanted is None:
            self._wanted = bool(self.settings.first_documents) and _model_here(self.settings, quiet=True)
        if not self._wanted:
            return

        def load(what: Callable[[], object]) -> None:
            try:
                what()
            except Exception as exc:  # the task then fails on it, with its own message
                logging.getLogger("korpus.refresh").warning("the embedding model could not be warmed: %s", exc)

        # the tokenizer beside the model, in a thread of its own: `chunk-and-gate` measures chunks with it before the
        # first `embed` (loading it took 3.2 s of the topology's first 16, benchmarks/topology_first_searchable.py)
        counter = partial(token_counter, str(embed_model_path(self.settings)))
        threading.Thread(target=load, args=(counter,), name="korpus-warm-tokenizer", daemon=True).start()
        embedder = partial(load_embedder, self.settings)
        self.thread = threading.Thread(target=load, args=(embedder,), name="korpus-warm-embedder", daemon=True)
        self.thread.start()


def _small(plan: RefreshPlan) -> Iterator[Source]:
    """The plan's small text documents, in its order: those a refresh may index before the cluster."""
    return (s for s in plan.to_process if _first_kind(s))


def _first_kind(source: Source) -> bool:
    """A document a refresh may index before the cluster: a small text file, read by Python alone."""
    return source.kind in PURE_PYTHON and not source.unreadable and source.size <= FIRST_DOCUMENT_BYTES


def _model_here(settings: Settings, quiet: bool = False) -> bool:
    """The embedding model is on this machine (on a cluster of the user's own, it may be only on the workers)."""
    try:
        embed_model_path(settings)
    except ModelMissingError:
        if settings.dask_address or quiet:
            return False
        raise
    return True

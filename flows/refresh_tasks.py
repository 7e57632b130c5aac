"""The Prefect tasks of `corpus_refresh` (flows/corpus_refresh.py): each a thin wrapper over a stage in `tasks/`,
named as the Prefect UI shows it (catalog, discover, read-source, ocr-page, speech-segments, transcribe-windows,
transcript, searchable-pdf, chunk-and-gate, embed, publish, hold-back, catalog-changes), with its retries and tags;
the tasks after the documents (meta-documents, collect-garbage, sync-opensearch) are flows/after_documents.py. The
flow module decides which run, in what order, fanned out how."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import dask
import distributed
import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect_dask import DaskTaskRunner

from flows import events
from flows.sealed import opened
from korpus.core.datamodel import Chunk, PageResult, QuarantineItem, ReasonCode, Source, SourceKind
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.audio.speech import (
    RecordingOutcome,
    RecordingPlan,
    assemble_recording,
    prepare_recording,
    transcribe_windows,
)
from tasks.contract.chunking import build_chunks
from tasks.contract.gate import holds_its_own_text, route_chunks
from tasks.contract.splitter import LlmSplitter
from tasks.index.registry import keep_search_terms, keep_vectors
from tasks.index.sqlite import SqliteIndex
from tasks.parse import ParseOutcome
from tasks.parse import ocr_page as ocr_page_stage
from tasks.pdf.pages import save_page_image
from tasks.readers.base import failure, problem
from tasks.readers.registry import reader_for
from tasks.receive import RefreshPlan, discover_sources, reading_of
from tasks.retrieval.embedding import configured_embedder, shared_embedder, token_counter
from tasks.runtime.crash_points import crash_point
from tasks.runtime.reader_child import read_all_contained
from tasks.text.quality import text_language


def document_language(pages: list[PageResult], default: str) -> str:
    """The language recorded on a source's chunks: `en` for a document in Latin script, else the corpus's."""
    detected = text_language("\n".join(p.text for p in pages[:20]))
    return detected if detected not in ("und", "ru") else default


DASK_LOG_LENGTH = 0
"""Messages, transitions and events Dask keeps for debugging on each stream and log (its default: 1,000); korpus
runs no dashboard and reads none of them."""


def dask_task_runner(settings: Settings) -> DaskTaskRunner:
    """An existing cluster when KORPUS_DASK_ADDRESS is set, else a LocalCluster of threads.

    Threads, not processes: each worker process would start its own temporary Prefect server (FACTS.md), and
    the heavy work (Tesseract subprocesses, CTranslate2, torch) releases the GIL anyway.
    """
    # Dask keeps the last 1,000 messages of every batched stream for debugging (`low-level-log-length`). Between
    # threads nothing is pickled, so the scheduler's stream to the in-process worker kept each compute-task message
    # alive with its inputs — every read batch's sources, every embed task's chunks (#32: ~13 MB a 1,000 letters, to
    # the 1,000th message); the client's stream kept each pickled graph. DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH,
    # where a user sets it (to debug), stands.
    if not os.environ.get("DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH"):
        dask.config.set({"distributed.admin.low-level-log-length": DASK_LOG_LENGTH})
    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    # Dask's statistical profiler samples every worker thread's stack each 10 ms for a dashboard korpus does not run,
    # and keeps 1,000 cycles of it (#32: the largest growth of the flow's own objects on a long refresh).
    dask.config.set({"distributed.worker.profile.enabled": False})
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": settings.dask_workers,
            "threads_per_worker": settings.dask_threads_per_worker,
            "processes": False,
            "dashboard_address": None,
        },
    )


# --- tasks: thin wrappers over stages ---------------------------------------------------------------------


@task(name="catalog", cache_policy=NO_CACHE)
def read_catalog(settings: Settings) -> tuple[dict[str, dict[str, tuple]], dict[str, dict[str, set[str]]], dict]:
    """The current versions with their labels, the versions refused as a whole, the containers' listings; the file's
    own search terms and vectors kept or dropped as the backend needs them (`keep_search_terms`, `keep_vectors`)."""
    with SqliteIndex(settings.index_path) as index:
        if settings.catalog_url:  # every write of this refresh goes through the serving part on PostgreSQL
            index.bind_serving_catalog(settings.catalog_url)
        repaired = index.reconcile()
        if repaired:
            get_run_logger().warning("reconciled %d rows left inconsistent by an earlier crash", repaired)
        built = keep_search_terms(settings, index)  # none when the cluster answers; built once when it stops
        if built:
            get_run_logger().info("built the embedded search's terms of %d stored chunks (KORPUS_BACKEND)", built)
        said = [time.monotonic()]

        def embedding(done: int) -> None:  # a backend switch back embeds the whole corpus again: say how far
            if time.monotonic() - said[0] >= 10:
                said[0] = time.monotonic()
                get_run_logger().info("embedding stored chunks again for the embedded search: %d so far", done)

        # each vector until the cluster holds it; all of them again when the embedded backend comes back
        embedded = keep_vectors(settings, index, partial(configured_embedder, settings), embedding)
        if embedded:
            get_run_logger().info("embedded %d stored chunks again for the embedded search (KORPUS_BACKEND)", embedded)
        return index.indexed_versions(), index.refused_versions(), index.listing_keys()


@task(name="discover", cache_policy=NO_CACHE)
def discover(root: str, settings: Settings, found: Callable[[Source], None] | None = None) -> list[Source]:
    """The files under the root. A file whose stat matches its last reading keeps its version without being read;
    `settings.verify` (`korpus refresh --verify`, the weekly deployment) hashes every file. The readings are kept
    for the next refresh. `found` is told of each file as discovery finds it."""
    with SqliteIndex(settings.index_path) as index:
        last = index.file_readings()
        sources = discover_sources(Path(root), settings, None if settings.verify else last, found)
        now = time.time_ns()
        readings = {s.source_id: r for s in sources if (r := reading_of(s, now)) is not None}
        if readings != last:  # an unchanged archive rewrites nothing
            index.record_file_readings(readings)
    return sources


@task(name="read-source", cache_policy=NO_CACHE)
@opened
def read_own_text(sources: list[Source], settings: Settings) -> list[ParseOutcome]:
    """The files' own text through their readers: PDF/DjVu layers, decoded text, a converted office document. Small
    files travel several to a task (`read_batches`): a task's overhead is worth a big file, not a short letter."""
    outcomes = []
    for source, read in zip(sources, read_all_contained(sources, settings), strict=True):
        if isinstance(read, OSError):  # gone or replaced since discovery (the flow then skips it), or unreadable
            outcomes.append(
                ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, f"cannot be read: {read}")])
            )
        elif isinstance(read, Exception):  # containment: whatever a reader raises on one file is that file's item
            outcomes.append(unread(source, read))
        else:
            outcomes.append(read)
        crash_point("after-read-source")
    return outcomes


def unread(source: Source, exc: BaseException) -> ParseOutcome:
    """A file its reader failed on in a way nobody foresaw: quarantined `unreadable-file` with what was raised."""
    return ParseOutcome(problems=[problem(source, ReasonCode.unreadable_file, f"the reader failed: {failure(exc)}")])


FIRST_READ_BATCH = 16
READ_BATCH_FILES = 256
READ_BATCH_BYTES = 64 * 1024 * 1024  # file bytes a read task takes; the pages it returns are far smaller


def read_batches(sources: list[Source]) -> list[list[Source]]:
    """Sources in reading order, one read task a batch: the first batch FIRST_READ_BATCH files, each next one twice
    the last, up to READ_BATCH_FILES files — or READ_BATCH_BYTES, a big file alone. The first documents are read
    (and searchable) soon; later the tasks are few (each costs Prefect ~30 ms to submit and ~60 ms to start)."""
    batches: list[list[Source]] = []
    size, limit = 0, FIRST_READ_BATCH
    for source in sources:
        if not batches or len(batches[-1]) >= limit or size + source.size > READ_BATCH_BYTES:
            if batches:
                limit = min(limit * 2, READ_BATCH_FILES)
            batches.append([])
            size = 0
        batches[-1].append(source)
        size += source.size
    return batches


@task(name="ocr-page", cache_policy=NO_CACHE, retries=1, tags=["ocr"])
@opened
def ocr_page(source: Source, page: int, settings: Settings, layer: PageResult | None = None) -> ParseOutcome:
    return ocr_page_stage(source, page, settings, layer=layer)


@task(name="speech-segments", cache_policy=NO_CACHE)
@opened
def speech_plan(source: Source, settings: Settings) -> RecordingPlan:
    try:
        return prepare_recording(source, settings)
    except OSError as exc:
        return failed_recording(source, problem(source, ReasonCode.unreadable_file, f"cannot be read: {exc}"))


def failed_recording(source: Source, item: QuarantineItem) -> RecordingPlan:
    """A recording that will not be transcribed, with the item that says why."""
    return RecordingPlan(source_id=source.source_id, version=source.version, problem=item)


@task(name="transcribe-windows", cache_policy=NO_CACHE, retries=1, tags=["asr"])
@opened
def transcribe(plan: RecordingPlan, indices: list[int], settings: Settings) -> list:
    return transcribe_windows(plan, indices, settings)


@task(name="transcript", cache_policy=NO_CACHE)
@opened
def transcript(source: Source, plan: RecordingPlan, results: list, settings: Settings) -> RecordingOutcome:
    return assemble_recording(source, plan, results, settings)


@task(name="searchable-pdf", cache_policy=NO_CACHE)
@opened
def searchable(source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
    written = reader_for(source.kind).searchable_copy(source, pages, settings)  # type: ignore[arg-type]
    crash_point("after-searchable")
    return written


def whole_document(source: Source, outcome: ParseOutcome) -> QuarantineItem:
    bad = sorted(p.page for p in outcome.problems if p.page)
    return QuarantineItem(
        source_id=source.source_id,
        source_version=source.version,
        reasons=[ReasonCode.page_quality],
        detail=f"pages {bad} failed every tier; KORPUS_QUARANTINE_WHOLE_DOCUMENT keeps the document out",
    )


GROUP_PAGES = 128
"""A group of documents is chunked, embedded and published once it holds this many pages (or
`index_group_sources` documents): big enough for full embedding batches, small enough that the first documents are
searchable early and a crash loses little."""


@dataclass
class Ready:
    """A source read, waiting in its group to be chunked, gated, embedded and published."""

    source: Source
    outcome: ParseOutcome
    quarantined_pages: bool
    problems: list[QuarantineItem] = field(default_factory=list)
    """The document's quarantine items (pages, refused chunks): recorded in its publish transaction."""
    passed: list[Chunk] = field(default_factory=list)
    chunks: int = 0
    copy: str | None = None
    """The searchable copy written of it, whose chunk links are added once it is chunked."""

    @property
    def publish(self) -> bool:
        # read: the version is published — even if the gate kept every chunk out, or every page is in the
        # quarantine (it is then current with no chunks: the next refresh leaves it alone, a reviewer decides)
        return bool(self.chunks or self.quarantined_pages)


@task(name="chunk-and-gate", cache_policy=NO_CACHE)
@opened
def chunk_and_gate(
    group: list[Ready], settings: Settings, splitter: LlmSplitter | None
) -> tuple[list[tuple[int, list[Chunk]]], list[QuarantineItem]]:
    """Each document's chunks (tasks/contract/chunking.py) through the contract gate: per document (chunks cut, passed),
    and everything the gate (or an empty page) refused."""
    cut: list[tuple[int, list[Chunk]]] = []
    refused_all: list[QuarantineItem] = []
    count = token_counter(str(embed_model_path(settings)))
    for ready in group:
        pages = ready.outcome.pages
        try:
            chunks, empty = build_chunks(
                ready.source,
                pages,
                settings.chunk_policy,
                count=count,
                language=document_language(pages, settings.language),
                spans_override=splitter.page_spans if splitter else None,
            )
        except Exception as exc:  # containment: one document the chunker fails on is kept out, with the reason
            cut.append((0, []))
            refused_all.append(problem(ready.source, ReasonCode.processing_failed, f"chunking failed: {failure(exc)}"))
            continue
        passed, refused = route_chunks(chunks, {p.page for p in pages if p.page is not None and holds_its_own_text(p)})
        cut.append((len(chunks), passed))
        refused_all += [*empty, *refused]
    return cut, refused_all


@task(name="embed", cache_policy=NO_CACHE)
@opened
def embed(chunks: list[Chunk], settings: Settings) -> np.ndarray:
    """The group's chunks, across every document of it; on `embed_threads(settings)` cores."""
    embedder = shared_embedder(str(embed_model_path(settings)), threads=embed_threads(settings))
    return embedder.embed_passages([c.text for c in chunks])


def embed_threads(settings: Settings, slots: int | None = None) -> int:
    """Cores one embedding task uses: `KORPUS_EMBED_THREADS`, else this process's cores shared out among the
    worker's threads (`slots`; by default those of the Dask worker this runs on) — embedding tasks then run side by
    side with each other and with reading, not one at a time over every core (measured: benchmarks/scale.py)."""
    if settings.embed_threads:
        return settings.embed_threads
    if slots is None:
        try:
            slots = distributed.get_worker().state.nthreads
        except ValueError:  # not on a Dask worker
            slots = settings.dask_threads_per_worker
    return max(1, len(os.sched_getaffinity(0)) // max(slots, 1))


def load_embedder(settings: Settings, slots: int | None = None) -> None:
    """Load the cached embedder an `embed` task with these `slots` uses (`embed_threads`) and run it once (a first
    run allocates what later runs need): what a warming worker and a refresh's first documents do before their
    first `embed`."""
    shared_embedder(str(embed_model_path(settings)), threads=embed_threads(settings, slots)).embed_passages(["прогрев"])


@task(name="publish", cache_policy=NO_CACHE)
@opened
def publish(group: list[Ready], vectors: np.ndarray, settings: Settings) -> list[int]:
    """Each document of the group switched in its own transaction, in order, with its quarantine items: a crash
    after the commit leaves nothing of the document to find again (the next refresh sees the version indexed)."""
    counts, start, published = [], 0, []
    model = embed_model_path(settings).name  # the vectors' model, checked against the index in each transaction
    with SqliteIndex(settings.index_path) as index:
        for ready in group:
            own = vectors[start : start + len(ready.passed)] if ready.passed else np.zeros((0, 0), dtype=np.float32)
            start += len(ready.passed)
            pages = ready.outcome.pages
            items = for_review(ready.problems, {ready.source.source_id: ready.source}, settings)
            with index.write_transaction():
                index.publish_version(ready.source, ready.passed, own, pages, embed_model=model)
                index.record_quarantine(items)
            counts.append(len(ready.passed))
            crash_point("after-publish")
            published.append((ready.source, len(ready.passed), len(pages), Counter(p.method for p in pages)))
    events.sources_indexed(str(settings.data), published)
    return counts


def mirror_counted(settings: Settings, full: bool = False) -> dict[str, Any]:
    """One sync of the catalog to the cluster (`mirror_or_pending`: `pending` when it stays down; `full`: a
    reconcile), with the retries it took — what both the refresh's mirror tasks run."""
    from tasks.index.opensearch import mirror_or_pending
    from tasks.runtime.retry import counting_retries

    with SqliteIndex(settings.index_path) as index, counting_retries() as retries:
        report = mirror_or_pending(settings, index, partial(configured_embedder, settings), full=full)
    return report | {"retries": retries[0]}


@task(name="mirror-group", cache_policy=NO_CACHE)
def mirror_group(settings: Settings) -> dict[str, Any]:
    """A published group on its way to the cluster (KORPUS_BACKEND=opensearch): the changes since the mirror's last
    sync — this group's chunks, their old versions' switch — sent now, so the cluster serves the refresh's documents
    as they are published, not at its end. A cluster that cannot take them leaves them `pending` for the refresh's
    own sync at its end."""
    report = mirror_counted(settings)
    if report.get("pending"):
        get_run_logger().warning("documents not streamed to OpenSearch (the refresh's end syncs): %s", report["error"])
    return report


@task(name="hold-back", cache_policy=NO_CACHE)
@opened
def hold_back(source: Source, unread: dict[int, str], settings: Settings) -> tuple[list[int], list[QuarantineItem]]:
    """Pages a transient fault left unread: the document waits for the next refresh (its earlier version stays
    served) — unless a page has now failed in `pending_max_refreshes` refreshes: that page is quarantined
    `ocr-failed` and, when no other page waits, the document goes on without it. Returns (pages waiting, items)."""
    with SqliteIndex(settings.index_path) as index:
        attempts = index.record_pending(source, unread)
    given_up = [
        problem(source, ReasonCode.ocr_failed, f"still failing after {tried} refreshes: {unread[page]}", page)
        for page, tried in sorted(attempts.items())
        if tried >= settings.pending_max_refreshes
    ]
    waiting = sorted(page for page, tried in attempts.items() if tried < settings.pending_max_refreshes)
    if waiting:
        get_run_logger().warning(
            "%s: pages %s could not be read (%s); the document waits for the next refresh",
            source.source_id,
            waiting,
            unread[waiting[0]],
        )
    return waiting, given_up


def for_review(items: list[QuarantineItem], sources: dict[str, Source], settings: Settings) -> list[QuarantineItem]:
    """Items with what the review queue filters and guards them by (access, kind) and, for a PDF page, an image of
    the page for the reviewer (other kinds show their text evidence)."""
    for item in items:
        source = sources.get(item.source_id)
        if source is None:
            continue
        item.access, item.tenant = item.access or source.access, item.tenant or source.tenant
        item.kind = item.kind or (source.kind.value if source.kind else None)
        if item.page and source.kind is SourceKind.pdf and item.chunk_id is None and item.evidence_path is None:
            image = settings.data / "evidence" / item.source_id / f"p{item.page:05d}.png"
            saved = save_page_image(source.path, item.page, image)
            item.evidence_path = str(saved) if saved else None
    return items


@task(name="access-changes", cache_policy=NO_CACHE)
def apply_access_changes(plan: RefreshPlan, settings: Settings) -> None:
    """Relabels and retirements, applied to the catalog before any document of the refresh is read: a file moved to
    another scope or removed (or no longer admissible) stops being served to its old readers at the refresh's first
    step, not after its last document. A changed file whose labels changed too has its current version relabelled
    here, before its new version is read."""
    with SqliteIndex(settings.index_path) as index:
        for source in plan.relabel:
            index.relabel_source(source)
        for source in plan.refused_labels:
            index.relabel_refused(source)
        inadmissible = {item.source_id for item in plan.rejected}
        for source_id in [*plan.removed, *sorted(inadmissible)]:
            index.retire_source(source_id)


@task(name="catalog-changes", cache_policy=NO_CACHE)
def apply_catalog_changes(plan: RefreshPlan, problems: list[QuarantineItem], settings: Settings) -> None:
    """What no publish recorded (refusals at admission, documents kept out whole), once the documents are done.

    A changed file whose new version was refused (unreadable, crashed or timed out its reader, kept out whole, every
    page quarantined) leaves its previous version served: the old version stays until the new one is in, and
    `korpus status` lists it as served older (the refusal waits in the queue). A file taken out of what the manifest
    admits is retired at the refresh's start (tasks/receive.py `plan_refresh`), never here."""
    with SqliteIndex(settings.index_path) as index:
        index.record_quarantine(for_review(problems, {s.source_id: s for s in plan.to_process}, settings))
        crash_point("catalog-after-quarantine")


# --- the flow ------------------------------------------------------------------------------------------------

"""The streaming part of `corpus_refresh`: every document's reading, OCR and ASR fanned out on Dask, and each
document chunked, gated, embedded and published as soon as its own pages are in — while other documents are still
being read, OCR'd or transcribed. Nothing waits for the whole refresh: the first documents are searchable early, a
crash loses at most the documents in flight, and what stays in memory is the work in flight, not the archive.

`Inflight` holds the futures and what to do with each result; the handlers (`Parse` for the fan-out, `Indexer` for
the groups) run in the flow's thread, one at a time, in the order the work completes. Embedding is Dask work like
OCR and ASR (on the GPU worker when `KORPUS_DASK_EMBED_RESOURCES` names one); the catalog is written from the flow
alone, one SQLite writer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from flows.inflight import Inflight
from flows.progress import RefreshProgress
from flows.refresh_tasks import (
    GROUP_PAGES,
    Ready,
    chunk_and_gate,
    embed,
    failed_recording,
    hold_back,
    mirror_group,
    ocr_page,
    publish,
    read_batches,
    read_own_text,
    searchable,
    speech_plan,
    transcribe,
    transcript,
    unread,
    whole_document,
)
from flows.sealed import sealed
from flows.tally import Tally
from korpus.core.datamodel import QuarantineItem, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.audio.speech import RecordingOutcome, RecordingPlan
from tasks.contract.splitter import LlmSplitter
from tasks.parse import ParseOutcome
from tasks.pdf.destinations import name_chunks
from tasks.readers.base import failure, problem
from tasks.receive import RefreshPlan, unchanged_since_discovery
from tasks.runtime.crash_points import crash_point
from tasks.runtime.reader_child import crashed


def _pages_done(source: Source, outcome: ParseOutcome, ocr_done: int) -> str:
    ready = outcome.page_count - len(outcome.ocr_pending) + ocr_done
    return f"{source.file_name} → {ready}/{outcome.page_count} страниц"


def _minutes_done(source: Source, heard: float, duration: float) -> str:
    return f"{source.file_name} → {heard / 60:.1f}/{duration / 60:.1f} мин записи"


def _batches(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@dataclass
class _Scan:
    """A document whose pages are out for OCR."""

    outcome: ParseOutcome
    milestone: Any
    done: int = 0


@dataclass
class _Recording:
    """A recording whose speech windows are out for ASR."""

    plan: RecordingPlan
    milestone: Any
    batches_left: int
    results: list = field(default_factory=list)
    calls: int = 0
    failure: str | None = None
    """What a failed transcription task raised (the recording is then quarantined `asr-failed`)."""

    @property
    def heard(self) -> float:
        """Seconds of the recording its returned windows reach."""
        return max((self.plan.windows[r.index].end for r in self.results), default=0.0)


READS_AHEAD_PER_THREAD = 2
"""Read batches out on the cluster at once, for each of its threads (at least MIN_READS_AHEAD)."""
MIN_READS_AHEAD = 4


class Parse:
    """Every recording's first stage submitted at once, and the files' read batches a few at a time (each done batch
    sends out the next); a batch's OCR pages and a recording's speech windows go out as soon as that batch is read
    or that recording planned. A document is handed to `on_document` the moment its last page is in; `on_done` runs
    once, when every document has been.

    Reads are bounded because a submitted task is held, its inputs and Prefect's task wrapper pickled and unpickled,
    until it runs (#32): with all 117 read batches of 30,000 letters out at once the refresh held 1,508 MB when its
    first 248 letters were in, 1,388 MB with four out (6,000 letters: 1,333 MB) — ~1 MB a batch waiting."""

    def __init__(
        self,
        work: Inflight,
        plan: RefreshPlan,
        settings: Settings,
        on_document: Callable[[Source, ParseOutcome], None],
        on_done: Callable[[], None],
        live: RefreshProgress | None = None,
    ) -> None:
        self.work, self.plan, self.settings = work, plan, settings
        self.live = live or RefreshProgress()  # the terminal's counts (flows/progress.py)
        self.on_document, self.on_done = on_document, on_done
        self.open = len(plan.to_process)
        self._scans: dict[str, _Scan] = {}
        self._recordings: dict[str, _Recording] = {}
        self._reads: Iterator[list[Source]] = iter(())

    def start(self) -> None:
        submit = self.work.submit
        for source in self.plan.to_process:
            if source.kind is SourceKind.audio:
                submit(
                    speech_plan,
                    partial(self._planned, source),
                    source=source,
                    settings=self.settings,
                    failed=partial(self._plan_failed, source),
                )
        reads = [s for s in self.plan.to_process if s.kind is not SourceKind.audio]
        self._reads = iter(read_batches(reads))
        for _ in range(max(MIN_READS_AHEAD, READS_AHEAD_PER_THREAD * self.work.threads())):
            if not self._read_next():
                break

    def _read_next(self) -> bool:
        """Send the next read batch out; False when none is left."""
        batch = next(self._reads, None)
        if batch is None:
            return False
        self.work.submit(
            read_own_text,
            partial(self._read, batch),
            sources=batch,
            settings=self.settings,
            failed=partial(self._read_failed, batch),
        )
        return True

    def _complete(self, source: Source, outcome: ParseOutcome) -> None:
        outcome.pages.sort(key=lambda p: (p.page or 0, p.t_start or 0.0))
        self.open -= 1
        self.on_document(source, outcome)
        if self.open == 0:
            crash_point("after-parse")
            self.on_done()

    def _read_failed(self, batch: list[Source], exc: Exception) -> None:
        """A read task failed past its retries — on process workers, a file that takes its worker down (a native
        crash outside the reading child, the OOM killer) fails its whole batch. Each file of a batch is read again
        alone, so only the culprit is quarantined; one file alone is its item at once."""
        if len(batch) == 1:
            self._read(batch, [self._failed_alone(batch[0], exc)])
            return
        get_run_logger().warning(
            "a read batch of %d files failed (%s); each is read again alone", len(batch), failure(exc)
        )
        self._read_next()
        for source in batch:
            self.work.submit(
                read_own_text,
                partial(self._read, [source], ahead=False),
                sources=[source],
                settings=self.settings,
                failed=partial(self._piece_failed, source),
            )

    def _piece_failed(self, source: Source, exc: Exception) -> None:
        """A file of a failed batch, read again alone, failed again: it is the culprit (the batch's next is out)."""
        self._read([source], [self._failed_alone(source, exc)], ahead=False)

    @staticmethod
    def _failed_alone(source: Source, exc: Exception) -> ParseOutcome:
        """One file whose reading failed past its retries: a worker killed each time it read it is that file's
        `reader-crashed` (not read again until its bytes change or a reviewer asks); anything else `unreadable-file`."""
        if type(exc).__name__ == "KilledWorker":  # distributed.KilledWorker: the worker died each time it read it
            return crashed(source, f"the worker reading it died each time Dask tried it ({failure(exc)})")
        return unread(source, exc)

    def _plan_failed(self, source: Source, exc: Exception) -> None:
        detail = f"speech detection failed: {failure(exc)}"
        self._planned(source, failed_recording(source, problem(source, ReasonCode.asr_failed, detail)))

    def _read(self, batch: list[Source], outcomes: list[ParseOutcome], ahead: bool = True) -> None:
        if ahead:
            self._read_next()  # one batch in, the next out: the reads in flight stay bounded
        for source, outcome in zip(batch, outcomes, strict=True):
            if not outcome.ocr_pending:
                self._complete(source, outcome)
                continue
            milestone = create_progress_artifact(progress=0.0, description=_pages_done(source, outcome, 0))
            self._scans[source.source_id] = _Scan(outcome, milestone)
            self.live.pages_planned += len(outcome.ocr_pending)
            for page in outcome.ocr_pending:
                self.work.submit(
                    ocr_page,
                    partial(self._page, source),
                    source=source,
                    page=page,
                    settings=self.settings,
                    layer=outcome.flagged.get(page),
                    failed=partial(self._page_failed, source, page),
                )

    def _page_failed(self, source: Source, page: int, exc: Exception) -> None:
        item = problem(source, ReasonCode.ocr_failed, failure(exc), page)
        self._page(source, ParseOutcome(page_count=1, problems=[item]))

    def _page(self, source: Source, page: ParseOutcome) -> None:
        scan = self._scans[source.source_id]
        target = scan.outcome
        target.pages.extend(page.pages)
        target.problems.extend(page.problems)
        target.engine_calls += page.engine_calls
        target.vlm_calls += page.vlm_calls
        target.cache_hits += page.cache_hits
        target.unread.update(page.unread)
        target.retries += page.retries
        scan.done += 1
        self.live.pages_done += 1
        update_progress_artifact(
            scan.milestone,
            progress=100.0 * scan.done / len(target.ocr_pending),
            description=_pages_done(source, target, scan.done),
        )
        if scan.done == len(target.ocr_pending):
            del self._scans[source.source_id]
            self._complete(source, target)

    def _planned(self, source: Source, rec: RecordingPlan) -> None:
        if rec.problem is not None:
            self._complete(source, ParseOutcome(problems=[rec.problem]))
            return
        milestone = create_progress_artifact(progress=0.0, description=_minutes_done(source, 0.0, rec.duration))
        self.live.audio_planned += rec.duration
        batches = _batches(list(range(len(rec.windows))), self.settings.asr_windows_per_task)
        self._recordings[source.source_id] = _Recording(rec, milestone, batches_left=len(batches))
        for indices in batches:
            self.work.submit(
                transcribe,
                partial(self._transcribed, source),
                plan=rec,
                indices=indices,
                settings=self.settings,
                failed=partial(self._transcribe_failed, source),
            )
        if not batches:
            self._recorded(source)

    def _transcribe_failed(self, source: Source, exc: Exception) -> None:
        self._recordings[source.source_id].failure = failure(exc)
        self._transcribed(source, [])

    def _transcribed(self, source: Source, results: list) -> None:
        recording = self._recordings[source.source_id]
        for result, called in results:
            recording.results.append(result)
            recording.calls += called
        recording.batches_left -= 1
        duration = recording.plan.duration
        self.live.heard(source.source_id, recording.heard)
        update_progress_artifact(
            recording.milestone,
            progress=100.0 * recording.heard / max(duration, 1e-6),
            description=_minutes_done(source, recording.heard, duration),
        )
        if recording.batches_left == 0:
            self._recorded(source)

    def _recorded(self, source: Source) -> None:
        """Every window of a recording is in: the milestone completed, the transcript assembled."""
        recording = self._recordings.pop(source.source_id)
        rec, collected = recording.plan, recording.results
        if recording.failure is not None:  # Whisper failed on a stretch of it: the recording waits for a reviewer
            detail = f"transcription failed: {recording.failure}"
            self._complete(source, ParseOutcome(problems=[problem(source, ReasonCode.asr_failed, detail)]))
            return
        silent_tail = rec.duration - recording.heard  # no speech window reaches the end: that stretch had no speech
        self.live.heard(source.source_id, rec.duration)
        update_progress_artifact(
            recording.milestone,
            progress=100.0,
            description=(
                _minutes_done(source, rec.duration, rec.duration)
                + (f" (последние {silent_tail:.0f} с без речи)" if silent_tail >= 1 else "")
            ),
        )
        try:
            assembled: RecordingOutcome = transcript(
                **sealed(source=source, plan=rec, results=collected, settings=self.settings)
            )
        except Exception as exc:  # containment: this recording's transcript, not the refresh
            detail = f"the transcript could not be assembled: {failure(exc)}"
            self._complete(source, ParseOutcome(problems=[problem(source, ReasonCode.asr_failed, detail)]))
            return
        self._complete(
            source,
            ParseOutcome(
                pages=assembled.pages,
                problems=assembled.problems,
                page_count=len(assembled.pages),
                engine_calls=recording.calls,
                cache_hits=len(collected) - recording.calls,
                stats={
                    "audio_seconds": assembled.audio_seconds,
                    "speech_seconds": assembled.speech_seconds,
                    "segments_dropped": assembled.segments_dropped,
                    "repeats_collapsed": assembled.repeats_collapsed,
                },
            ),
        )


def embed_resources(settings: Settings) -> dict[str, float] | None:
    """`KORPUS_DASK_EMBED_RESOURCES` (`GPU=1`) as Dask resources; None (any worker) when unset."""
    if not settings.dask_embed_resources:
        return None
    pairs = (part.split("=", 1) for part in settings.dask_embed_resources.split(","))
    return {name.strip(): float(amount) for name, amount in pairs}


FIRST_GROUP = 8
"""Documents in a refresh's first group (`Indexer.group_limit`)."""
EMBED_SLICE = 512
"""Chunks one embed task takes (`Inflight.submit_in_slices`): a 3,599-page sheet's 4,237 chunks were one task on one
core."""


class Indexer:
    """Documents as they are parsed: held back when pages wait for a retry, otherwise gathered into a group
    (`KORPUS_INDEX_GROUP_SOURCES` documents or GROUP_PAGES pages); a full group is chunked and gated here, embedded
    on the cluster, and published with its documents' quarantine items when its vectors come back."""

    def __init__(
        self,
        settings: Settings,
        splitter: LlmSplitter | None,
        total: int,
        progress: Any,
        tally: Tally,
        live: RefreshProgress | None = None,
    ) -> None:
        """`progress`: the Prefect progress artifact of the whole refresh (None: none); `live`: the terminal's
        counts (flows/progress.py)."""
        self.work: Inflight | None = None  # the cluster's, set once it is up; before it, a group is embedded here
        self.settings, self.splitter = settings, splitter
        self.total, self.progress, self.tally = total, progress, tally
        # embedding ahead of queued OCR and ASR: a document nearly done is finished before more is started
        self.annotations: dict[str, Any] = {"priority": 10}
        if resources := embed_resources(settings):
            self.annotations["resources"] = resources
        self.group: list[Ready] = []
        self.problems: list[QuarantineItem] = []  # for the summary and, unless recorded with a publish, the catalog
        self.recorded: set[str] = set()  # item ids written with their document's publish
        self.waiting: dict[str, list[int]] = {}
        self.moved: list[str] = []
        self.embedded = self.flushed = 0
        self.live = live or RefreshProgress(planned=total)
        """Documents settled, chunks indexed, when the first became searchable: the terminal's counts are the
        refresh's own (flows/progress.py)."""
        self.streaming = settings.backend == "opensearch"
        self.first_mirrored: float | None = None
        """Seconds from the refresh's start to its first group searchable on the cluster (KORPUS_BACKEND=opensearch)."""
        self.streamed = {"syncs": 0, "indexed": 0, "retries": 0}
        """The groups' own syncs to the cluster: how many, the chunks they indexed, the retries they needed."""

    def add(self, source: Source, outcome: ParseOutcome) -> None:
        self.tally.add(source, outcome)
        if not unchanged_since_discovery(source):  # replaced or removed mid-run: what was read is not this version
            get_run_logger().warning(
                "%s changed or vanished during the refresh; the next refresh takes it", source.source_id
            )
            self.moved.append(source.source_id)
            self._settle(1)
            return
        found = list(outcome.problems)
        if outcome.unread:
            pages_waiting, given_up = hold_back(**sealed(source=source, unread=outcome.unread, settings=self.settings))
            if pages_waiting:
                self.waiting[source.source_id] = pages_waiting
                self._settle(1)
                return
            found += given_up
        self.tally.by_method.update(p.method for p in outcome.pages)
        copy = None
        if any((p.tier or 0) >= 1 for p in outcome.pages):
            try:
                copy = (searchable(**sealed(source=source, pages=outcome.pages, settings=self.settings)) or {}).get(
                    "path"
                )
            except Exception as exc:  # the text is read: a searchable copy failing must not keep it out of the index
                get_run_logger().warning("%s: no searchable copy written (%s)", source.source_id, failure(exc))
        if self.settings.quarantine_whole_document and any(p.page for p in found):
            self.problems += [*found, whole_document(source, outcome)]
            self._settle(1)
            return
        self.group.append(
            Ready(source, outcome, quarantined_pages=any(p.page for p in found), problems=found, copy=copy)
        )
        if len(self.group) >= self.group_limit() or sum(len(r.outcome.pages) for r in self.group) >= GROUP_PAGES:
            self.flush()

    def group_limit(self) -> int:
        """Documents a group may hold now: 8 in the refresh's first group, doubling with each group flushed, up to
        `KORPUS_INDEX_GROUP_SOURCES` — the first documents are searchable early, later groups have full batches and
        few tasks."""
        return min(self.settings.index_group_sources, FIRST_GROUP << min(self.flushed, 16))

    def flush(self) -> None:
        """Chunk and gate the group now, and send its chunks to be embedded."""
        if not self.group:
            return
        group, self.group = self.group, []
        self.flushed += 1
        cut, refused = chunk_and_gate(**sealed(group=group, settings=self.settings, splitter=self.splitter))
        for ready, (count, passed) in zip(group, cut, strict=True):
            ready.chunks, ready.passed = count, passed
            ready.problems += [item for item in refused if item.source_id == ready.source.source_id]
        crash_point("after-chunk")
        logger = get_run_logger()
        for ready in group:
            if ready.copy and ready.passed:  # the searchable copy links back: #nameddest=<chunk id>
                try:
                    name_chunks(
                        Path(ready.copy),
                        ready.passed,
                        ready.outcome.pages,
                        turned=ready.source.kind == SourceKind.image,
                    )
                except Exception as exc:  # a copy without links is still a searchable copy
                    logger.warning(
                        "%s: no chunk links in the searchable copy (%s)", ready.source.source_id, failure(exc)
                    )
        for r in group:
            logger.info(
                "%s → %d/%d pages, %d chunks", r.source.source_id, len(r.outcome.pages), r.outcome.page_count, r.chunks
            )
        chunks = [c for r in group if r.publish for c in r.passed]
        if not chunks:
            self._publish(group, np.zeros((0, 0), dtype=np.float32))
            return
        self.embedded += len(chunks)
        if self.work is None:  # the refresh's first documents, before the cluster is up (`first_documents`)
            self._publish(group, embed(chunks=chunks, settings=self.settings))
            return
        self.work.submit_in_slices(
            embed,
            partial(self._publish, group),
            chunks,
            EMBED_SLICE,
            "chunks",
            annotations=self.annotations,
            settings=self.settings,
        )

    def _publish(self, group: list[Ready], vectors: np.ndarray) -> None:
        crash_point("after-embed")
        ready = [r for r in group if r.publish]
        counts = publish(**sealed(group=ready, vectors=vectors, settings=self.settings)) if ready else []
        self.live.indexed(sum(counts))
        if sum(counts) and self.streaming:  # the group reaches the cluster now, not at the refresh's end
            mirrored = mirror_group(settings=self.settings)
            self.streamed["syncs"] += 1
            self.streamed["retries"] += mirrored["retries"]
            self.streamed["indexed"] += mirrored.get("indexed", 0)
            if mirrored.get("pending"):
                self.streaming = False  # the cluster is down: no group waits on its retries; the end's sync completes
            elif self.first_mirrored is None:
                self.first_mirrored = self.live.elapsed
                get_run_logger().info("the first documents are on the cluster, %.1f s in", self.first_mirrored)
        for r in group:
            self.problems += r.problems
            if r.publish:
                self.recorded.update(item.item_id for item in r.problems)
        self._settle(len(group))

    def _settle(self, documents: int) -> None:
        self.live.settled += documents
        update_progress_artifact(self.progress, progress=100.0 * self.live.settled / max(self.total, 1))

"""`corpus_refresh`: discover → diff → parse (OCR and ASR fanned out on Dask) → chunk → embed → publish.

Orchestration only: which stage runs, in what order, fanned out how, with what retries and milestones. The
stages themselves live in `tasks/`.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.runtime import flow_run
from prefect_dask import DaskTaskRunner

from flows import events
from flows.refresh_tasks import (
    GROUP_PAGES,
    Ready,
    apply_catalog_changes,
    build_meta_documents,
    chunk_and_gate,
    dask_task_runner,
    discover,
    embed,
    hold_back,
    ocr_page,
    publish,
    read_batches,
    read_catalog,
    read_own_text,
    searchable,
    speech_plan,
    sync_opensearch,
    transcribe,
    transcript,
    whole_document,
)
from korpus.datamodel import QuarantineItem, Source, SourceKind
from korpus.model_store import set_offline_switches
from korpus.settings import Settings
from tasks.audio.speech import (
    RecordingOutcome,
    RecordingPlan,
)
from tasks.contract.splitter import LlmSplitter
from tasks.index.sqlite import SqliteIndex
from tasks.parse import ParseOutcome
from tasks.receive import RefreshPlan, plan_refresh, unchanged_since_discovery
from tasks.runtime.crash_points import crash_point
from tasks.runtime.refresh_lock import refresh_lock
from tasks.runtime.retry import RetryPolicy


def _parse_all(plan: RefreshPlan, settings: Settings) -> dict[str, ParseOutcome]:
    """Submit every source's first stage, then fan PDF pages needing OCR and speech windows out, across all
    documents and recordings at once.

    The Dask cluster starts here, only when there is something to parse: an unchanged corpus costs no cluster.
    """
    if not plan.to_process:
        return {}
    with dask_task_runner(settings) as runner:
        return _parse_on(runner, plan, settings)


def _parse_on(runner: DaskTaskRunner, plan: RefreshPlan, settings: Settings) -> dict[str, ParseOutcome]:
    def submit(stage: Any, **parameters: Any) -> Any:
        return runner.submit(stage, parameters=parameters)

    first: dict[str, Any] = {}
    for source in plan.to_process:
        if source.kind is SourceKind.audio:
            first[source.source_id] = submit(speech_plan, source=source, settings=settings)
    reads = [s for s in plan.to_process if s.kind is not SourceKind.audio]
    batches = [(batch, submit(read_own_text, sources=batch, settings=settings)) for batch in read_batches(reads)]
    by_id = {s.source_id: s for s in plan.to_process}
    outcomes: dict[str, ParseOutcome] = {}
    ocr_futures, recordings = [], {}
    # a batch's OCR pages go out as soon as that batch is read, while later batches are still being read
    answered = chain(  # lazily: each batch's result is awaited when the loop reaches it
        ((s.source_id, r) for batch, future in batches for s, r in zip(batch, future.result(), strict=True)),
        ((source_id, future.result()) for source_id, future in first.items()),
    )
    for source_id, result in answered:
        if isinstance(result, RecordingPlan):
            recordings[source_id] = result
            continue
        outcomes[source_id] = result
        ocr_futures += [
            (
                source_id,
                submit(ocr_page, source=by_id[source_id], page=page, settings=settings, layer=result.flagged.get(page)),
            )
            for page in result.ocr_pending
        ]
    window_futures = {
        source_id: [
            submit(transcribe, plan=rec, indices=rec_batch, settings=settings)
            for rec_batch in _batches(list(range(len(rec.windows))), settings.asr_windows_per_task)
        ]
        for source_id, rec in recordings.items()
        if rec.problem is None
    }
    milestones = {
        source_id: (create_progress_artifact(progress=0.0, description=_pages_done(by_id[source_id], outcome, 0)), 0)
        for source_id, outcome in outcomes.items()
        if outcome.ocr_pending
    }
    for owner, future in ocr_futures:
        page_outcome: ParseOutcome = future.result()
        target = outcomes[owner]
        target.pages.extend(page_outcome.pages)
        target.problems.extend(page_outcome.problems)
        target.engine_calls += page_outcome.engine_calls
        target.vlm_calls += page_outcome.vlm_calls
        target.cache_hits += page_outcome.cache_hits
        target.unread.update(page_outcome.unread)
        target.retries += page_outcome.retries
        artifact, done = milestones[owner]
        milestones[owner] = (artifact, done + 1)
        update_progress_artifact(
            artifact,
            progress=100.0 * (done + 1) / len(target.ocr_pending),
            description=_pages_done(by_id[owner], target, done + 1),
        )
    for source_id, rec in recordings.items():
        outcomes[source_id] = _speech_outcome(by_id[source_id], rec, window_futures.get(source_id, []), settings)
    for outcome in outcomes.values():
        outcome.pages.sort(key=lambda p: (p.page or 0, p.t_start or 0.0))
    return outcomes


def _pages_done(source: Source, outcome: ParseOutcome, ocr_done: int) -> str:
    ready = outcome.page_count - len(outcome.ocr_pending) + ocr_done
    return f"{source.file_name} → {ready}/{outcome.page_count} страниц"


def _batches(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _speech_outcome(source: Source, rec: RecordingPlan, futures: list, settings: Settings) -> ParseOutcome:
    """Collect a recording's windows with a progress milestone, then assemble its transcript."""
    if rec.problem is not None:
        return ParseOutcome(problems=[rec.problem])
    total_min = rec.duration / 60
    progress = create_progress_artifact(progress=0.0, description=f"{source.file_name} → 0/{total_min:.1f} мин записи")
    results, calls, hits, done_seconds = [], 0, 0, 0.0
    for future in futures:
        for result, called in future.result():
            results.append(result)
            calls += called
            hits += not called
            done_seconds = max(done_seconds, rec.windows[result.index].end)
        update_progress_artifact(
            progress,
            progress=100.0 * done_seconds / max(rec.duration, 1e-6),
            description=f"{source.file_name} → {done_seconds / 60:.1f}/{total_min:.1f} мин записи",
        )
    silent_tail = rec.duration - done_seconds  # no speech window reaches the end: that stretch had no speech
    update_progress_artifact(
        progress,
        progress=100.0,
        description=f"{source.file_name} → {total_min:.1f}/{total_min:.1f} мин записи"
        + (f" (последние {silent_tail:.0f} с без речи)" if silent_tail >= 1 else ""),
    )
    assembled: RecordingOutcome = transcript(source, rec, results, settings)
    return ParseOutcome(
        pages=assembled.pages,
        problems=assembled.problems,
        page_count=len(assembled.pages),
        engine_calls=calls,
        cache_hits=hits,
        stats={
            "audio_seconds": assembled.audio_seconds,
            "speech_seconds": assembled.speech_seconds,
            "segments_dropped": assembled.segments_dropped,
            "repeats_collapsed": assembled.repeats_collapsed,
        },
    )


@flow(name="corpus_refresh", log_prints=False)
def corpus_refresh(root: str, data: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Bring the index in line with the files under `root`: new and changed sources indexed, removed ones
    retired, unchanged ones left alone (no OCR, ASR or embedding). `overrides` are settings given explicitly
    (over KORPUS_* and korpus.yaml), e.g. {"chunk_policy": "structure-v1"}."""
    set_offline_switches()
    settings = Settings(**(overrides or {}), **({"data": Path(data)} if data else {}))
    with refresh_lock(settings.data, wait=settings.refresh_wait):  # one refresh at a time per data directory
        return _refresh(root, settings)


def _refresh(root: str, settings: Settings) -> dict[str, Any]:
    """The flow's body, run while it holds the data directory's refresh lock."""
    started = time.perf_counter()
    logger = get_run_logger()
    indexed, refused = read_catalog(settings)
    plan = plan_refresh(discover(root), indexed, refused)
    crash_point("after-discover")
    logger.info(
        "%d to process, %d unchanged, %d removed, %d refused",
        len(plan.to_process),
        len(plan.unchanged),
        len(plan.removed),
        len(plan.rejected),
    )
    progress = (
        create_progress_artifact(progress=0.0, key="corpus-refresh", description="sources processed")
        if plan.to_process
        else None
    )
    splitter = (
        LlmSplitter(
            settings.splitter_url,
            settings.splitter_model,
            settings.splitter_timeout,
            RetryPolicy.from_settings(settings),
        )
        if settings.splitter_url
        else None
    )
    outcomes = _parse_all(plan, settings)
    crash_point("after-parse")
    problems = list(plan.rejected)
    methods: Counter[str] = Counter()
    indexed_chunks = embedded = 0
    group: list[Ready] = []  # documents chunked and gated, embedded and published together
    waiting: dict[str, list[int]] = {}
    moved: list[str] = []
    for done, source in enumerate(plan.to_process, start=1):
        outcome = outcomes[source.source_id]
        if not unchanged_since_discovery(source):  # replaced or removed mid-run: what was read is not this version
            logger.warning("%s changed or vanished during the refresh; the next refresh takes it", source.source_id)
            moved.append(source.source_id)
            continue
        found = list(outcome.problems)
        if outcome.unread:
            pages_waiting, given_up = hold_back(source, outcome.unread, settings)
            if pages_waiting:
                waiting[source.source_id] = pages_waiting
                update_progress_artifact(progress, progress=100.0 * done / len(plan.to_process))
                continue
            found += given_up
        problems.extend(found)
        methods.update(p.method for p in outcome.pages)
        if any((p.tier or 0) >= 1 for p in outcome.pages):
            searchable(source, outcome.pages, settings)
        if settings.quarantine_whole_document and any(p.page for p in found):
            problems.append(whole_document(source, outcome))
            continue
        group.append(Ready(source, outcome, quarantined_pages=any(p.page for p in found)))
        pages_in_group = sum(len(r.outcome.pages) for r in group)
        if len(group) >= settings.index_group_sources or pages_in_group >= GROUP_PAGES:
            embedded, indexed_chunks = _index_group(group, settings, splitter, problems, embedded, indexed_chunks)
            group = []
            update_progress_artifact(progress, progress=100.0 * done / len(plan.to_process))
    if group:
        embedded, indexed_chunks = _index_group(group, settings, splitter, problems, embedded, indexed_chunks)
    if progress is not None:  # every source was seen: held back or changed mid-run ones say so instead
        update_progress_artifact(progress, progress=100.0, description=(
            f"sources processed: {len(plan.to_process) - len(waiting) - len(moved)} of {len(plan.to_process)} indexed"
            + (f", {len(waiting)} waiting for unread pages" if waiting else "")
            + (f", {len(moved)} changed during the run" if moved else "")))  # fmt: skip
    apply_catalog_changes(plan, problems, settings)
    events.sources_quarantined(problems)
    meta = None
    if settings.meta_documents:
        try:
            meta = build_meta_documents(settings)
        except Exception as exc:  # the files are published: documents about them failing must not fail the refresh
            logger.exception("meta-documents not rebuilt; the previous ones stay served")
            meta = {"error": f"{type(exc).__name__}: {exc}"}
    mirrored = sync_opensearch(settings) if settings.backend == "opensearch" else None
    kinds = {s.source_id: s.kind for s in plan.to_process}
    summary = {
        "sources": len(plan.change),
        "changes": dict(Counter(c.value for c in plan.change.values())),
        "relabelled": len(plan.relabel),
        "quarantined": len(problems),
        "quarantine_reasons": dict(Counter(r.value for item in problems for r in item.reasons)),
        "pages_by_method": dict(methods),
        "pages_by_tier": dict(
            Counter(f"tier {p.tier}" for o in outcomes.values() for p in o.pages if p.tier is not None)
        ),
        "ocr_engine_calls": sum(o.engine_calls for s, o in outcomes.items() if kinds[s] and kinds[s].paged),
        "layers_checked": dict(
            Counter(p.layer_check.decision for o in outcomes.values() for p in o.pages if p.layer_check)
        ),
        "vlm_calls": sum(o.vlm_calls for o in outcomes.values()),
        "asr_engine_calls": sum(o.engine_calls for s, o in outcomes.items() if kinds[s] is SourceKind.audio),
        "page_cache_hits": sum(o.cache_hits for o in outcomes.values()),
        "audio_seconds": round(sum(o.stats.get("audio_seconds", 0) for o in outcomes.values()), 1),
        "speech_share": _speech_share(outcomes),
        "asr_segments_dropped": int(sum(o.stats.get("segments_dropped", 0) for o in outcomes.values())),
        "asr_repeats_collapsed": int(sum(o.stats.get("repeats_collapsed", 0) for o in outcomes.values())),
        "chunk_policy": settings.chunk_policy,
        "splitter_used": splitter.used if splitter else None,
        "splitter_fallbacks": dict(splitter.fallbacks) if splitter else None,
        "changed_during_run": moved,
        "transient_retries": sum(o.retries for o in outcomes.values()),
        "pending_sources": len(waiting),
        "pending_pages": {source_id: pages for source_id, pages in waiting.items()},
        "chunks_embedded": embedded,
        "chunks_indexed": indexed_chunks,
        "meta_documents": meta,
        "opensearch": mirrored,
        "seconds": round(time.perf_counter() - started, 2),
        "flow_run_id": str(flow_run.id) if flow_run.id else None,  # its artifacts and task states in the Prefect UI
        "review": f"{settings.review_url.rstrip('/')}?status=open" if settings.review_url else None,
    }
    create_markdown_artifact(markdown=_summary_markdown(summary), key="corpus-refresh-summary")
    headline = ("sources", "changes", "chunks_indexed", "quarantined", "quarantine_reasons", "pending_sources",
                "transient_retries", "seconds")  # fmt: skip
    with SqliteIndex(settings.index_path) as index:
        index.record_refresh({"finished_at": datetime.now(UTC).isoformat(timespec="seconds"), "root": root,
                              **{key: summary[key] for key in headline}})  # fmt: skip
        open_items = index.stats()["quarantine_open"]
    events.refresh_completed(str(settings.data), summary, open_items)
    return summary


def _index_group(
    group: list[Ready],
    settings: Settings,
    splitter: LlmSplitter | None,
    problems: list[QuarantineItem],
    embedded: int,
    indexed: int,
) -> tuple[int, int]:
    """Chunk and gate the group's documents in one task, embed their passed chunks in one task (batches across
    documents) and publish them; refusals go to `problems`. Returns the running counts of chunks embedded and
    indexed."""
    cut, refused = chunk_and_gate(group, settings, splitter)
    problems.extend(refused)
    for ready, (count, passed) in zip(group, cut, strict=True):
        ready.chunks, ready.passed = count, passed
    crash_point("after-chunk")
    logger = get_run_logger()
    for r in group:
        logger.info("%s → %d/%d pages, %d chunks", r.source.source_id, len(r.outcome.pages), r.outcome.page_count,
                    r.chunks)  # fmt: skip
    ready = [r for r in group if r.publish]
    chunks = [c for r in ready for c in r.passed]
    vectors = embed(chunks, settings) if chunks else np.zeros((0, 0), dtype=np.float32)
    crash_point("after-embed")
    counts = publish(ready, vectors, settings) if ready else []
    return embedded + len(chunks), indexed + sum(counts)


def _speech_share(outcomes: dict[str, ParseOutcome]) -> float | None:
    audio = sum(o.stats.get("audio_seconds", 0) for o in outcomes.values())
    speech = sum(o.stats.get("speech_seconds", 0) for o in outcomes.values())
    return round(speech / audio, 3) if audio else None


def _summary_markdown(summary: dict[str, Any]) -> str:
    lines = ["# Corpus refresh", ""]
    if summary["review"]:
        link = f"[открыть очередь]({summary['review']})"
        lines += [f"**Карантин:** {summary['quarantined']} в этом обновлении — {link}", ""]
    elif summary["quarantined"]:
        lines += [f"**Карантин:** {summary['quarantined']} в этом обновлении — `/review` в `korpus serve` "
                  "(KORPUS_REVIEW_URL ставит сюда ссылку)", ""]  # fmt: skip
    lines += ["| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in summary.items()]
    return "\n".join(lines)


def run_refresh(root: Path, settings: Settings) -> dict[str, Any]:
    """Run the flow with these settings: every field that differs from what the flow would read itself (KORPUS_*,
    korpus.yaml) travels as a flow parameter — never the API keys. The Dask task runner comes from the settings."""
    own, ambient = settings.model_dump(mode="json"), Settings().model_dump(mode="json")
    overrides = {k: v for k, v in own.items() if v != ambient[k] and k not in ("data", "api_keys", "review_keys")}
    return corpus_refresh(root=str(root), data=str(settings.data), overrides=overrides or None)


if __name__ == "__main__":
    import sys

    print(run_refresh(Path(sys.argv[1]), Settings()))

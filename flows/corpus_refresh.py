"""`corpus_refresh`: discover → diff → parse (OCR and ASR fanned out on Dask) → chunk → embed → publish, streamed:
each document goes on to be indexed as soon as its own pages are in (flows/refresh_stream.py).

Orchestration only: which stage runs, in what order, fanned out how, with what retries and milestones. The
stages themselves live in `tasks/`.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.runtime import flow_run

from flows import events
from flows import progress as refresh_progress
from flows.after_documents import build_meta_documents, collect_garbage, sync_opensearch
from flows.first_documents import Warmer, first_documents
from flows.refresh_stream import Indexer, Inflight, Parse
from flows.refresh_tasks import (
    apply_access_changes,
    apply_catalog_changes,
    dask_task_runner,
    discover,
    read_catalog,
)
from flows.tally import Tally
from korpus.core.model_store import set_offline_switches
from korpus.core.settings import Settings
from tasks.contract.splitter import LlmSplitter
from tasks.index.sqlite import IndexWriteError, SqliteIndex
from tasks.readers.base import failure
from tasks.receive import plan_refresh
from tasks.runtime.crash_points import crash_point
from tasks.runtime.memory import cap_arenas, release_free_memory
from tasks.runtime.prefect_server import flows_on_server
from tasks.runtime.processes import watch_over_me
from tasks.runtime.reader_child import stop_children, warm_reader
from tasks.runtime.refresh_lock import refresh_lock
from tasks.runtime.retry import RetryPolicy


class RefreshFailed(RuntimeError):
    """The refresh itself failed (not one file: those are quarantined): what was published stays, removals and
    relabels were applied, and `korpus refresh` exits non-zero with this message."""


@flow(name="corpus_refresh", log_prints=False)
def corpus_refresh(root: str, data: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Bring the index in line with the files under `root`: new and changed sources indexed, removed ones
    retired, unchanged ones left alone (no OCR, ASR or embedding). `overrides` are settings given explicitly
    (over KORPUS_* and korpus.yaml), e.g. {"chunk_policy": "structure-v1"}."""
    set_offline_switches()
    cap_arenas()  # the cluster's threads share two allocator arenas (#32; its own effect is not measured yet)
    settings = Settings(**(overrides or {}), **({"data": Path(data)} if data else {}))
    with refresh_lock(settings.data, wait=settings.refresh_wait):  # one refresh at a time per data directory
        return _refresh(root, settings)


def _refresh(root: str, settings: Settings) -> dict[str, Any]:
    """The flow's body, run while it holds the data directory's refresh lock."""
    started = time.perf_counter()
    logger = get_run_logger()
    warm_reader(settings)  # the flow thread's reading child imports its readers while discovery runs
    if settings.backend == "opensearch":  # a first refresh's cluster index made meanwhile, before its first group
        from tasks.index.opensearch import prepare

        prepare(settings)
    indexed, refused, listings = read_catalog(settings)
    # the first documents' embedder loads from the first new letter discovery finds, not after the plan
    warmer = Warmer(settings, indexed, refused)
    sources = discover(root, settings, warmer.found)
    plan = plan_refresh(sources, indexed, refused, listings)
    warmer.planned(plan)
    crash_point("after-discover")
    reduced = plan.relabel or plan.removed or plan.rejected
    if reduced or plan.refused_labels:  # no task to wait for when nothing changed labels (first-searchable, #63)
        apply_access_changes(plan, settings)  # relabels and removals first: served to nobody it no longer admits
    mirrored_first = sync_opensearch(settings) if settings.backend == "opensearch" and reduced else None
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
    tally = Tally()
    live = refresh_progress.begin(len(plan.to_process), started)  # the refresh's counts, shown on the terminal
    indexer = Indexer(settings, splitter, len(plan.to_process), progress, tally, live)
    broken: Exception | None = None
    try:
        rest = first_documents(plan, settings, indexer)  # the first letters searchable before the cluster starts
        if rest.to_process:  # the Dask cluster starts only when there is something left to parse
            with dask_task_runner(settings) as runner:
                indexer.work = work = Inflight(runner)
                Parse(work, rest, settings, on_document=indexer.add, on_done=indexer.flush, live=live).start()
                work.run()  # every document parsed, embedded and published as its own work completes
    except Exception as exc:  # the refresh itself failed (a file's failure is that file's item, never this)
        logger.exception("the refresh failed; its removals and relabels were applied before it")
        broken = exc
    finally:
        stop_children()  # the reading child processes: none outlives the documents' work
        live.documents_done = True
    waiting, moved = indexer.waiting, indexer.moved
    problems = list(plan.rejected) + indexer.problems
    if progress is not None:  # every source was seen: held back or changed mid-run ones say so instead
        update_progress_artifact(
            progress,
            progress=100.0,
            description=(
                f"sources processed: {len(plan.to_process) - len(waiting) - len(moved)} "
                f"of {len(plan.to_process)} indexed"
                + (f", {len(waiting)} waiting for unread pages" if waiting else "")
                + (f", {len(moved)} changed during the run" if moved else "")
            ),
        )
    unrecorded = [p for p in problems if p.item_id not in indexer.recorded]  # no publish wrote them
    if broken is not None:
        _fail_refresh(broken, root, settings, partial(apply_catalog_changes, plan, unrecorded, settings))
    apply_catalog_changes(plan, unrecorded, settings)
    events.sources_quarantined(problems)
    planned = {
        "sources": len(plan.change),
        "changes": dict(Counter(c.value for c in plan.change.values())),
        "relabelled": len(plan.relabel),
        "files_hashed": sum(1 for s in sources if s.inode and s.hashed),  # the rest matched their last reading
    }
    del sources, plan, indexed, refused  # one object a file: the meta-documents' build does not hold them too (#32)
    meta = None
    if settings.meta_documents:
        release_free_memory()  # what the documents' work left free goes back first: their peaks do not add up
        try:
            meta = build_meta_documents(settings)
        except Exception as exc:  # the files are published: documents about them failing must not fail the refresh
            # but the registers built before may name people from documents just removed or moved to another
            # scope: they are withdrawn until a build succeeds, never served stale
            logger.exception("meta-documents not rebuilt; the previous ones are withdrawn")
            with SqliteIndex(settings.index_path) as index:
                withdrawn = index.withdraw_meta_documents()
            meta = {"error": failure(exc), "withdrawn": withdrawn}
    collected = collect_garbage(settings) if settings.gc_after_refresh else None
    mirrored = sync_opensearch(settings) if settings.backend == "opensearch" else None
    summary = {
        **planned,
        "quarantined": len(problems),
        "quarantine_reasons": dict(Counter(r.value for item in problems for r in item.reasons)),
        **tally.summary(),  # pages by method and tier, engine calls, cache hits, audio, retries
        "chunk_policy": settings.chunk_policy,
        "splitter_used": splitter.used if splitter else None,
        "splitter_fallbacks": dict(splitter.fallbacks) if splitter else None,
        "changed_during_run": moved,
        "pending_sources": len(waiting),
        "pending_pages": {source_id: pages for source_id, pages in waiting.items()},
        "chunks_embedded": indexer.embedded,
        "chunks_indexed": live.chunks_indexed,
        "first_searchable_seconds": round(live.first_searchable, 2) if live.first_searchable is not None else None,
        # on the cluster (KORPUS_BACKEND=opensearch): each group is sent as it is published
        "opensearch_first_searchable_seconds": round(indexer.first_mirrored, 2)
        if indexer.first_mirrored is not None
        else None,
        "opensearch_streamed": indexer.streamed if indexer.streaming or indexer.streamed["syncs"] else None,
        "meta_documents": meta,
        "garbage_collected": {k: collected[k] for k in ("versions", "chunks", "files", "file_bytes")}
        if collected
        else None,
        "opensearch": mirrored,
        "opensearch_first": mirrored_first,  # the relabels and removals, mirrored before any document was read
        "seconds": round(time.perf_counter() - started, 2),
        "flow_run_id": str(flow_run.id) if flow_run.id else None,  # its artifacts and task states in the Prefect UI
        "review": f"{settings.review_url.rstrip('/')}?status=open" if settings.review_url else None,
    }
    create_markdown_artifact(markdown=_summary_markdown(summary), key="corpus-refresh-summary")
    headline = (
        "sources",
        "changes",
        "chunks_indexed",
        "quarantined",
        "quarantine_reasons",
        "pending_sources",
        "transient_retries",
        "seconds",
    )
    with SqliteIndex(settings.index_path) as index:
        index.record_refresh(
            {
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "root": root,
                **{key: summary[key] for key in headline},
                **({"meta_failed": meta["error"]} if meta and "error" in meta else {}),
            }
        )
        open_items = index.stats()["quarantine_open"]
    events.refresh_completed(str(settings.data), summary, open_items)
    return summary


def _fail_refresh(broken: Exception, root: str, settings: Settings, catalog_changes: Any) -> None:
    """The refresh itself failed: record its quarantine items all the same (its relabels and removals were applied
    at its first step), record the failure for `korpus status`, and raise — the index's own write error as it is
    (exit 2: the disk), anything else as RefreshFailed."""
    try:
        catalog_changes()
        with SqliteIndex(settings.index_path) as index:
            index.record_refresh(
                {
                    "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "root": root,
                    "failed": failure(broken),
                }
            )
    except Exception:  # the index cannot take even these (a full disk): the failure below says why
        get_run_logger().exception("the refresh's quarantine items could not be written either")
    if isinstance(broken, IndexWriteError):
        raise broken
    raise RefreshFailed(f"the refresh failed: {failure(broken)}") from broken


def _summary_markdown(summary: dict[str, Any]) -> str:
    lines = ["# Corpus refresh", ""]
    if summary["review"]:
        link = f"[открыть очередь]({summary['review']})"
        lines += [f"**Карантин:** {summary['quarantined']} в этом обновлении — {link}", ""]
    elif summary["quarantined"]:
        lines += [
            f"**Карантин:** {summary['quarantined']} в этом обновлении — `/review` в `korpus serve` "
            "(KORPUS_REVIEW_URL ставит сюда ссылку)",
            "",
        ]
    lines += ["| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in summary.items()]
    return "\n".join(lines)


SECRET_OR_LOCAL = ("data", "api_keys", "review_keys", "opensearch_password")


def run_refresh(root: Path, settings: Settings) -> dict[str, Any]:
    """Run the flow with these settings on korpus's local Prefect server (tasks/runtime/prefect_server.py: started
    once, reused, its history kept) or PREFECT_API_URL: every field that differs from what the flow would read itself
    (KORPUS_*, korpus.yaml) travels as a flow parameter — never the API keys or the cluster's password (parameters
    are stored by Prefect: the flow reads KORPUS_OPENSEARCH_PASSWORD from its own environment). The Dask task runner
    comes from the settings."""
    watch_over_me()  # what this process starts (LibreOffice, Tesseract) is killed with it, also when it is SIGKILLed
    own, ambient = settings.model_dump(mode="json"), Settings().model_dump(mode="json")
    overrides = {k: v for k, v in own.items() if v != ambient[k] and k not in SECRET_OR_LOCAL}
    if overrides.get("catalog_url"):  # a password in the URL never becomes a stored parameter (PGPASSWORD has it)
        from tasks.index.pg_catalog import without_password

        overrides["catalog_url"] = without_password(overrides["catalog_url"])
    with flows_on_server(settings.prefect_port):  # korpus's local server, started once (or PREFECT_API_URL)
        return corpus_refresh(root=str(root), data=str(settings.data), overrides=overrides or None)


if __name__ == "__main__":
    import sys

    print(run_refresh(Path(sys.argv[1]), Settings()))

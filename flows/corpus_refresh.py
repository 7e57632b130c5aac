"""`corpus_refresh`: discover → diff → parse (OCR and ASR fanned out on Dask) → chunk → embed → publish.

Orchestration only: which stage runs, in what order, fanned out how, with what retries and milestones. The
stages themselves live in `tasks/`.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect_dask import DaskTaskRunner

from korpus.datamodel import Chunk, QuarantineItem, Source, SourceKind
from korpus.model_store import embed_model_path, set_offline_switches
from korpus.settings import Settings
from tasks.chunking import page_chunks
from tasks.embedding import shared_embedder
from tasks.index_sqlite import SqliteIndex
from tasks.parse import (
    ParseOutcome,
    ocr_pdf_page,
    parse_pdf_text_layers,
    read_plain_text,
    transcribe_recording,
)
from tasks.receive import RefreshPlan, discover_sources, plan_refresh


def dask_task_runner(settings: Settings) -> DaskTaskRunner:
    """An existing cluster when KORPUS_DASK_ADDRESS is set, else a LocalCluster of threads.

    Threads, not processes: each worker process would start its own temporary Prefect server (FACTS.md), and
    the heavy work (Tesseract subprocesses, CTranslate2, torch) releases the GIL anyway.
    """
    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
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
def read_catalog(settings: Settings) -> tuple[dict[str, dict[str, tuple]], dict[str, dict[str, set[str]]]]:
    index = SqliteIndex(settings.index_path)
    try:
        return index.indexed_versions(), index.refused_versions()
    finally:
        index.close()


@task(name="discover", cache_policy=NO_CACHE)
def discover(root: str) -> list[Source]:
    return discover_sources(Path(root))


@task(name="text-layers", cache_policy=NO_CACHE)
def text_layers(source: Source, settings: Settings) -> ParseOutcome:
    return parse_pdf_text_layers(source, settings)


@task(name="ocr-page", cache_policy=NO_CACHE, retries=1, tags=["ocr"])
def ocr_page(source: Source, page: int, settings: Settings) -> ParseOutcome:
    return ocr_pdf_page(source, page, settings)


@task(name="transcribe", cache_policy=NO_CACHE, tags=["asr"])
def transcribe(source: Source, settings: Settings) -> ParseOutcome:
    return transcribe_recording(source, settings)


@task(name="plain-text", cache_policy=NO_CACHE)
def plain_text(source: Source) -> ParseOutcome:
    return read_plain_text(source)


@task(name="embed", cache_policy=NO_CACHE)
def embed(chunks: list[Chunk], settings: Settings) -> np.ndarray:
    embedder = shared_embedder(str(embed_model_path(settings)), settings.embed_batch_size)
    return embedder.embed_passages([c.text for c in chunks])


@task(name="publish", cache_policy=NO_CACHE)
def publish(source: Source, chunks: list[Chunk], vectors: np.ndarray, pages: int, settings: Settings) -> int:
    index = SqliteIndex(settings.index_path)
    try:
        index.bind_embedding(embed_model_path(settings).name, int(vectors.shape[1]))
        index.publish_version(source, chunks, vectors, pages)
    finally:
        index.close()
    return len(chunks)


@task(name="catalog-changes", cache_policy=NO_CACHE)
def apply_catalog_changes(plan: RefreshPlan, problems: list[QuarantineItem], settings: Settings) -> None:
    index = SqliteIndex(settings.index_path)
    try:
        index.record_quarantine(problems)
        for source in plan.relabel:
            index.relabel_source(source)
        inadmissible = {item.source_id for item in plan.rejected}
        for source_id in [*plan.removed, *sorted(inadmissible)]:
            index.retire_source(source_id)
    finally:
        index.close()


# --- the flow ------------------------------------------------------------------------------------------------


def _parse_all(plan: RefreshPlan, settings: Settings) -> dict[str, ParseOutcome]:
    """Submit every source's parse, then fan PDF pages that need OCR out across all documents."""
    first: dict[str, Any] = {}
    for source in plan.to_process:
        if source.kind is SourceKind.pdf:
            first[source.source_id] = text_layers.submit(source, settings)
        elif source.kind is SourceKind.audio:
            first[source.source_id] = transcribe.submit(source, settings)
        else:
            first[source.source_id] = plain_text.submit(source)
    outcomes = {source_id: future.result() for source_id, future in first.items()}
    by_id = {s.source_id: s for s in plan.to_process}
    ocr_futures = [
        ocr_page.submit(by_id[source_id], page, settings)
        for source_id, outcome in outcomes.items()
        for page in outcome.ocr_pending
    ]
    for future in ocr_futures:
        page_outcome: ParseOutcome = future.result()
        target = outcomes[page_outcome.pages[0].source_id] if page_outcome.pages else None
        if target is None:
            problem = page_outcome.problems[0]
            target = outcomes[problem.source_id]
        target.pages.extend(page_outcome.pages)
        target.problems.extend(page_outcome.problems)
        target.engine_calls += page_outcome.engine_calls
        target.cache_hits += page_outcome.cache_hits
    for outcome in outcomes.values():
        outcome.pages.sort(key=lambda p: (p.page or 0, p.t_start or 0.0))
    return outcomes


@flow(name="corpus_refresh", task_runner=dask_task_runner(Settings()), log_prints=False)
def corpus_refresh(root: str, data: str | None = None) -> dict[str, Any]:
    """Bring the index in line with the files under `root`: new and changed sources indexed, removed ones
    retired, unchanged ones left alone (no OCR, ASR or embedding)."""
    set_offline_switches()
    started = time.perf_counter()
    logger = get_run_logger()
    settings = Settings(data=Path(data)) if data else Settings()
    indexed, refused = read_catalog(settings)
    plan = plan_refresh(discover(root), indexed, refused)
    logger.info(
        "%d to process, %d unchanged, %d removed, %d refused",
        len(plan.to_process),
        len(plan.unchanged),
        len(plan.removed),
        len(plan.rejected),
    )
    progress = create_progress_artifact(progress=0.0, key="corpus-refresh", description="sources processed")
    outcomes = _parse_all(plan, settings)
    problems = list(plan.rejected)
    methods: Counter[str] = Counter()
    indexed_chunks = embedded = 0
    for done, source in enumerate(plan.to_process, start=1):
        outcome = outcomes[source.source_id]
        problems.extend(outcome.problems)
        methods.update(p.method for p in outcome.pages)
        chunks, empty = page_chunks(source, outcome.pages, settings.language)
        problems.extend(empty)
        if chunks:
            vectors = embed(chunks, settings)
            embedded += len(chunks)
            indexed_chunks += publish(source, chunks, vectors, outcome.page_count, settings)
        logger.info(
            "%s → %d/%d pages, %d chunks",
            source.source_id,
            len(outcome.pages),
            outcome.page_count,
            len(chunks),
        )
        update_progress_artifact(progress, progress=100.0 * done / max(1, len(plan.to_process)))
    apply_catalog_changes(plan, problems, settings)
    kinds = {s.source_id: s.kind for s in plan.to_process}
    summary = {
        "sources": len(plan.change),
        "changes": dict(Counter(c.value for c in plan.change.values())),
        "relabelled": len(plan.relabel),
        "quarantined": len(problems),
        "quarantine_reasons": dict(Counter(r.value for item in problems for r in item.reasons)),
        "pages_by_method": dict(methods),
        "ocr_engine_calls": sum(o.engine_calls for s, o in outcomes.items() if kinds[s] is SourceKind.pdf),
        "asr_engine_calls": sum(o.engine_calls for s, o in outcomes.items() if kinds[s] is SourceKind.audio),
        "page_cache_hits": sum(o.cache_hits for o in outcomes.values()),
        "chunks_embedded": embedded,
        "chunks_indexed": indexed_chunks,
        "seconds": round(time.perf_counter() - started, 2),
    }
    create_markdown_artifact(markdown=_summary_markdown(summary), key="corpus-refresh-summary")
    return summary


def _summary_markdown(summary: dict[str, Any]) -> str:
    lines = ["# Corpus refresh", "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in summary.items()]
    return "\n".join(lines)


def run_refresh(root: Path, settings: Settings) -> dict[str, Any]:
    """Run the flow with the task runner the settings ask for."""
    runner = corpus_refresh.with_options(task_runner=dask_task_runner(settings))
    return runner(root=str(root), data=str(settings.data))


if __name__ == "__main__":
    import sys

    print(run_refresh(Path(sys.argv[1]), Settings()))

"""The Prefect tasks that run once a refresh's documents are published (flows/corpus_refresh.py): the meta-documents,
old versions' garbage, the OpenSearch mirror — each alone, with every core to itself."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.refresh_tasks import embed, embed_threads, mirror_counted
from korpus.core.datamodel import Chunk
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.runtime.retry import RetryPolicy


def embed_on_every_core(chunks: list[Chunk], settings: Settings) -> np.ndarray:
    """`embed` for work that runs alone, after the documents (the meta-documents' parts): the texts dealt out to as
    many side-by-side runs of the one shared ONNX session as the cores allow, instead of one run on one task's share
    (two single-core runs side by side: 125 texts/s, one: 73 — benchmarks/scale.py). No second session is loaded."""
    ways = max(1, len(os.sched_getaffinity(0)) // embed_threads(settings))
    if ways == 1 or len(chunks) < 2 * 16:
        return embed.fn(chunks, settings)
    with ThreadPoolExecutor(ways) as pool:
        dealt = list(pool.map(lambda n: embed.fn(chunks[n::ways], settings), range(ways)))
    out = np.zeros((len(chunks), dealt[0].shape[1]), dtype=np.float32)
    for n, vectors in enumerate(dealt):
        out[n::ways] = vectors
    return out


@task(name="meta-documents", cache_policy=NO_CACHE)
def build_meta_documents(settings: Settings) -> dict[str, Any]:
    """The collection's table of contents, chronology and registers, per access scope, rebuilt where the sources
    they come from changed (tasks/meta)."""
    from tasks.meta.facts import FactCache
    from tasks.meta.llm import LlmEvents
    from tasks.meta.publish import refresh_meta
    from tasks.runtime.chat import ChatClient

    llm = None
    if settings.llm_url:
        client = ChatClient(
            settings.llm_url, settings.llm_model, settings.llm_timeout, RetryPolicy.from_settings(settings)
        )
        llm = LlmEvents(client)
    cache = FactCache(settings.meta_cache_dir, variant=llm.variant if llm else "")
    with SqliteIndex(settings.index_path) as index:
        return refresh_meta(
            index, cache, lambda chunks: embed_on_every_core(chunks, settings), embed_model_path(settings).name, llm=llm
        )


@task(name="collect-garbage", cache_policy=NO_CACHE)
def collect_garbage(settings: Settings) -> dict[str, Any]:
    """Versions past `KORPUS_RETENTION_DAYS` removed from the catalog and the disk (tasks/index/retention.py), under
    the refresh's own lock."""
    from tasks.index.retention import collect_garbage as collect

    return collect(settings, take_lock=False)


@task(name="sync-opensearch", cache_policy=NO_CACHE)
def sync_opensearch(settings: Settings) -> dict[str, Any]:
    """Mirror what the catalog serves to the cluster (KORPUS_BACKEND=opensearch). Each request is retried with
    backoff while the cluster is down or overloaded; when it stays down the catalog's changes stand, the cluster
    keeps serving what it served, and the answer says `pending` — the sync is idempotent, so the next refresh (or
    `korpus sync-opensearch`) completes it. A `--verify` refresh (the weekly `verify` deployment) reconciles:
    every chunk compared, not only what changed (`korpus opensearch reconcile`)."""
    report = mirror_counted(settings, full=settings.verify)
    if report.get("pending"):
        get_run_logger().error("OpenSearch mirror left pending: %s", report["error"])
    return report

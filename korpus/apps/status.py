"""`korpus status`: what a person asks first — whether korpus is healthy (`degraded`, with every reason: the search
backend unreachable, the index's model not the configured one or missing, the last refresh or meta-document build
failed, the quarantine growing refresh after refresh), the last refresh, the open quarantine by reason, the index,
the models in use, and whether the Prefect server and Dask scheduler the settings name answer. `/health` of
`korpus serve` gives the same verdict (HTTP 503 when degraded).

Every probe is bounded (2 s) and read-only: a status check never starts a server, loads a model or writes the index.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from itertools import pairwise
from typing import Any
from urllib.parse import urlparse

import httpx

from korpus.core.model_store import ModelMissingError, embed_model_path, whisper_model_path
from korpus.core.settings import Settings

PROBE_SECONDS = 2.0


def _model(find: Any, settings: Settings) -> str:
    try:
        return str(find(settings))
    except ModelMissingError as exc:
        return f"missing: {exc}"


def prefect_status() -> str:
    """Whether PREFECT_API_URL answers its health check; unset, the persistent local server korpus starts on the
    first refresh and reuses (tasks/runtime/prefect_server.py), running or not yet."""
    url = os.environ.get("PREFECT_API_URL")
    if not url:
        from prefect.settings import PREFECT_API_URL

        url = PREFECT_API_URL.value()
    if not url:
        from tasks.runtime.prefect_server import running_server

        server = running_server()
        if server is None:
            return "not configured: the next refresh starts korpus's local Prefect server and keeps it (history kept)"
        return f"korpus's local Prefect server at {server['api_url']} answers (UI: {server['ui_url']})"
    try:
        answered = httpx.get(f"{url.rstrip('/')}/health", timeout=PROBE_SECONDS).status_code == 200
    except httpx.HTTPError as exc:
        return f"{url} does not answer ({type(exc).__name__})"
    return f"{url} answers" if answered else f"{url} answers, but its health check fails"


def dask_status(address: str | None) -> str:
    """Whether the scheduler KORPUS_DASK_ADDRESS names accepts a connection; unset means a LocalCluster per run."""
    if not address:
        return "not configured: each refresh starts a LocalCluster"
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 8786), timeout=PROBE_SECONDS):
            return f"{address} answers"
    except OSError as exc:
        return f"{address} does not answer ({exc.strerror or type(exc).__name__})"


def health_reasons(
    settings: Settings,
    stats: dict[str, Any] | None,
    last: dict[str, Any] | None,
    search: dict[str, Any] | None,
    history: list[int],
    dask: str | None = None,
    prefect: str | None = None,
) -> list[str]:
    """Why the service is degraded, one plain reason each; empty when healthy. Read-only and bounded. `dask`,
    `prefect`: what `dask_status` and `prefect_status` said, when the caller probed already."""
    reasons = []
    if search is not None and search.get("status") != "ok":
        reasons.append(f"search backend {search.get('backend')} {search.get('status')}: {search.get('error', '')}")
    try:
        configured = embed_model_path(settings).name
    except ModelMissingError as exc:
        configured = None
        reasons.append(f"embedding model missing: {exc}")
    if stats and configured and stats.get("embed_model") and stats["embed_model"] != configured:
        reasons.append(
            f"model mismatch: the index was built with {stats['embed_model']}, the configured model is "
            f"{configured} (korpus reindex, or KORPUS_EMBED_MODEL)"
        )
    if settings.dask_address and "does not answer" in (dask := dask or dask_status(settings.dask_address)):
        reasons.append(f"Dask scheduler {dask}: refreshes cannot run")  # a configured part of the topology is down
    if os.environ.get("PREFECT_API_URL") and "does not answer" in (prefect := prefect or prefect_status()):
        reasons.append(f"Prefect server {prefect}: scheduled refreshes do not start")
    if last and last.get("failed"):
        reasons.append(f"the last refresh failed ({last.get('finished_at')}): {last['failed']}")
    if last and last.get("meta_failed"):
        reasons.append(f"the last meta-document build failed, the registers are withdrawn: {last['meta_failed']}")
    rises = [b > a for a, b in pairwise(history)]
    if len(rises) >= 3 and all(rises[-3:]):
        reasons.append(
            f"quarantine growing: {' → '.join(map(str, history[-4:]))} open items over the last "
            "refreshes (korpus review list)"
        )
    return reasons


def collect_status(settings: Settings) -> dict[str, Any]:
    """Everything `korpus status` prints, as one dict (the `--json` form)."""
    from tasks.index.sqlite import SqliteIndex

    status: dict[str, Any] = {"health": "ok", "data": str(settings.data)}
    stats, last, search, history = None, None, None, []
    if settings.index_path.is_file():
        with SqliteIndex(settings.index_path) as index:
            stats = index.stats()
            reasons: Counter[str] = Counter()
            for (codes,) in index.conn.execute("SELECT reasons FROM quarantine WHERE status = 'open'"):
                reasons.update(json.loads(codes))
            last = index.last_refresh()
            history = index.quarantine_history()
            older = index.served_older()
            if settings.backend == "opensearch":  # the cluster answers the searches: is it there?
                from tasks.index.opensearch import opensearch_index

                search = opensearch_index(settings).health()
        status["index"] = {
            "path": str(settings.index_path),
            "megabytes": round(settings.index_path.stat().st_size / 1e6, 1),
            "sources_current": stats["sources_current"],
            "chunks_current": stats["chunks_current"],
            "embed_model": stats["embed_model"],
            "embed_dims": stats["embed_dims"],
        }
        status["last_refresh"] = last or "none recorded"
        status["quarantine_open"] = {"total": stats["quarantine_open"], "by_reason": dict(reasons.most_common())}
        if older:  # the previous version stays served until the new one is in; a person should know
            status["served_older"] = [
                f"{o['source_id']}: its new version was refused ({', '.join(o['reasons'])}), "
                "the previous one is served (korpus review list)"
                for o in older
            ]
    else:
        status["index"] = f"none at {settings.index_path}: run `korpus refresh --root DIR`"
    status["models"] = {
        "embed": _model(embed_model_path, settings),
        "whisper": _model(whisper_model_path, settings),
        "vlm": settings.vlm_url or "not configured",
        "llm": settings.llm_url or "not configured",
    }
    status["backend"] = settings.backend + (f" ({settings.opensearch_url})" if settings.backend == "opensearch" else "")
    status["prefect"] = prefect_status()
    status["dask"] = dask_status(settings.dask_address)
    degraded = health_reasons(settings, stats, last, search, history, status["dask"], status["prefect"])
    if degraded:
        status["health"] = "degraded"
        status["degraded"] = degraded
    return status

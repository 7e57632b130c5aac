"""`korpus status`: what a person asks first — the last refresh, the open quarantine by reason, the index, the
models in use, and whether the Prefect server and Dask scheduler the settings name answer.

Every probe is bounded (2 s) and read-only: a status check never starts a server, loads a model or writes the index.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from typing import Any
from urllib.parse import urlparse

import httpx

from korpus.model_store import ModelMissingError, embed_model_path, whisper_model_path
from korpus.settings import Settings

PROBE_SECONDS = 2.0


def _model(find: Any, settings: Settings) -> str:
    try:
        return str(find(settings))
    except ModelMissingError as exc:
        return f"missing: {exc}"


def prefect_status() -> str:
    """Whether PREFECT_API_URL answers its health check; unset means a temporary local server per refresh."""
    url = os.environ.get("PREFECT_API_URL")
    if not url:
        from prefect.settings import PREFECT_API_URL

        url = PREFECT_API_URL.value()
    if not url:
        return "not configured: each refresh runs on a temporary local Prefect server (no history kept)"
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


def collect_status(settings: Settings) -> dict[str, Any]:
    """Everything `korpus status` prints, as one dict (the `--json` form)."""
    from tasks.index.sqlite import SqliteIndex

    status: dict[str, Any] = {"data": str(settings.data)}
    if settings.index_path.is_file():
        with SqliteIndex(settings.index_path) as index:
            stats = index.stats()
            reasons: Counter[str] = Counter()
            for (codes,) in index.conn.execute("SELECT reasons FROM quarantine WHERE status = 'open'"):
                reasons.update(json.loads(codes))
            last = index.last_refresh()
        status["index"] = {"path": str(settings.index_path),
                           "megabytes": round(settings.index_path.stat().st_size / 1e6, 1),
                           "sources_current": stats["sources_current"], "chunks_current": stats["chunks_current"],
                           "embed_model": stats["embed_model"], "embed_dims": stats["embed_dims"]}  # fmt: skip
        status["last_refresh"] = last or "none recorded"
        status["quarantine_open"] = {"total": stats["quarantine_open"], "by_reason": dict(reasons.most_common())}
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
    return status

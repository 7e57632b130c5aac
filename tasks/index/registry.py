"""Which search backend answers: the table of backends by `KORPUS_BACKEND`, and `backend_for`, the one function the
CLI, the API, `korpus eval` and anything else that searches call to get it.

An entry names its factory (`module:function`, imported when first used) and whether the backend lives apart from
the embedded index file — a cluster is made once per process that serves (the API keeps it), the embedded search
side is the index's own (`index.searcher`) and follows each connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from korpus.core.settings import Settings
from tasks.index.backend import IndexMismatchError, SearchBackend


@dataclass(frozen=True)
class BackendEntry:
    factory: str
    """`module:function` taking (settings, index) → SearchBackend."""
    outlives_index: bool
    """True: made once and reused (a cluster client); False: the index's own, made per connection."""


BACKENDS = {
    "sqlite": BackendEntry("tasks.index.registry:embedded_search", outlives_index=False),
    "opensearch": BackendEntry("tasks.index.registry:cluster_search", outlives_index=True),
}


def embedded_search(_settings: Settings, index: Any) -> SearchBackend:
    if not index.keeps_search_terms() or not index.keeps_vectors():
        raise IndexMismatchError(
            f"{index.path} holds no search terms or vectors of its own: it was written for KORPUS_BACKEND=opensearch, "
            "whose cluster holds them. Search with KORPUS_BACKEND=opensearch, or run `korpus refresh` with "
            "KORPUS_BACKEND=sqlite, which builds them from the stored text once"
        )
    return index.searcher


def cluster_search(settings: Settings, _index: Any) -> SearchBackend:
    from tasks.index.opensearch import opensearch_index

    return opensearch_index(settings)


def backend_entry(settings: Settings) -> BackendEntry:
    try:
        return BACKENDS[settings.backend]
    except KeyError:
        raise ValueError(f"KORPUS_BACKEND={settings.backend!r} is not one of {sorted(BACKENDS)}") from None


def serves_without_file(settings: Settings) -> bool:
    """Searches need no catalog file: the catalog's serving part on PostgreSQL (KORPUS_CATALOG_URL) and a backend
    that lives apart from the file (the cluster) answer them — a search replica's `korpus serve` and CLI."""
    return bool(settings.catalog_url) and backend_entry(settings).outlives_index


def keep_search_terms(settings: Settings, index: Any) -> int:
    """The writer's file holds the embedded search's terms only when the embedded search answers: none when a
    cluster does (it holds them), built again from the stored text when the embedded backend comes back; the
    chunks whose terms were built."""
    return index.keep_search_terms(not backend_entry(settings).outlives_index)


def keep_vectors(
    settings: Settings, index: Any, embedder: Callable[[], Any], progress: Callable[[int], None] | None = None
) -> int:
    """The writer's file keeps every chunk's vector only when the embedded search answers: with a cluster, each
    only until the cluster holds it; embedded again from the stored text when the embedded backend comes back, by
    `embedder()` (the configured model, which must be the catalog's; `progress`: the chunks embedded so far); the
    chunks embedded."""
    return index.keep_vectors(not backend_entry(settings).outlives_index, embedder=embedder, progress=progress)


def backend_for(settings: Settings, index: Any) -> SearchBackend:
    """Who answers searches: the embedded index, or (KORPUS_BACKEND=opensearch) the cluster mirroring it."""
    module, _, name = backend_entry(settings).factory.partition(":")
    return getattr(import_module(module), name)(settings, index)

"""Who may ask what, decided on the server for every route: an API key (header `X-API-Key`, `Authorization:
Bearer …`, or the viewer's login cookie) maps to the scopes `KORPUS_API_KEYS` grants it; a request may narrow them
with `scopes=` but never widen them (403); with no keys configured the API is anonymous and sees
`KORPUS_DEFAULT_SCOPES` only. Also the index a request reads and the retriever that answers it (`backend_for`,
tasks/index/registry.py, as everywhere)."""

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Query, Request

from korpus.apps.sessions import Sessions
from korpus.core.settings import Settings, parse_scopes
from tasks.index.registry import backend_entry, backend_for, serves_without_file
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import Retriever

KEY_COOKIE = "korpus_key"
"""The cookie /view/login sets (HttpOnly, SameSite=Strict, Secure behind https) so a browser can follow viewer
links: a session id (korpus/apps/sessions.py), never the key; it grants exactly the scopes of the key it was opened
with, until it expires."""


@dataclass(frozen=True)
class Served:
    """The dependencies every router declares its parameters with (`Annotated` types for FastAPI)."""

    settings: Settings
    Scopes: Any
    Index: Any
    SearchIndex: Any
    """The index file for the search routes: None when serving is stateless (`stateless`)."""
    Reader: Any
    reader: Any
    """The function behind `Reader`, for a route that opens its own index (/health)."""
    sessions: Sessions
    """The browser logins of this server (the viewer's and the review page's)."""
    stateless: bool
    """KORPUS_CATALOG_URL with a cluster backend: searches and /health read no file of this machine's."""


def served(settings: Settings) -> Served:
    """The dependencies over one data directory's settings; a cluster backend, once made, is kept for the process."""
    sessions = Sessions(settings.session_hours)

    def granted(request: Request) -> list[str]:
        if not settings.api_keys:
            return list(settings.default_scopes)
        granted_scopes = settings.api_scopes(sessions.presented(request, KEY_COOKIE))
        if granted_scopes is None:
            raise HTTPException(status_code=401, detail="a valid API key is required (X-API-Key)")
        return granted_scopes

    def scopes(
        allowed: Annotated[list[str], Depends(granted)],
        requested: Annotated[str | None, Query(alias="scopes", description="Narrow to these, comma-separated")] = None,
    ) -> list[str]:
        if requested is None:
            return allowed
        wanted = parse_scopes(requested)
        extra = sorted(set(wanted) - set(allowed))
        if extra:
            raise HTTPException(status_code=403, detail=f"scopes not granted to this caller: {', '.join(extra)}")
        return wanted

    # Stateless serving: the catalog's serving part on PostgreSQL and the chunks in the cluster — /search, /exact,
    # /count, the search page, the viewer and /health read no file of this machine's (tasks/index/pg_catalog.py).
    stateless = serves_without_file(settings)

    def index() -> Any:
        if not settings.index_path.is_file():
            if stateless:  # a search replica: what needs the file says so
                raise HTTPException(
                    status_code=503,
                    detail=f"this server answers searches without a catalog file (KORPUS_CATALOG_URL); this page "
                    f"needs the catalog file, which is not at {settings.index_path}",
                )
            raise HTTPException(status_code=503, detail="no index yet: run `korpus refresh`")
        with SqliteIndex(settings.index_path) as idx:
            yield idx

    def search_index() -> Any:
        """The index file the search routes read, or None when serving is stateless."""
        if stateless:
            yield None
            return
        yield from index()

    kept: list[Any] = []  # a backend that outlives the index connection (a cluster client), made on first use

    def reader(idx: Annotated[SqliteIndex | None, Depends(search_index)]) -> Retriever:
        """Who answers /search, /exact and /count: `backend_for` (tasks/index/registry.py), as everywhere — the
        embedded index, or the cluster mirroring it; the same routing, fusion, pins and rerank either way."""
        if kept:
            return Retriever.from_settings(kept[0], settings)
        backend = backend_for(settings, idx)
        if backend_entry(settings).outlives_index:
            kept.append(backend)
        return Retriever.from_settings(backend, settings)

    return Served(
        settings,
        Annotated[list[str], Depends(scopes)],
        Annotated[SqliteIndex, Depends(index)],
        Annotated[SqliteIndex | None, Depends(search_index)],
        Annotated[Retriever, Depends(reader)],
        reader,
        sessions,
        stateless,
    )

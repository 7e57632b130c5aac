"""/health: `ok`, or `degraded` with every reason and HTTP 503 (korpus/apps/status.py `health_reasons`)."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from korpus.apps.api.access import Served
from tasks.index.pg_catalog import CatalogUnavailable
from tasks.index.sqlite import SqliteIndex


def health_router(served: Served) -> APIRouter:
    settings, reader, served_deps = served.settings, served.reader, served
    app = APIRouter()

    @app.get("/health", summary="Liveness and the state of the index")
    def health() -> JSONResponse:
        """`ok`, or `degraded` with every reason (korpus/apps/status.py health_reasons) and HTTP 503."""
        from korpus.apps.status import health_reasons

        if served_deps.stateless:  # the catalog's figures from PostgreSQL, the search side's from the cluster
            backend = reader(None).backend
            served = backend.health()
            try:
                stats, last, history = backend.catalog.health_figures()
            except CatalogUnavailable as exc:
                stats, last, history = {}, None, []
                served = served | {"status": "unreachable", "error": str(exc)}
            reasons = health_reasons(settings, stats, last, served, history)
            where = {"catalog": "postgresql"}
        else:
            if not settings.index_path.is_file():
                return JSONResponse({"status": "empty", "index": str(settings.index_path)})
            with SqliteIndex(settings.index_path) as idx:
                served = reader(idx).backend.health()  # the backend that answers /search: the cluster, when set
                stats = idx.stats()
                reasons = health_reasons(settings, stats, idx.last_refresh(), served, idx.quarantine_history())
            where = {"index": str(settings.index_path)}
        body = {
            "status": "degraded" if reasons else "ok",
            "reasons": reasons,
            **where,
            "backend": settings.backend,
            "search": served,
        } | stats
        return JSONResponse(body, status_code=503 if reasons else 200)

    return app

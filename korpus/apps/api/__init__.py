"""HTTP API (`korpus serve`): search, exact search, mention counts, sources, health, and tool definitions.

Access is decided here, on the server: an API key (header `X-API-Key` or `Authorization: Bearer …`) maps to the
scopes configured for it in `KORPUS_API_KEYS`; a request may narrow its scopes with `scopes=` but never widen
them (403). With no keys configured the API is anonymous and sees `KORPUS_DEFAULT_SCOPES` only.

One router a concern, each a small module: `search` (/search, /exact, /count), `sources` (/sources, /meta),
`health`, `tools`; `access` holds what they all declare (scopes, the index, the retriever); the review workbench
is korpus/apps/review_web.py, the hit viewer korpus/apps/viewer.py, the search page at / korpus/apps/search_page.py.
"""

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from korpus.apps.api.access import served
from korpus.apps.api.health import health_router
from korpus.apps.api.search import search_router
from korpus.apps.api.sources import sources_router
from korpus.apps.api.tools import TOOLS, tools_router
from korpus.apps.review_web import SESSION_COOKIES, install_review
from korpus.apps.search_page import search_page_router
from korpus.apps.sessions import end_everywhere, same_origin
from korpus.apps.viewer import viewer_router
from korpus.core.model_store import set_offline_switches
from korpus.core.settings import Settings
from tasks.index.backend import IndexMismatchError

__all__ = ["TOOLS", "create_app"]


def create_app(settings: Settings) -> FastAPI:
    """The API over one data directory. Opens a SQLite connection per request (apsw connections are cheap)."""
    set_offline_switches()
    app = FastAPI(title="korpus", version="0.1.0", description=__doc__)

    @app.exception_handler(IndexMismatchError)
    def model_mismatch(_request: Request, exc: IndexMismatchError) -> JSONResponse:
        # The server's configured embedding model is not the one the index was built with: say so, plainly.
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    from opensearchpy.exceptions import ConnectionError as ClusterUnreachable
    from opensearchpy.exceptions import TransportError

    from tasks.index.pg_catalog import CatalogUnavailable
    from tasks.runtime.retry import TransientError

    @app.exception_handler(CatalogUnavailable)
    @app.exception_handler(ClusterUnreachable)
    @app.exception_handler(TransportError)
    @app.exception_handler(TransientError)
    def cluster_cannot_answer(request: Request, exc: Exception) -> Response:
        """The search cluster cannot answer (no node reachable, or each answered 5xx): a 503 that says so, never a
        bare 500; an error of korpus's own request (a 4xx) stays a 500 — that is a bug to see."""
        status = getattr(exc, "status_code", None)
        refused = str(status) in ("401", "403")  # the cluster refuses korpus's credentials: the operator's to fix
        if isinstance(exc, TransportError) and not isinstance(exc, ClusterUnreachable) and str(status).isdigit():
            if int(status) < 500 and not refused:
                raise exc
        what = "the catalog" if isinstance(exc, CatalogUnavailable) else "the search cluster"
        detail = f"{what} cannot answer now ({type(exc).__name__}); try again shortly"
        if refused:
            detail = "the search cluster refused korpus's credentials (KORPUS_OPENSEARCH_USER / _PASSWORD)"
        if request.url.path == "/" and "text/html" in request.headers.get("accept", "text/html"):
            page = (
                f"<!doctype html><meta charset=utf-8><title>korpus</title><p>Поиск временно недоступен: {detail}.</p>"
            )
            return HTMLResponse(page, status_code=503, headers={"Retry-After": "5"})
        return JSONResponse(status_code=503, content={"detail": detail}, headers={"Retry-After": "5"})

    @app.middleware("http")
    async def refuse_other_origins(request: Request, call_next):  # type: ignore[no-untyped-def]
        # every form and JSON write is checked by its Origin: a page of another site (a sibling subdomain too) is
        # refused before any handler runs (korpus/apps/sessions.py says why Origin and not a token)
        if not same_origin(request.method, request.headers):
            return JSONResponse(status_code=403, content={"detail": "a request from another site's page is refused"})
        return await call_next(request)

    deps = served(settings)

    @app.post("/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        """End the browser's sessions on this server (the viewer's and search page's, the review page's)."""
        response = RedirectResponse("/view/login", status_code=303)
        end_everywhere(deps.sessions, request.cookies, response, SESSION_COOKIES)
        return response

    app.include_router(search_router(deps))
    app.include_router(sources_router(deps))
    app.include_router(health_router(deps))
    app.include_router(viewer_router(deps))  # /view: a hit on its page (korpus/apps/viewer.py)
    app.include_router(search_page_router(deps))  # /: the search page for people (korpus/apps/search_page.py)
    install_review(app, settings, deps.sessions)  # /review: the quarantine workbench (korpus/apps/review_web.py)
    app.include_router(tools_router())
    return app

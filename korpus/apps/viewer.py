"""`/view` in `korpus serve`: a hit shown where it is — the page rendered from the file as stored with the chunk's
regions highlighted and its neighbours one key away, or a recording playing from the hit's second beside its
transcript.

    /view/{source}?chunk=ID          the chunk's page (or recording), the chunk highlighted
    /view/{source}?page=N            a page with nothing highlighted
    /view/{source}?page=N&png=1      the page image itself; ?audio=1 the recording

On a stateless replica (KORPUS_CATALOG_URL with the cluster) the source's row comes from PostgreSQL and its chunks
from the cluster, each checked there; the page images from the file or its searchable copy, as anywhere.

The same access rule as /search, on every route: the caller's scopes (API key as `X-API-Key`, `Authorization:
Bearer …`, or the HttpOnly cookie /view/login sets for a browser) must include the source's access, else 404 — a
caller cannot tell a source it may not see from one that does not exist. Server-rendered HTML with review.css and
an inline script; nothing is loaded from outside.
"""

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from korpus.apps.api.access import KEY_COOKIE, Served
from korpus.apps.review_web import templates
from korpus.core.datamodel import META_PREFIX, Source, SourceKind, timecode
from tasks.readers.page_view import page_png

_templates = templates()  # the workbench's templates folder: one look, one region overlay (regions.html)


def view_link(hit: dict[str, Any]) -> str | None:
    """Where the viewer shows a hit: its source and chunk (None for a meta-document, which has no file)."""
    if hit["source_id"].startswith(META_PREFIX) or (hit.get("page") is None and hit.get("t_start") is None):
        return None
    return f"/view/{quote(hit['source_id'], safe='/')}?chunk={hit['chunk_id']}"


def _from_the_cluster(backend: Any, source_id: str, scopes: list[str]) -> tuple[dict | None, list[dict[str, Any]]]:
    """(the source's current version the scopes may see, its chunks in order), read without the catalog file."""
    found = backend.catalog.visible_source(source_id, scopes)
    if found is None:
        return None, []
    return found, backend.source_chunks(source_id, found["version"], scopes)


def viewer_router(deps: Served) -> APIRouter:
    settings, SearchIndex, Scopes = deps.settings, deps.SearchIndex, deps.Scopes
    router = APIRouter(include_in_schema=False)

    @router.get("/view/login")
    def login_form(next: str = "/view/login") -> HTMLResponse:
        return HTMLResponse(_templates.get_template("view_login.html").render(next=next, failed=False))

    @router.post("/view/login")
    def login(request: Request, key: Annotated[str, Form()], next: Annotated[str, Form()] = "/") -> Response:
        if settings.api_scopes(key) is None:
            page = _templates.get_template("view_login.html").render(next=next, failed=True)
            return HTMLResponse(page, status_code=401)
        # never a redirect off this server: the viewer's pages or the search page, nothing else
        target = next if next.startswith("/view/") or next == "/" or next.startswith("/?") else "/view/login"
        response = RedirectResponse(target, status_code=303)
        deps.sessions.set_cookie(response, request, KEY_COOKIE, key)  # a session id, never the key
        return response

    @router.get("/view/{source_id:path}")
    def view(
        request: Request,
        source_id: str,
        idx: SearchIndex,
        allowed: Scopes,
        chunk: str | None = None,
        page: Annotated[int | None, Query(ge=1)] = None,
        png: bool = False,
        audio: bool = False,
    ) -> Response:
        if idx is None:  # a stateless replica: the source's row from PostgreSQL, its chunks from the cluster
            found, chunks = _from_the_cluster(deps.reader(None).backend, source_id, allowed)
            cited = next((dict(c, source_id=source_id) for c in chunks if c["chunk_id"] == chunk), None)
        else:
            found = idx.searcher.visible_source(source_id, allowed)
            cited = idx.searcher.cited(chunk, allowed) if chunk else None
            chunks = None
        if found is None or (chunk and (cited is None or cited["source_id"] != source_id)):
            raise HTTPException(status_code=404, detail="no such source or chunk for these scopes")
        source = Source(
            source_id=source_id,
            version=found["version"],
            path=found["path"],
            kind=found["kind"],
            size=found["size"] or 0,
        )
        if audio:
            if found["kind"] != SourceKind.audio.value or not Path(found["path"]).is_file():
                raise HTTPException(status_code=404, detail="no recording")
            return FileResponse(found["path"])
        number = page or (cited["page"] if cited else None) or 1
        if png:
            try:
                image, _size = page_png(source, number, settings)
            except (OSError, ValueError, IndexError) as exc:
                raise HTTPException(status_code=404, detail=f"no page {number}: {exc}") from exc
            return Response(image, media_type="image/png")
        if chunks is None:
            chunks = idx.source_chunks(source_id)
        html = _templates.get_template("view.html").render(
            source=found,
            chunk=cited,
            page=number,
            chunks=chunks,
            timecode=timecode,
            link=lambda **q: f"/view/{quote(source_id, safe='/')}?" + "&".join(f"{k}={v}" for k, v in q.items()),
            pages=max([c["page"] or 0 for c in chunks] + [number]),
            recording=found["kind"] == SourceKind.audio.value,
            paged=SourceKind(found["kind"]).paged,
        )
        return HTMLResponse(html)

    return router

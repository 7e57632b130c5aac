"""/sources/{id} and /meta/{kind}: one source's current version, and the documents about the collection, per
scope — a source the caller may not see is a 404, whether or not it exists."""

from typing import Any

from fastapi import APIRouter, HTTPException

from korpus.apps.api.access import Served
from korpus.core.datamodel import scope_of


def sources_router(served: Served) -> APIRouter:
    SearchIndex, Scopes = served.SearchIndex, served.Scopes
    app = APIRouter()

    @app.get("/sources/{source_id:path}", summary="One source's current version")
    def source(source_id: str, idx: SearchIndex, allowed: Scopes) -> dict:
        if idx is None:  # a stateless replica: the version's row and its served chunks from PostgreSQL
            summary = served.reader(None).backend.catalog.source_summary(source_id, allowed)
            if summary is None:
                raise HTTPException(status_code=404, detail="no such source visible to this caller")
            return summary
        found = idx.current_source(source_id)
        if found is None or scope_of(found[0].access, found[0].tenant) not in allowed:
            raise HTTPException(status_code=404, detail="no such source visible to this caller")
        src, pages = found
        return {
            "source_id": src.source_id,
            "version": src.version,
            "kind": src.kind,
            "owner": src.owner,
            "access": src.access,
            "pages": len(pages),
            "chunks": len(idx.source_chunks(source_id)),
        }

    @app.get("/meta/{kind}", summary="A meta-document: toc, chronology, persons or organisations, per scope")
    def meta(kind: str, idx: SearchIndex, allowed: Scopes) -> list[dict[str, Any]]:
        from tasks.meta.publish import of_kind, read_meta

        try:
            if idx is None:  # a stateless replica: the meta-documents' rows and parts from PostgreSQL
                return of_kind(served.reader(None).backend.catalog.meta_documents(allowed), kind)
            return read_meta(idx, kind, allowed)
        except ValueError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    return app

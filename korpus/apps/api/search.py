"""/search, /exact and /count: the three tools an LLM front end calls, within the caller's scopes."""

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from korpus.apps.api.access import Served
from korpus.apps.viewer import view_link
from korpus.core.model_store import embed_model_path
from tasks.index.backend import SEARCH_MODES
from tasks.retrieval.embedding import shared_query_batcher
from tasks.retrieval.query import search_message


def search_router(served: Served) -> APIRouter:
    settings, SearchIndex, Reader, Scopes = served.settings, served.SearchIndex, served.Reader, served.Scopes
    app = APIRouter()

    @app.get("/search", summary="Hybrid search")
    def search(
        q: str,
        idx: SearchIndex,
        read: Reader,
        allowed: Scopes,
        k: Annotated[int, Query(ge=1, le=50)] = 8,
        mode: str = "hybrid",
    ) -> list[dict[str, Any]]:
        if mode not in SEARCH_MODES:
            raise HTTPException(status_code=422, detail=f"mode is one of {', '.join(SEARCH_MODES)}")
        if mode == "hybrid+rerank" and settings.rerank_model is None:
            raise HTTPException(status_code=422, detail="hybrid+rerank needs KORPUS_RERANK_MODEL")
        embed = None
        if mode not in ("bm25", "bm25-nostem"):
            batcher = shared_query_batcher(str(embed_model_path(settings)))
            if idx is not None:  # stateless: the cluster checks the query vector against its mapping
                idx.bind_embedding(batcher.embedder.name, batcher.embedder.dims)

            def embed(parts: list[str]) -> list[Any]:
                # concurrent requests share a forward pass on a sentence-transformers folder; an ONNX one runs each
                # text alone (tasks/retrieval/embedding.py)
                return [batcher.embed_query(part) for part in parts]

        def one(part: str, vector: Any) -> list[dict[str, Any]]:
            return read.search(part, vector, allowed, k=k, mode=mode)

        # greetings, links, invisible characters and quoted replies do not steer ranking; each question of a
        # message is searched on its own and the hits interleaved
        hits = search_message(q, one, embed, k)
        for hit in hits:
            hit["view"] = view_link(hit)  # the hit on its page, or its recording from its second (/view)
        return hits

    @app.get("/exact", summary="search_exact: every occurrence of a phrase")
    def exact(text: str, read: Reader, allowed: Scopes, limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict:
        return read.exact_occurrences(text, allowed, limit=limit)

    @app.get("/count", summary="count_mentions: occurrences per source")
    def count(text: str, read: Reader, allowed: Scopes) -> dict:
        return read.count_mentions(text, allowed)

    return app

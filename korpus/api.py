"""HTTP API (`korpus serve`): search, exact search, mention counts, sources, health, and tool definitions.

Access is decided here, on the server: an API key (header `X-API-Key` or `Authorization: Bearer …`) maps to the
scopes configured for it in `KORPUS_API_KEYS`; a request may narrow its scopes with `scopes=` but never widen
them (403). With no keys configured the API is anonymous and sees `KORPUS_DEFAULT_SCOPES` only.
"""

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from korpus.model_store import embed_model_path, set_offline_switches
from korpus.review_web import install_review
from korpus.settings import Settings, parse_scopes
from tasks.embedding import shared_query_batcher
from tasks.index.backend import SEARCH_MODES, IndexMismatchError
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.query import search_message
from tasks.retrieval.retriever import Retriever, backend_for

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Hybrid search (BM25 with Russian morphology + semantic) over the archive. Every hit "
            "starts with its citation, e.g. [том_2.pdf · лист 147] or [допрос_03.mp3 · 00:12:34].",
            "parameters": {
                "type": "object",
                "properties": {
                    "q": {"type": "string", "description": "The question or keywords, in Russian."},
                    "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8},
                },
                "required": ["q"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_exact",
            "description": "Every occurrence of an exact phrase (a name, number, quotation): file, page or "
            "timecode, the line, surrounding context and the total count.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The exact phrase."}},
                "required": ["text"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "count_mentions",
            "description": "How many times an exact phrase occurs, per source file.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The exact phrase."}},
                "required": ["text"],
            },
        },
    },
]


def create_app(settings: Settings) -> FastAPI:
    """The API over one data directory. Opens a SQLite connection per request (apsw connections are cheap)."""
    set_offline_switches()
    app = FastAPI(title="korpus", version="0.1.0", description=__doc__)

    @app.exception_handler(IndexMismatchError)
    def model_mismatch(_request: Request, exc: IndexMismatchError) -> JSONResponse:
        # The server's configured embedding model is not the one the index was built with: say so, plainly.
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    def granted(
        x_api_key: Annotated[str | None, Header()] = None,
        authorization: Annotated[str | None, Header()] = None,
    ) -> list[str]:
        if not settings.api_keys:
            return list(settings.default_scopes)
        key = x_api_key or (authorization.removeprefix("Bearer ").strip() if authorization else None)
        if not key or key not in settings.api_keys:
            raise HTTPException(status_code=401, detail="a valid API key is required (X-API-Key)")
        return list(settings.api_keys[key])

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

    def index() -> Any:
        if not settings.index_path.is_file():
            raise HTTPException(status_code=503, detail="no index yet: run `korpus refresh`")
        with SqliteIndex(settings.index_path) as idx:
            yield idx

    cluster: list[Any] = []  # the OpenSearch backend, made on first use when KORPUS_BACKEND=opensearch

    def reader(idx: Annotated[SqliteIndex, Depends(index)]) -> Retriever:
        """Who answers /search, /exact and /count: the retriever over the embedded index, or over the cluster
        mirroring it; the same routing, fusion, pins and rerank either way."""
        if settings.backend != "opensearch":
            return Retriever.from_settings(idx.searcher, settings)
        if not cluster:
            cluster.append(backend_for(settings, idx))
        return Retriever.from_settings(cluster[0], settings)

    Scopes = Annotated[list[str], Depends(scopes)]
    Index = Annotated[SqliteIndex, Depends(index)]
    Reader = Annotated[Retriever, Depends(reader)]

    @app.get("/search", summary="Hybrid search")
    def search(
        q: str,
        idx: Index,
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
            idx.bind_embedding(batcher.embedder.name, batcher.embedder.dims)

            def embed(parts: list[str]) -> list[Any]:
                # concurrent requests share a forward pass on a sentence-transformers folder; an ONNX one runs each
                # text alone (tasks/embedding.py)
                return [batcher.embed_query(part) for part in parts]

        def one(part: str, vector: Any) -> list[dict[str, Any]]:
            return read.search(part, vector, allowed, k=k, mode=mode)

        # greetings, links, invisible characters and quoted replies do not steer ranking; each question of a
        # message is searched on its own and the hits interleaved
        return search_message(q, one, embed, k)

    @app.get("/exact", summary="search_exact: every occurrence of a phrase")
    def exact(text: str, read: Reader, allowed: Scopes, limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict:
        return read.exact_occurrences(text, allowed, limit=limit)

    @app.get("/count", summary="count_mentions: occurrences per source")
    def count(text: str, read: Reader, allowed: Scopes) -> dict:
        return read.count_mentions(text, allowed)

    @app.get("/sources/{source_id:path}", summary="One source's current version")
    def source(source_id: str, idx: Index, allowed: Scopes) -> dict:
        found = idx.current_source(source_id)
        if found is None or found[0].access not in allowed:
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
    def meta(kind: str, idx: Index, allowed: Scopes) -> list[dict[str, Any]]:
        from tasks.meta.publish import read_meta

        try:
            return read_meta(idx, kind, allowed)
        except ValueError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    @app.get("/health", summary="Liveness and the state of the index")
    def health() -> JSONResponse:
        """`ok`, or `degraded` with every reason (korpus/status.py health_reasons) and HTTP 503."""
        from korpus.status import health_reasons

        if not settings.index_path.is_file():
            return JSONResponse({"status": "empty", "index": str(settings.index_path)})
        with SqliteIndex(settings.index_path) as idx:
            served = reader(idx).backend.health()  # the backend that answers /search: the cluster, when configured
            stats = idx.stats()
            reasons = health_reasons(settings, stats, idx.last_refresh(), served, idx.quarantine_history())
        body = {"status": "degraded" if reasons else "ok", "reasons": reasons, "index": str(settings.index_path),
                "backend": settings.backend, "search": served} | stats  # fmt: skip
        return JSONResponse(body, status_code=503 if reasons else 200)

    install_review(app, settings)  # /review: the quarantine workbench (korpus/review_web.py)

    @app.get("/tools", summary="OpenAI-style function definitions for search, search_exact, count_mentions")
    def tools() -> list[dict]:
        return TOOLS

    return app

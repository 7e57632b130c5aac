"""/tools: OpenAI-style function definitions for `search`, `search_exact` and `count_mentions`."""

from fastapi import APIRouter

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


def tools_router() -> APIRouter:
    app = APIRouter()

    @app.get("/tools", summary="OpenAI-style function definitions for search, search_exact, count_mentions")
    def tools() -> list[dict]:
        return TOOLS

    return app

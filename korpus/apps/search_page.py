"""`/` in `korpus serve`: a search page for the people who own the archive (#51).

    /?q=…                       the question, ranked by the retriever `/search` serves (hybrid, the caller's scopes)
    /?q=…&mode=exact            every occurrence of the phrase, with counts per file (`/exact`)
    &folder=…&kind=…&scope=…    filters; &since=YYYY-MM-DD&until=… the file's date; &page=N

The same access as /view, decided on the server: the session cookie /view/login sets (never the key in the page or
the address), or a key header; with no keys configured the default scopes. `scope=` narrows to one of the caller's
own scopes and never widens them. The folder, kind and date filters and their counts apply to the top
`CANDIDATES` hits of the question (what the retriever returns within the scopes), not to the whole collection.
Server-rendered HTML (Jinja's autoescape: no query string reaches the page unescaped); an inline script adds `/`,
`j`/`k` and Enter — the page reads the same without it.
"""

import contextlib
import math
import re
from datetime import date
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup, escape

from korpus.apps.api.access import KEY_COOKIE, Served
from korpus.apps.review_web import templates
from korpus.apps.viewer import view_link
from korpus.core.datamodel import CHILD_SEPARATOR, META_PREFIX
from korpus.core.model_store import embed_model_path
from tasks.index.sqlite import SqliteIndex
from tasks.receive import source_kind
from tasks.retrieval.collection import is_collection_question
from tasks.retrieval.embedding import shared_query_batcher
from tasks.retrieval.query import search_message

PER_PAGE = 10
CANDIDATES = 50
MAX_QUERY = 1000
KIND_NAMES = {
    "pdf": "PDF",
    "image": "скан / фото",
    "djvu": "DjVu",
    "text": "текст",
    "office": "офисный документ",
    "markup": "веб-страница / книга",
    "sheet": "таблица",
    "mail": "письмо",
    "archive": "архив",
    "audio": "запись",
    "meta": "о коллекции",
    "другое": "другое",
}
_WORD = re.compile(r"\w+", re.UNICODE)
_templates = templates()


def search_page_router(deps: Served) -> APIRouter:
    settings = deps.settings
    router = APIRouter(include_in_schema=False)

    def caller_scopes(request: Request) -> list[str] | None:
        """The caller's scopes, or None when they must log in."""
        if not settings.api_keys:
            return list(settings.default_scopes)
        return settings.api_scopes(deps.sessions.presented(request, KEY_COOKIE))

    @router.get("/")
    def page(
        request: Request,
        allowed: Annotated[list[str] | None, Depends(caller_scopes)],
        q: str = "",
        mode: str = "ask",
        folder: str = "",
        kind: str = "",
        scope: str = "",
        since: str = "",
        until: str = "",
        page: str = "1",
    ) -> Response:
        if allowed is None:
            target = "/" + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/view/login?{urlencode({'next': target})}", status_code=303)
        spaced = " ".join(q.split())  # control characters and runs of spaces are one space
        query = spaced[:MAX_QUERY]
        state = {
            "q": query,
            "mode": "exact" if mode == "exact" else "ask",
            "folder": folder,
            "kind": kind,
            "scope": scope,
            "since": since,
            "until": until,
        }
        truncated = len(spaced) > MAX_QUERY
        context: dict[str, Any] = {
            "state": state,
            "allowed": allowed,
            "truncated": truncated,
            "kind_names": KIND_NAMES,
            "results": None,
            "message": None,
        }
        if query:
            scopes = allowed if not scope else [scope] if scope in allowed else []
            if scope and not scopes:
                context["message"] = f"Область «{scope}» вам не доступна: искали в ваших областях не будем."
            else:
                # stateless serving (KORPUS_CATALOG_URL) opens no file: the hits come without the file dates
                with contextlib.nullcontext(None) if deps.stateless else SqliteIndex(settings.index_path) as idx:
                    found = (
                        _exact(deps, idx, query, scopes) if state["mode"] == "exact" else _ask(deps, idx, query, scopes)
                    )
                    if idx is not None:
                        _dates(idx, found)
                context["results"] = _filtered(found, state, _page_number(page))
        context["link"] = lambda **change: "/?" + urlencode({k: v for k, v in {**state, **change}.items() if v})
        return HTMLResponse(_templates.get_template("search.html").render(**context))

    return router


def _page_number(text: str) -> int:
    return int(text) if text.isdigit() and 0 < int(text) < 10_000 else 1


def _ask(deps: Served, idx: SqliteIndex | None, query: str, scopes: list[str]) -> list[dict[str, Any]]:
    """The question's top hits as `/search` ranks them; identifier pins and meta-document parts marked."""
    reader = deps.reader(idx)
    batcher = shared_query_batcher(str(embed_model_path(deps.settings)))
    if idx is not None:
        idx.bind_embedding(batcher.embedder.name, batcher.embedder.dims)
    pinned: set[str] = set()

    def one(part: str, vector: Any) -> list[dict[str, Any]]:
        decided: dict[str, Any] = {}
        hits = reader.search(part, vector, scopes, k=CANDIDATES, mode="hybrid", explain=decided)
        pinned.update(h["chunk_id"] for h in hits[: decided.get("identifier_pins", 0)])
        return hits

    hits = search_message(query, one, lambda parts: [batcher.embed_query(p) for p in parts], CANDIDATES)
    if is_collection_question(query):  # the collection's own documents answer it: above the rest
        hits = sorted(hits, key=lambda h: not h["source_id"].startswith(META_PREFIX))
    else:  # the retriever lists meta parts after every document hit; a person asked about documents
        hits = [h for h in hits if not h["source_id"].startswith(META_PREFIX)]
    phrase = " ".join(query.lower().split())
    out = []
    for hit in hits:
        text = hit["text"]
        out.append(
            {
                "source_id": hit["source_id"],
                "page": hit.get("page"),
                "t_start": hit.get("t_start"),
                "access": hit["access"],
                "view": view_link(hit),
                "identifier": hit["chunk_id"] in pinned,
                "exact": len(phrase) > 2 and phrase in " ".join(text.lower().split()),
                "snippet": snippet(text, query),
            }
        )
    return out


def _exact(deps: Served, idx: SqliteIndex | None, query: str, scopes: list[str]) -> list[dict[str, Any]]:
    """Every occurrence of the phrase (`/exact`), one row each, with its file's count."""
    found = deps.reader(idx).exact_occurrences(query, scopes, limit=500)
    return [
        {
            "source_id": o["source_id"],
            "page": o["page"],
            "t_start": None,
            "access": None,
            "identifier": False,
            "view": f"/view/{quote(o['source_id'], safe='/')}?chunk={o['chunk_id']}",
            "exact": True,
            "count": found["by_source"].get(o["source_id"]),
            "timecode": o["timecode"],
            "snippet": snippet(o["context"], query, phrase=True),
        }
        for o in found["occurrences"]
    ]


def _dates(idx: SqliteIndex, hits: list[dict[str, Any]]) -> None:
    """Each hit's file date (the catalog's `file_dates`), None where the catalog knows none."""
    dates = idx.file_dates(h["source_id"] for h in hits)
    for hit in hits:
        hit["date"] = dates.get(hit["source_id"])


def facets(hit: dict[str, Any]) -> dict[str, str]:
    """The folder (the first part of its path) and the kind a hit is filtered and counted by."""
    source_id = hit["source_id"]
    if source_id.startswith(META_PREFIX):
        return {"folder": "о коллекции", "kind": "meta"}
    file = source_id.split(CHILD_SEPARATOR)[0]
    found = source_kind(Path(file))
    return {"folder": file.split("/")[0] if "/" in file else "(корень)", "kind": found.value if found else "другое"}


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _filtered(hits: list[dict[str, Any]], state: dict[str, str], number: int) -> dict[str, Any]:
    """The hits the filters keep, this page of them, and per filter value how many the other filters keep."""
    since, until = _day(state["since"]), _day(state["until"])
    for hit in hits:
        hit.update(facets(hit))

    def keeps(hit: dict[str, Any], skip: str = "") -> bool:
        return (
            (skip == "folder" or not state["folder"] or hit["folder"] == state["folder"])
            and (skip == "kind" or not state["kind"] or hit["kind"] == state["kind"])
            and (since is None or (hit["date"] is not None and hit["date"] >= since))
            and (until is None or (hit["date"] is not None and hit["date"] <= until))
        )

    counts = {name: {} for name in ("folder", "kind")}
    for name, values in counts.items():
        for hit in hits:
            if keeps(hit, skip=name):
                values[hit[name]] = values.get(hit[name], 0) + 1
    kept = [h for h in hits if keeps(h)]
    pages = max(1, math.ceil(len(kept) / PER_PAGE))
    number = min(number, pages)
    return {
        "hits": kept[(number - 1) * PER_PAGE : number * PER_PAGE],
        "total": len(kept),
        "page": number,
        "pages": pages,
        "first": (number - 1) * PER_PAGE + 1,
        "counts": counts,
        "bad_dates": bool((state["since"] and since is None) or (state["until"] and until is None)),
    }


def snippet(text: str, query: str, width: int = 360, phrase: bool = False) -> Markup:
    """Up to `width` characters of `text` around the first word of the query it holds, escaped, with the query's
    words (their first letters, so «договора» lights for «договор») or the whole phrase in <mark>."""
    body = text.split("\n", 1)[1] if text.startswith("[") and "\n" in text else text  # the address line is the title
    body = " ".join(body.split())
    if phrase:
        pattern = re.compile(r"\s+".join(re.escape(p) for p in query.split()), re.IGNORECASE) if query.split() else None
    else:
        stems = sorted(
            {w.lower()[: max(3, len(w) - 2)] for w in _WORD.findall(query) if len(w) >= 3}, key=len, reverse=True
        )
        alternatives = "|".join(re.escape(s) for s in stems)
        pattern = re.compile(r"\b(?:" + alternatives + r")\w*", re.IGNORECASE) if stems else None
    first = pattern.search(body) if pattern else None
    start = max(0, first.start() - width // 3) if first else 0
    part = body[start : start + width]
    out, at = [], 0
    for match in pattern.finditer(part) if pattern else []:
        out += [escape(part[at : match.start()]), Markup("<mark>"), escape(match.group(0)), Markup("</mark>")]
        at = match.end()
    out.append(escape(part[at:]))
    before, after = Markup("…" if start else ""), Markup("…" if start + width < len(body) else "")
    return Markup("").join([before, *out, after])

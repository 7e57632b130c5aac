"""`/review` in `korpus serve`: the web page where reviewers clear the quarantine.

Server-rendered HTML (Jinja2 templates and one small script in korpus/apps/review_assets; nothing is loaded from
outside) over the same code as `korpus review`: every action is `tasks.review.actions.apply_decision`, recorded in the
audit trail, and the index changes at once. Reviewer keys (`KORPUS_REVIEW_KEYS`) are separate from search keys:
a search key gets 403 here. The key is accepted as `X-API-Key`, `Authorization: Bearer …` or the session cookie the
login form sets (a random session id, never the key: korpus/apps/sessions.py), so scripts can use every page, and
`/review/api/…` speaks JSON. A reviewer sees an item — its row, text, page image or recording — only when their key
grants the item's access scope.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Depends, FastAPI, Form, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel, Field

from korpus.apps.sessions import Sessions, end_everywhere
from korpus.core.datamodel import ReasonCode, Source, SourceKind, timecode
from korpus.core.settings import Reviewer, Settings
from tasks.index.registry import serves_without_file
from tasks.index.sqlite import SqliteIndex
from tasks.readers.registry import reader_for
from tasks.review.actions import Action, ReviewError, apply_batch, apply_decision
from tasks.review.queue import STATUSES, QueueQuery, next_item, queue_page

ROOT = "/review"
COOKIE = "korpus_review"
SESSION_COOKIES = {COOKIE: "/", "korpus_key": "/"}
"""Every browser session of this server, cookie → path: the review page's and the viewer's (korpus/apps/api/access.py
KEY_COOKIE). Both are sent to every path, so a logout on any page (`/logout`, `/review/logout`) ends both."""
ASSETS = Path(__file__).parent / "review_assets"
STATUS_NAMES = {
    "open": "ждёт решения",
    "released": "допущен",
    "rejected": "отклонён",
    "resolved": "исправлен",
    "all": "все",
}
ADVICE_RU: dict[ReasonCode, str] = {
    ReasonCode.missing_metadata: "укажите владельца и доступ для этого пути в korpus.yaml — следующее "
    "обновление его примет",
    ReasonCode.unsupported_type: "переведите в PDF, изображение, DjVu, офисный формат, текст или звук — или исключите",
    ReasonCode.outside_root: "скопируйте файл в корень архива вместо ссылки на него",
    ReasonCode.unreadable_file: "замените файл читаемой копией (целой, без пароля, в известной кодировке) или "
    "исправьте ссылку или права, названные в подробностях",
    ReasonCode.empty_text: "посмотрите на страницу: если на ней есть текст — распознайте заново или впишите его; "
    "если она пустая — отклоните",
    ReasonCode.ocr_failed: "проверьте движок, названный в подробностях, и распознайте заново",
    ReasonCode.asr_failed: "замените запись читаемой копией или отклоните",
    ReasonCode.no_speech: "речи не найдено: тихую запись отклоните; негромкой могут понадобиться другие фильтры",
    ReasonCode.page_quality: "распознайте заново (VLM, если настроен), исправьте текст вручную, допустите как есть "
    "или замените скан",
    ReasonCode.reader_timed_out: "чтение не уложилось в KORPUS_READER_SECONDS: длинному файлу увеличьте предел и "
    "выполните «korpus review retry» (или просто повторите, если машина была занята); бесконечный — замените",
    ReasonCode.reader_crashed: "программа чтения упала на этом файле или превысила предел памяти или времени (см. "
    "подробности): замените файл целой копией или увеличьте KORPUS_READER_MEMORY_MB / KORPUS_READER_SECONDS и "
    "выполните «korpus review retry»",
    ReasonCode.processing_failed: "в подробностях сказано, что сломалось: замените файл целой копией или сообщите "
    "подробности, если файл открывается в других программах; отклоните, чтобы закрыть",
    ReasonCode.policy_not_approved: "отклоните: обновление заново нарежет источник по текущей политике",
    ReasonCode.oversized: "допустите как исключение, если текст верен, или исправьте вёрстку источника",
    ReasonCode.text_quality: "распознайте заново, исправьте текст или допустите, если источник так напечатан",
}
"""REASON_ADVICE (korpus/core/datamodel.py) for the Russian page; the CLI keeps the English."""
ACTION_NAMES = {"release": "допущен", "reject": "отклонён", "reocr": "распознан заново", "edit": "текст исправлен"}


class QueueParams:
    """The queue's filters and page, as query parameters (the HTML page and the JSON API take the same)."""

    def __init__(
        self,
        status: str = "open",
        reason: str | None = None,
        folder: str | None = None,
        kind: str | None = None,
        page: Annotated[int, Query(ge=1)] = 1,
        per_page: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> None:
        self.status, self.reason, self.folder, self.kind = status, reason, folder, kind
        self.page, self.per_page = page, per_page


class LoginNeeded(Exception):
    """A page was asked for without a reviewer key: the browser goes to the login form."""


class Decision(BaseModel):
    action: Action
    note: str = Field(default="", max_length=2000)
    text: str | None = Field(default=None, max_length=200_000, description="The page text, for action `edit`.")


class BatchDecision(BaseModel):
    item_ids: list[str] = Field(min_length=1, max_length=1000)
    action: Action
    note: str = Field(default="", max_length=2000)


def templates() -> Environment:
    """The Jinja environment over korpus/apps/review_assets: the workbench's pages and the hit viewer's."""
    return Environment(loader=FileSystemLoader(ASSETS), autoescape=select_autoescape(["html"]))


def _where(item: dict[str, Any]) -> str:
    if item.get("page"):
        return f"лист {item['page']}"
    if item.get("t_start") is not None:
        return timecode(item["t_start"])
    return "весь файл"


def install_review(app: FastAPI, settings: Settings, sessions: Sessions | None = None) -> None:
    """Add the review page, its JSON API and its assets to the API app; `sessions` are the server's browser logins."""
    env = templates()
    sessions = sessions or Sessions(settings.session_hours)

    def who(request: Request, page: bool = False) -> Reviewer:
        if not settings.review_keys:
            raise HTTPException(status_code=404, detail="review is off: set KORPUS_REVIEW_KEYS")
        key = sessions.presented(request, COOKIE)
        reviewer = settings.reviewer(key)
        if reviewer is not None:
            return reviewer
        if settings.api_scopes(key) is not None:
            raise HTTPException(status_code=403, detail="a search key cannot review: use a reviewer key")
        if page:
            raise LoginNeeded
        raise HTTPException(status_code=401, detail="a reviewer key is required (X-API-Key)")

    @app.exception_handler(LoginNeeded)
    def to_login(_request: Request, _exc: LoginNeeded) -> Response:
        return RedirectResponse(f"{ROOT}/login", status_code=303)

    def render(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(root=ROOT, status_names=STATUS_NAMES, **context)
        return HTMLResponse(html, status_code=status_code)

    def item_for(index: SqliteIndex, item_id: str, reviewer: Reviewer) -> dict[str, Any]:
        item = index.quarantine_item(item_id)
        if item is None or item["scope"] not in reviewer.scopes:
            raise HTTPException(status_code=404, detail="no such item visible to this reviewer")
        return item

    def item_and_source(request: Request, item_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """An item the caller's key may see, and its source version's catalog row (for its image or recording)."""
        reviewer = who(request)
        with open_index() as index:
            item = item_for(index, item_id, reviewer)
            return item, index.source_version(item["source_id"], item["source_version"])

    def open_index() -> SqliteIndex:
        if not settings.index_path.is_file():
            if serves_without_file(settings):  # a search replica: review decisions are written with the catalog file
                raise HTTPException(
                    status_code=503,
                    detail=f"this server answers searches without a catalog file (KORPUS_CATALOG_URL); review "
                    f"needs the catalog file, which is not at {settings.index_path}: review on the refreshing machine",
                )
            raise HTTPException(status_code=503, detail="no index yet: run `korpus refresh`")
        return SqliteIndex(settings.index_path)

    def query_of(reviewer: Reviewer, **given: Any) -> QueueQuery:
        blank_is_none = {k: (v or None) if k in ("reason", "folder", "kind") else v for k, v in given.items()}
        try:
            return QueueQuery(scopes=reviewer.scopes, **blank_is_none)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc

    def filters_of(query: QueueQuery) -> dict[str, Any]:
        return {
            k: v
            for k, v in (
                ("status", query.status),
                ("reason", query.reason),
                ("folder", query.folder),
                ("kind", query.kind),
            )
            if v
        }

    # --- login -------------------------------------------------------------------------------------------------

    @app.get(f"{ROOT}/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form(message: str | None = None) -> HTMLResponse:
        return render("login.html", reviewer=None, message=message)

    @app.post(f"{ROOT}/login", include_in_schema=False)
    def login(request: Request, key: Annotated[str, Form()]) -> Response:
        if not settings.review_keys:
            raise HTTPException(status_code=404, detail="review is off: set KORPUS_REVIEW_KEYS")
        if settings.reviewer(key) is None:
            search_key = settings.api_scopes(key) is not None
            text = "Это ключ для поиска, а не для проверки." if search_key else "Ключ не подошёл."
            return render("login.html", status_code=403 if search_key else 401, reviewer=None, message=text)
        response = RedirectResponse(ROOT, status_code=303)
        sessions.set_cookie(response, request, COOKIE, key)  # a session id, never the key; on every path (logout)
        return response

    @app.post(f"{ROOT}/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        response = RedirectResponse(f"{ROOT}/login", status_code=303)
        end_everywhere(sessions, request.cookies, response, SESSION_COOKIES)  # the viewer's too
        return response

    # --- pages ---------------------------------------------------------------------------------------------------

    @app.get(ROOT, response_class=HTMLResponse, summary="The review queue (HTML)")
    def queue(request: Request, asked: Annotated[QueueParams, Depends()], message: str | None = None) -> HTMLResponse:
        reviewer = who(request, page=True)
        query = query_of(reviewer, **asked.__dict__)
        with open_index() as index:
            result = queue_page(index, query)
        filters = filters_of(query)

        def link(**changes: Any) -> str:
            return f"{ROOT}?{urlencode({**filters, 'page': query.page, 'per_page': query.per_page, **changes})}"

        pages = max(1, -(-result.total // query.per_page))
        return render(
            "queue.html",
            reviewer=reviewer,
            page=result,
            query=query,
            pages=pages,
            link=link,
            statuses=STATUSES,
            reason_codes=[r.value for r in ReasonCode],
            where=_where,
            filters=urlencode(filters),
            back=urlencode({**filters, "page": query.page}),
            message=message,
        )

    @app.get(f"{ROOT}/items/{{item_id}}", response_class=HTMLResponse, summary="One quarantine item (HTML)")
    def item_page(
        request: Request,
        item_id: str,
        status: str = "open",
        reason: str | None = None,
        folder: str | None = None,
        kind: str | None = None,
        message: str | None = None,
    ) -> HTMLResponse:
        reviewer = who(request, page=True)
        query = query_of(reviewer, status=status, reason=reason, folder=folder, kind=kind)
        with open_index() as index:
            item = item_for(index, item_id, reviewer)
            source = index.source_version(item["source_id"], item["source_version"])
            following = next_item(index, query, item_id)
        paged = bool(item["kind"]) and item["kind"] in {k.value for k in SourceKind if k.paged}
        chunk = item["chunk"]
        return render(
            "item.html",
            reviewer=reviewer,
            item=item,
            source=source,
            where=_where(item),
            timecode=timecode(item["t_start"]) if item["t_start"] is not None else "",
            image=bool(item["page"]) and (bool(item["evidence_path"]) or (paged and source is not None)),
            media=item["kind"] == SourceKind.audio.value and source is not None,
            advice=[ADVICE_RU[ReasonCode(code)] for code in item["reasons"]],
            edit_text=chunk.body if chunk is not None else (item["evidence"] or ""),
            regions=chunk.regions if chunk is not None else [],  # the refused chunk's words, highlighted
            next_id=following if following != item_id else None,
            filters=urlencode(filters_of(query)),
            vlm=bool(settings.vlm_url),
            message=message,
        )

    @app.get(f"{ROOT}/items/{{item_id}}/image", summary="The item's page image (PNG)")
    def item_image(request: Request, item_id: str) -> Response:
        item, source = item_and_source(request, item_id)
        evidence = Path(item["evidence_path"]) if item["evidence_path"] else None
        if evidence is not None and evidence.is_file() and evidence.resolve().is_relative_to(settings.data.resolve()):
            return FileResponse(evidence, media_type="image/png")
        if not item["page"] or source is None or not Path(source["path"]).is_file():
            raise HTTPException(status_code=404, detail="no page image for this item")
        return Response(_render_page(item, source, settings), media_type="image/png")

    @app.get(f"{ROOT}/items/{{item_id}}/audio", summary="The item's recording (seek to the segment with #t=)")
    def item_audio(request: Request, item_id: str) -> Response:
        item, source = item_and_source(request, item_id)
        if item["kind"] != SourceKind.audio.value or source is None or not Path(source["path"]).is_file():
            raise HTTPException(status_code=404, detail="no recording for this item")
        return FileResponse(source["path"])

    @app.get(f"{ROOT}/static/{{name}}", include_in_schema=False)
    def asset(name: str) -> Response:
        types = {"review.css": "text/css", "review.js": "text/javascript"}
        if name not in types:
            raise HTTPException(status_code=404)
        return FileResponse(ASSETS / name, media_type=types[name])

    # --- actions (forms) ---------------------------------------------------------------------------------------

    @app.post(f"{ROOT}/items/{{item_id}}/decision", include_in_schema=False)
    def decide_form(
        request: Request,
        item_id: str,
        action: Annotated[Action, Form()],
        note: Annotated[str, Form(max_length=2000)] = "",
        text: Annotated[str | None, Form(max_length=200_000)] = None,
        back: Annotated[str, Form()] = "",
    ) -> Response:
        reviewer = who(request)
        text = text if action is Action.edit else None
        try:
            outcome = apply_decision(item_id, action, reviewer.name, note, settings, text=text, scopes=reviewer.scopes)
        except ReviewError as exc:
            message = urlencode({"message": f"Не получилось: {exc}"})
            return RedirectResponse(f"{ROOT}/items/{item_id}?{back}&{message}", status_code=303)
        with open_index() as index:
            query = query_of(reviewer, **_parse_back(back))
            following = next_item(index, query, item_id)
        message = urlencode({"message": f"{ACTION_NAMES[action.value].capitalize()}: {outcome}"})
        target = f"{ROOT}/items/{following}" if following and following != item_id else ROOT
        return RedirectResponse(f"{target}?{back}&{message}", status_code=303)

    @app.post(f"{ROOT}/batch", include_in_schema=False)
    def decide_batch_form(
        request: Request,
        action: Annotated[Action, Form()],
        item_id: Annotated[list[str] | None, Form()] = None,
        note: Annotated[str, Form(max_length=2000)] = "",
        back: Annotated[str, Form()] = "",
    ) -> Response:
        reviewer = who(request)
        if not item_id:
            message = "Ничего не выбрано."
        else:
            try:
                outcomes = apply_batch(item_id, action, reviewer.name, note, settings, scopes=reviewer.scopes)
            except ReviewError as exc:
                raise HTTPException(status_code=422, detail=str(exc)) from exc
            refused = sum(1 for o in outcomes.values() if o.startswith("refused"))
            message = f"{ACTION_NAMES[action.value].capitalize()}: {len(outcomes) - refused}; не удалось: {refused}"
        return RedirectResponse(f"{ROOT}?{back}&{urlencode({'message': message})}", status_code=303)

    # --- JSON API ------------------------------------------------------------------------------------------------

    @app.get(f"{ROOT}/api/items", summary="The review queue (JSON)")
    def api_queue(request: Request, asked: Annotated[QueueParams, Depends()]) -> dict[str, Any]:
        reviewer = who(request)
        query = query_of(reviewer, **asked.__dict__)
        with open_index() as index:
            return queue_page(index, query).as_dict() | {"page": query.page, "per_page": query.per_page}

    @app.get(f"{ROOT}/api/items/{{item_id}}", summary="One quarantine item (JSON)")
    def api_item(request: Request, item_id: str) -> dict[str, Any]:
        reviewer = who(request)
        with open_index() as index:
            item = item_for(index, item_id, reviewer)
        item["chunk"] = item["chunk"].model_dump(mode="json") if item["chunk"] is not None else None
        return item

    @app.post(f"{ROOT}/api/items/{{item_id}}/decision", summary="Decide on one item (JSON)")
    def api_decide(request: Request, item_id: str, decision: Decision) -> JSONResponse:
        reviewer = who(request)
        text = decision.text if decision.action is Action.edit else None
        try:
            outcome = apply_decision(
                item_id, decision.action, reviewer.name, decision.note, settings, text=text, scopes=reviewer.scopes
            )
        except ReviewError as exc:
            return JSONResponse(status_code=409, content={"detail": str(exc)})
        return JSONResponse({"item_id": item_id, "action": decision.action.value, "outcome": outcome})

    @app.post(f"{ROOT}/api/decisions", summary="The same decision for many items (JSON)")
    def api_batch(request: Request, decision: BatchDecision) -> dict[str, Any]:
        reviewer = who(request)
        try:
            outcomes = apply_batch(
                decision.item_ids, decision.action, reviewer.name, decision.note, settings, scopes=reviewer.scopes
            )
        except ReviewError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        return {"action": decision.action.value, "outcomes": outcomes}


def _parse_back(back: str) -> dict[str, Any]:
    allowed = {"status", "reason", "folder", "kind"}
    return {k: v for k, v in parse_qsl(back) if k in allowed}


def _render_page(item: dict[str, Any], source: dict[str, Any], settings: Settings) -> bytes:
    """A page of a paged source rendered for the reviewer (when no evidence image was saved)."""
    kind = SourceKind(source["kind"])
    src = Source(
        source_id=item["source_id"],
        version=item["source_version"],
        path=source["path"],
        kind=kind,
        owner=source["owner"],
        access=item["access"],
    )
    return reader_for(kind).page_image(src, item["page"], settings)(100, "png").data

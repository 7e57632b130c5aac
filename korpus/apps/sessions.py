"""Browser sessions for the viewer and the review page: the login form takes a key once, and the cookie carries a
random session id that names it on the server — never the key itself, which would otherwise sit in the browser,
its cookie store and any proxy log for ever. A session expires `KORPUS_SESSION_HOURS` after login (8) and ends at
logout; the store is in the server's memory, so a restart signs everyone out (a person logs in again). The cookie is
HttpOnly, SameSite=Strict and, behind https, Secure.

`/logout` (and the review page's own) ends every session the browser holds on this server — the viewer's and search
page's, and the review page's — and clears both cookies. Forms are checked by their Origin (`same_origin`), not by a
token: every browser sends Origin with a cross-site POST, so a page on another site — a sibling subdomain included,
which SameSite counts as the same site — is refused (403) before any handler runs, and no token has to be kept,
rendered into every form or sent by the JSON clients. A request without Origin or Referer (curl, a script, an
API-key client) is not a browser's cross-site request and passes; its key or session decides as before.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any
from urllib.parse import urlsplit

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Sessions:
    """Session id → (the key it was opened with, when it expires)."""

    def __init__(self, hours: float) -> None:
        self.seconds = hours * 3600
        self._open: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def open(self, key: str) -> str:
        token = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            self._open = {t: v for t, v in self._open.items() if v[1] > now}  # expired ones go as new ones come
            self._open[token] = (key, now + self.seconds)
        return token

    def key(self, token: str | None) -> str | None:
        """The key a live session was opened with; None for an unknown, expired or closed one."""
        if not token:
            return None
        with self._lock:
            found = self._open.get(token)
            if found is None or found[1] <= time.monotonic():
                self._open.pop(token, None)
                return None
            return found[0]

    def presented(self, request: Any, cookie: str) -> str | None:
        """The key a request presents: `X-API-Key`, else `Authorization: Bearer …`, else the session its `cookie`
        names. The one place every route (API, search page, review page) reads a caller's key."""
        headers = request.headers
        auth = headers.get("authorization") or ""
        bearer = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
        return headers.get("x-api-key") or bearer or self.key(request.cookies.get(cookie))

    def close(self, token: str | None) -> None:
        with self._lock:
            self._open.pop(token or "", None)

    def set_cookie(self, response: Any, request: Any, name: str, key: str, path: str = "/") -> None:
        """Open a session for `key` and set its cookie on `response`."""
        response.set_cookie(
            name,
            self.open(key),
            httponly=True,
            samesite="strict",
            path=path,
            secure=request.url.scheme == "https",
            max_age=int(self.seconds),
        )


def same_origin(method: str, headers: Any) -> bool:
    """Whether a request may go on: a safe method, or one whose Origin (else Referer) names this server's host. A
    request with neither header is no browser's cross-site form (see the module docstring)."""
    if method.upper() not in UNSAFE_METHODS:
        return True
    claimed = headers.get("origin") or headers.get("referer")
    if not claimed:
        return True
    if claimed == "null":  # a sandboxed frame, a redirect across sites: never this server's own page
        return False
    return urlsplit(claimed).netloc.lower() == str(headers.get("host", "")).lower()


def end_everywhere(sessions: Sessions, cookies: dict[str, str], response: Any, names: dict[str, str]) -> None:
    """Close every session the request's cookies name and delete those cookies (`names`: cookie → its path)."""
    for name, path in names.items():
        sessions.close(cookies.get(name))
        response.delete_cookie(name, path=path)
    response.delete_cookie("korpus_review", path="/review")  # where the review page's cookie lived before #61

"""Browser sessions for the viewer and the review page: the login form takes a key once, and the cookie carries a
random session id that names it on the server — never the key itself, which would otherwise sit in the browser,
its cookie store and any proxy log for ever. A session expires `KORPUS_SESSION_HOURS` after login (8) and ends at
logout; the store is in the server's memory, so a restart signs everyone out (a person logs in again). The cookie is
HttpOnly, SameSite=Strict and, behind https, Secure.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any


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

    def close(self, token: str | None) -> None:
        with self._lock:
            self._open.pop(token or "", None)

    def set_cookie(self, response: Any, request: Any, name: str, key: str, path: str = "/") -> None:
        """Open a session for `key` and set its cookie on `response`."""
        response.set_cookie(name, self.open(key), httponly=True, samesite="strict", path=path,
                            secure=request.url.scheme == "https", max_age=int(self.seconds))  # fmt: skip

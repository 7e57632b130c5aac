"""A fault-injecting HTTP proxy for tests only: it forwards every request to a real server (here the session's
OpenSearch node) and, for the requests it is told to, fails the way a
cluster restarting mid-bulk fails.

Faults, consumed in order by the matching requests (`Faults.script`):
- `"drop-after"`: forward the request, let the server apply it, then close the connection without an answer —
  the client cannot know the bulk landed;
- `"drop-before"`: close the connection before forwarding (nothing applied);
- `"503"`: answer 503 without forwarding;
- `"shards-lost"`: answer as a cluster whose node holding the shards was just lost — a read forwarded, then a
  multi-get's every document an error of its own, a search's shards failed and its hits missing (both HTTP 200); a
  bulk not forwarded (nothing applied), its every action an item refused 503 `unavailable_shards_exception`.
`Faults.down = True` drops every request before forwarding, until it is set back.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import httpx

from .chat_stand_in import serving


@dataclass
class Faults:
    path: str = "/_bulk"
    script: list[str] = field(default_factory=list)
    down: bool = False
    seen: list[str] = field(default_factory=list)
    """What happened to each matching request, in order: a fault's name, or `"ok"`."""
    credentials: tuple[str, str] | None = None
    """Set: every request without this user and password (HTTP basic auth) is answered 401, as a secured cluster
    answers it (`"401"` in `seen`)."""


def _shards_lost(answer: dict) -> bytes:
    """`answer` (a multi-get's or a search's) as OpenSearch gives it when the node holding its shards is gone."""
    lost = {"type": "no_shard_available_action_exception", "reason": "No shard available"}
    if "docs" in answer:
        answer["docs"] = [{"_index": d["_index"], "_id": d["_id"], "error": lost} for d in answer["docs"]]
    if "_shards" in answer:
        total = answer["_shards"]["total"]
        answer["_shards"] = {"total": total, "successful": 0, "skipped": 0, "failed": total, "failures": [lost]}
        answer["hits"]["hits"] = []
    return json.dumps(answer).encode()


def _bulk_shards_lost(body: bytes) -> bytes:
    """A bulk's answer when the primaries of its documents are gone: every action refused 503, nothing applied."""
    lost = {"type": "unavailable_shards_exception", "reason": "primary shard is not active"}
    lines = iter(json.loads(line) for line in body.decode().splitlines() if line.strip())
    items = []
    for header in lines:
        ((action, meta),) = header.items()
        if action != "delete":
            next(lines)  # the document or partial update that follows its header
        items.append({action: {"_index": meta.get("_index"), "_id": meta.get("_id"), "status": 503, "error": lost}})
    return json.dumps({"took": 1, "errors": True, "items": items}).encode()


@contextmanager
def fault_proxy(upstream: str, faults: Faults, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """Listen on a free loopback port in front of `upstream`; yields the proxy's URL (https:// with `tls`, the
    server side's context: its certificate is the one a client must verify)."""
    client = httpx.Client(base_url=upstream, timeout=30)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _fault(self) -> str | None:
            with lock:
                if faults.down:
                    faults.seen.append("down")
                    return "drop-before"
                if self.path.split("?")[0].endswith(faults.path):
                    fault = faults.script.pop(0) if faults.script else None
                    faults.seen.append(fault or "ok")
                    return fault
            return None

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if faults.credentials is not None:
                token = base64.b64encode(":".join(faults.credentials).encode()).decode()
                if self.headers.get("Authorization") != f"Basic {token}":
                    with lock:
                        faults.seen.append("401")
                    return self._answer(401, b'{"error":"unauthorized","status":401}', "application/json")
            fault = self._fault()
            if fault == "drop-before":
                return self._drop()
            if fault == "503":
                return self._answer(503, b'{"error":"unavailable","status":503}', "application/json")
            if fault == "shards-lost" and self.path.split("?")[0].endswith("/_bulk"):
                return self._answer(200, _bulk_shards_lost(body), "application/json")
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            response = client.request(self.command, self.path, content=body, headers=headers)
            if fault == "drop-after":
                return self._drop()
            if fault == "shards-lost":
                return self._answer(200, _shards_lost(response.json()), "application/json")
            self._answer(response.status_code, response.content, response.headers.get("content-type", ""))

        def _answer(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        def log_message(self, *_args: object) -> None:
            pass

    try:
        with serving(Handler, tls) as url:
            yield url
    finally:
        client.close()

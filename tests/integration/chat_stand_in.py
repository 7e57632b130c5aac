"""A local stand-in for an OpenAI-compatible chat-completions server (vLLM and the like), for tests only.

It is not a model: it records each request and answers what the test scripts. Used to exercise korpus's real
HTTP clients (the LLM boundary splitter, the VLM OCR tier) where no model can run.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Script:
    """What the stand-in answers next: message content, HTTP status, and a delay before answering.

    A restarting server: the next `unavailable` requests get 503 (with `Retry-After: 0`), and the next `drop`
    requests have their connection closed before any answer — in that order, then `status`/`content` again.
    """

    content: str = ""
    status: int = 200
    sleep: float = 0.0
    unavailable: int = 0
    drop: int = 0
    requests: list[dict] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)


@contextmanager
def chat_stand_in(script: Script) -> Iterator[str]:
    """Serve `/v1/chat/completions` on a free loopback port; yields the base URL (…/v1)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            script.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            with lock:
                fault = "503" if script.unavailable > 0 else "drop" if script.drop > 0 else None
                script.unavailable -= fault == "503"
                script.drop -= fault == "drop"
                if fault:
                    script.faults.append(fault)
            if fault == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if script.sleep:
                time.sleep(script.sleep)
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": script.content}}]}).encode()
            self.send_response(503 if fault else script.status)
            if fault:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: object) -> None:
            pass

    lock = threading.Lock()
    with serving(Handler) as url:
        yield f"{url}/v1"


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """A threaded HTTP server with this handler on a free loopback port, for the block; yields its base URL (https
    with `tls`, a server-side context)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()

"""A TCP forwarder for tests only, that can be cut: in front of the session's PostgreSQL, it makes an outage real
to psycopg (connections refused while `down`, and the open ones closed the moment it goes down) without the
seconds a server's kill and crash recovery take."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Cut:
    """The proxy's switch and its open connections."""

    def __init__(self) -> None:
        self.down = False
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []

    def set_down(self, down: bool) -> None:
        with self.lock:
            self.down = down
            if down:
                for sock in self.open:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                self.open.clear()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for sock in (src, dst):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextmanager
def tcp_proxy(port: int, cut: Cut) -> Iterator[int]:
    """Listen on a free loopback port, forwarding to `port`; yields the proxy's port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with cut.lock:
                if cut.down:
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                cut.open += [client, upstream]
            threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        cut.set_down(True)
        thread.join(timeout=5)


def proxied_url(url: str, port: int) -> str:
    """A postgresql:// URL with its host and port replaced by the proxy's."""
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    return url.replace(host_port, f"127.0.0.1:{port}")

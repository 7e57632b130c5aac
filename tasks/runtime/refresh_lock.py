"""One refresh at a time per data directory.

A refresh holds an exclusive `flock` on `<data>/refresh.lock` from its first catalog read to its summary. A second
refresh of the same data directory — a manual one overlapping a scheduled one, two deployments — waits up to
`KORPUS_REFRESH_WAIT` seconds (default 0) for it, then stops with `RefreshLocked`, naming the holder; it never
interleaves its publishes with the first one's. The kernel drops the lock when its process ends, however it ends
(a SIGKILLed refresh leaves no stale lock behind). `flock` holds between processes of one machine; a data
directory on a network file system shared by several flow hosts needs the deployment's concurrency limit instead.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

LOCK_NAME = "refresh.lock"


class RefreshLocked(RuntimeError):
    """Another refresh holds this data directory."""


@contextmanager
def refresh_lock(data: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold the data directory's refresh lock for the block; wait up to `wait` seconds for another holder."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / LOCK_NAME
    with path.open("a+", encoding="utf-8") as handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip() or "a process that has not said who it is"
                    raise RefreshLocked(
                        f"another refresh of {data} is running ({holder}); it was not interrupted and nothing was "
                        f"changed by this one. Run again when it has finished, or set KORPUS_REFRESH_WAIT=SECONDS to "
                        "wait for it."
                    ) from None
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}, since {datetime.now(UTC).isoformat()}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)

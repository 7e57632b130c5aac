"""Named crash points for the kill suite (tests/integration/test_kill_suite.py).

`KORPUS_CRASH_AT=<point>[:<n>]` makes the process SIGKILL itself the n-th time (default: first) it reaches that
point — a power cut at a chosen moment, reproducibly. Unset, a crash point costs one environment lookup. The
points sit where a refresh changes state: after discovery and each parse stage, inside and after the publish
transaction, inside the retire transaction, and around the catalog's quarantine updates.
"""

from __future__ import annotations

import os
import signal
import threading

POINTS = (
    "after-discover",
    "after-read-source",
    "after-ocr-page",
    "after-parse",
    "after-chunk",
    "after-embed",
    "publish-mid-transaction",
    "after-publish",
    "after-searchable",
    "catalog-after-quarantine",
    "retire-mid-transaction",
    "gc-mid-version",
    "gc-before-files",
)
_reached: dict[str, int] = {}
_lock = threading.Lock()


def crash_point(name: str) -> None:
    spec = os.environ.get("KORPUS_CRASH_AT")
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    with _lock:
        _reached[name] = _reached.get(name, 0) + 1
        if _reached[name] >= int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)

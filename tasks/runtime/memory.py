"""The C allocator in a long refresh (#32): resident memory is what glibc keeps, and glibc gives every new thread an
arena of its own (up to 8 a core), each keeping the pages it once used. (What grew with the archive in Python
objects was Dask's debugging log of messages, each holding its task's inputs: flows/refresh_tasks.py
`dask_task_runner`.) The refresh runs
with two arenas (the main one and one its threads share) and gives free pages back to the system before the
meta-documents, so their peak is not added to what the documents' work left behind. Neither has been measured
side by side against the uncapped allocator at scale: the one comparison made (30,000 letters capped against a
100,000-letter run uncapped) differed in how many read batches were waiting, which is what made the difference
(flows/refresh_stream.py `Parse`).

Both are glibc's own calls through ctypes; on another C library (musl, macOS) they do nothing. A user's
`MALLOC_ARENA_MAX` stands: korpus does not override it."""

from __future__ import annotations

import ctypes
import os
from typing import Any

M_ARENA_MAX = -8
"""mallopt's parameter number for the arena limit (glibc malloc.h)."""
REFRESH_ARENAS = 2


def _glibc() -> Any | None:
    """The process's own C library when it has glibc's mallopt and malloc_trim; None elsewhere."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def cap_arenas(arenas: int = REFRESH_ARENAS) -> bool:
    """Limit the allocator's arenas from now on (threads started later share them); False when the C library is
    not glibc or the user set MALLOC_ARENA_MAX."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas))


def release_free_memory() -> bool:
    """Give the allocator's free pages back to the system (malloc_trim(0)); True when some were."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))

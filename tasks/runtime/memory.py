"""The C allocator in a long refresh (#32): a refresh's Python objects stay flat (the work in flight, not the archive),
yet its resident memory grew with the archive — 2,035 MB at 29,000 letters, 2,125 MB at 92,000 — because glibc gives
every new thread its own arena (up to 8 a core) and each arena keeps the pages it once used. The refresh runs with
two arenas (the main one and one its threads share: 1,720 MB at 29,000 letters, same code) and gives free pages
back to the system before the meta-documents, so their peak is not added to the documents' high-water mark.

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

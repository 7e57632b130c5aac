"""The refresh's allocator limits (tasks/runtime/memory.py), in a child process each: the arena cap is glibc state
of the whole process."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# six threads allocate (100 KB blocks go to their arena, below the mmap threshold) and stay alive together, then
# glibc's malloc_stats prints one "Arena N:" block per arena to stderr
CHILD = """
import ctypes, sys, threading
sys.path.insert(0, {root!r})
from tasks.runtime.memory import cap_arenas, release_free_memory
print(cap_arenas(1) if sys.argv[1] == "cap" else None, flush=True)
held, ready = [], threading.Barrier(7)
def work():
    held.append([bytearray(100_000) for _ in range(20)])
    ready.wait()
threads = [threading.Thread(target=work) for _ in range(6)]
for t in threads:
    t.start()
ready.wait()
for t in threads:
    t.join()
held.clear()
print(release_free_memory(), flush=True)
ctypes.CDLL(None).malloc_stats()
"""


def _child(mode: str, **env: str) -> tuple[list[str], int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), mode],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
        check=True,
    )
    return done.stdout.split(), sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_a_refresh_caps_the_allocators_arenas_and_gives_free_pages_back() -> None:
    said, arenas = _child("cap")
    assert said == ["True", "True"]  # capped; the freed blocks were returned to the system
    assert arenas == 1  # six threads, one arena
    said, arenas = _child("free")
    assert arenas > 1  # the same threads uncapped: an arena each (glibc allows 8 a core)


def test_a_users_malloc_arena_max_stands() -> None:
    said, arenas = _child("cap", MALLOC_ARENA_MAX="3")
    assert said[0] == "False"
    assert arenas == 3

"""The topology's tests run beside a CPU-bound neighbour (#64 item 1): one busy process a core, for the whole
session, as on a CI machine that runs other jobs or a laptop doing other work. Every part must then still be ready
only when it answers a real request, and every kill test still pass. `KORPUS_TOPOLOGY_NEIGHBOUR=0` runs them
alone (to tell a slow machine from a broken part)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

BUSY = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    sum(range(200_000))\n"
"""A core kept busy until its parent — this test session — is gone, however it ended (no process outlives it)."""


@pytest.fixture(scope="session", autouse=True)
def cpu_bound_neighbour() -> Iterator[list[int]]:
    if os.environ.get("KORPUS_TOPOLOGY_NEIGHBOUR", "1") == "0":
        yield []
        return
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(os.cpu_count() or 2)]
    try:
        yield [process.pid for process in busy]
    finally:
        for process in busy:
            process.kill()
        for process in busy:
            process.wait(timeout=30)

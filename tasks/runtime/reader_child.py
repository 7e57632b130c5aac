"""Readers that run native code read each file in a child process with a memory and a time limit: a crash is one
file's item, never the refresh's end.

The shape is Apache Tika's forked server: a throwaway child per reading thread, reused file after file, restarted
after a crash, a limit hit, or every `KORPUS_READER_FILES_PER_CHILD` files (what native libraries leak goes with it).
The child is a fresh Python (`python -m tasks.runtime.reader_child`, a plain subprocess: allowed inside a Dask worker
process too, where a multiprocessing child is not), caps its address space (RLIMIT_AS, `KORPUS_READER_MEMORY_MB`)
and answers one file at a time over two pipes of its own; the parent waits `KORPUS_READER_SECONDS` for each. It is in
the parent's process group and ends when its pipe closes: it never outlives the refresh. A child that dies (SIGSEGV,
SIGABRT, the OOM killer), runs out of its memory or past its time is that file's `reader-crashed` item with the
signal or the limit it hit — a version refused as a whole, so the next refresh does not read it again until its
bytes change or a reviewer asks (`korpus review retry ID`).

Isolated kinds: those whose readers run native code on the file's bytes — PDF (MuPDF), image (PIL), DjVu
(djvulibre), office documents and spreadsheets (LibreOffice, openpyxl/xlrd), archives (libarchive), mail (its
attachments' parsers). A text file, a web page and a recording's probe are read in-process (pure Python, or a
program korpus already runs in its own process). `KORPUS_READER_ISOLATION=false` reads everything in-process.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.base import ParseOutcome, problem

ISOLATED = frozenset({SourceKind.pdf, SourceKind.image, SourceKind.djvu, SourceKind.office, SourceKind.sheet,
                      SourceKind.archive, SourceKind.mail})  # fmt: skip
FAULT_VARIABLE = "KORPUS_FAULT_READ"
"""Fault injection for tests: `<text>:<segv|alloc|hang>[,…]` makes the child reading a file whose id contains <text>
segfault, allocate past its memory limit, or hang in C — or, for a file read in-process (a kind not isolated, or
isolation off), the process reading it: a Dask worker process dies as a native crash would kill it. Passed to the
child with each request; unset, it costs one environment lookup."""


@dataclass(frozen=True)
class Limits:
    memory_mb: int
    seconds: float
    files_per_child: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(settings.reader_memory_mb, settings.reader_seconds, settings.reader_files_per_child)


def _serve(requests: Connection, conn: Connection, memory_mb: int) -> None:
    """The child: cap the address space, then read one file per request until told to stop or the pipe closes."""
    limit = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from tasks.parse import read_source

    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        source, settings, fault = request
        try:
            _inject(fault, source, memory_mb)
            conn.send(("ok", read_source(source, settings)))
        except MemoryError:
            conn.send(("memory", f"it needed more than the reader's memory limit ({memory_mb} MB)"))
        except Exception as exc:  # the reader's own error: the parent turns it into the usual item
            conn.send(("error", f"{type(exc).__name__}: {exc}"[:500]))


def _inject(faults: str | None, source: Source, memory_mb: int) -> None:
    for fault in (faults or "").split(","):
        text, _, kind = fault.rpartition(":")
        if text and text in source.source_id:
            _fail(kind, memory_mb)


def _fail(kind: str, memory_mb: int) -> None:
    if kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "alloc":
        hog = bytearray(memory_mb * 2**20 * 2)  # past the limit: MemoryError under RLIMIT_AS
        hog[-1] = 1
    elif kind == "hang":
        import ctypes

        ctypes.CDLL(None).sleep(3600)  # blocked in C: no Python signal handler runs


class ReaderChild:
    """One child process serving one reading thread (see the module docstring)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.process: subprocess.Popen[bytes] | None = None
        self.send: Connection | None = None
        self.conn: Connection | None = None
        self.served = 0

    def _start(self) -> None:
        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tasks.runtime.reader_child", str(from_parent), str(to_parent),
             str(self.limits.memory_mb)],
            pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL, close_fds=True,
        )  # fmt: skip
        os.close(from_parent)
        os.close(to_parent)
        self.send, self.conn, self.served = (
            Connection(to_child, readable=False),
            Connection(from_child, writable=False),
            0,
        )
        with _all_lock:
            if self not in _all:
                _all.append(self)

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.send.send(None)  # type: ignore[union-attr]
        try:
            self.process.wait(2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        for end in (self.send, self.conn):
            with contextlib.suppress(OSError):
                end.close()  # type: ignore[union-attr]
        self.process, self.send, self.conn = None, None, None

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        if self.process is None or self.served >= self.limits.files_per_child or self.process.poll() is not None:
            self.stop()
            self._start()
        self.served += 1
        assert self.send is not None and self.conn is not None
        try:
            self.send.send((source, settings, os.environ.get(FAULT_VARIABLE)))
            answered = self.conn.poll(self.limits.seconds)
            answer = self.conn.recv() if answered else None
        except (EOFError, OSError):  # the child died while reading
            answer, answered = None, True
        if answer is None:
            why = (
                self._died() if answered else f"it took longer than the reader's time limit ({self.limits.seconds:g} s)"
            )
            self.stop()
            return crashed(source, why)
        status, value = answer
        if status == "ok":
            return value
        if status == "memory":
            self.stop()  # a child that ran out of memory is not trusted with the next file
            return crashed(source, value)
        raise ReaderError(value)

    def _died(self) -> str:
        assert self.process is not None
        try:
            code = self.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            return f"the reader crashed ({signal.Signals(-code).name})"
        return f"the reader's process ended (exit code {code})"


class ReaderError(RuntimeError):
    """The reader raised in the child: the same as raising in-process (the caller's handler makes it an item)."""


def crashed(source: Source, why: str) -> ParseOutcome:
    return ParseOutcome(problems=[problem(source, ReasonCode.reader_crashed, why)])


_children = threading.local()
_all: list[ReaderChild] = []
_all_lock = threading.Lock()


def read_contained(source: Source, settings: Settings) -> ParseOutcome:
    """`read_source`, in this thread's child process when the file's kind runs native code and isolation is on."""
    from tasks.parse import read_source

    if not settings.reader_isolation or source.kind not in ISOLATED:
        _inject(os.environ.get(FAULT_VARIABLE), source, settings.reader_memory_mb)  # in this process: it dies
        return read_source(source, settings)
    child = getattr(_children, "child", None)
    limits = Limits.from_settings(settings)
    if child is None or child.limits != limits:
        if child is not None:
            child.stop()
        child = _children.child = ReaderChild(limits)
    return child.read(source, settings)


def stop_children() -> None:
    """Stop every reading child this process started (the refresh's end; a test's)."""
    with _all_lock:
        children, _all[:] = list(_all), []
    for child in children:
        child.stop()


if __name__ == "__main__":  # the child: python -m tasks.runtime.reader_child REQUESTS_FD ANSWERS_FD MEMORY_MB
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), int(sys.argv[3]))

"""Readers that run native code read each file in a child process with a memory and a time limit: a crash is one
file's item, never the refresh's end.

The shape is Apache Tika's forked server: a throwaway child per reading thread, reused file after file, restarted
after a crash, a limit hit, or every `KORPUS_READER_FILES_PER_CHILD` files (what native libraries leak goes with it).
The child is forked from a forkserver that imported the readers once (so a child starts in milliseconds, without the
parent's threads), caps its address space (RLIMIT_AS, `KORPUS_READER_MEMORY_MB`) and answers one file at a time over a
pipe; the parent waits `KORPUS_READER_SECONDS` for each. A child that dies (SIGSEGV, SIGABRT, the OOM killer), runs
out of its memory or past its time is that file's `reader-crashed` item with the signal or the limit it hit — a
version refused as a whole, so the next refresh does not read it again until its bytes change or a reviewer asks
(`korpus review retry ID`).

Isolated kinds: those whose readers run native code on the file's bytes — PDF (MuPDF), image (PIL), DjVu
(djvulibre), office documents and spreadsheets (LibreOffice, openpyxl/xlrd), archives (libarchive), mail (its
attachments' parsers). A text file, a web page and a recording's probe are read in-process (pure Python, or a
program korpus already runs in its own process). `KORPUS_READER_ISOLATION=false` reads everything in-process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import signal
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.base import ParseOutcome, problem

ISOLATED = frozenset({SourceKind.pdf, SourceKind.image, SourceKind.djvu, SourceKind.office, SourceKind.sheet,
                      SourceKind.archive, SourceKind.mail})  # fmt: skip
FAULT_VARIABLE = "KORPUS_FAULT_READ"
"""Fault injection for tests: `<text>:<segv|alloc|hang>[,…]` makes the child reading a file whose id contains <text>
segfault, allocate past its memory limit, or hang in C. Passed to the child with each request; unset, it costs one
environment lookup."""


@dataclass(frozen=True)
class Limits:
    memory_mb: int
    seconds: float
    files_per_child: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(settings.reader_memory_mb, settings.reader_seconds, settings.reader_files_per_child)


def _context() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tasks.parse", "tasks.readers.registry"])
    return context


def _serve(conn: Connection, memory_mb: int) -> None:
    """The child: cap the address space, then read one file per request until told to stop or the pipe closes."""
    limit = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from tasks.parse import read_source

    while True:
        try:
            request = conn.recv()
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
        self.process: Any = None
        self.conn: Connection | None = None
        self.served = 0

    def _start(self) -> None:
        context = _context()
        parent, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, self.limits.memory_mb), daemon=True)
        self.process.start()
        child.close()
        self.conn, self.served = parent, 0
        with _all_lock:
            if self not in _all:
                _all.append(self)

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)  # type: ignore[union-attr]
        self.process.join(2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        with contextlib.suppress(OSError):
            self.conn.close()  # type: ignore[union-attr]
        self.process, self.conn = None, None

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        if self.process is None or self.served >= self.limits.files_per_child or not self.process.is_alive():
            self.stop()
            self._start()
        self.served += 1
        assert self.conn is not None
        try:
            self.conn.send((source, settings, os.environ.get(FAULT_VARIABLE)))
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
        self.process.join(5)
        code = self.process.exitcode
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
    if children:  # and the forkserver they were forked from: no process of korpus's outlives the refresh
        from multiprocessing import forkserver

        with contextlib.suppress(Exception):
            forkserver._forkserver._stop()

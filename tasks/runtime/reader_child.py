"""Readers that run native code read each file in a child process with a memory and a time limit: a crash is one
file's item, never the refresh's end.

The shape is Apache Tika's forked server: a throwaway child per reading thread, reused file after file, restarted
after a crash, a limit hit, or every `KORPUS_READER_FILES_PER_CHILD` files read by native code (what native libraries
leak goes with it; text files and web pages, read by Python alone, do not count).
The child is a fresh Python (`python -m tasks.runtime.reader_child`, a plain subprocess: allowed inside a Dask worker
process too, where a multiprocessing child is not), caps its address space (RLIMIT_AS, `KORPUS_READER_MEMORY_MB`)
and answers one file at a time over two pipes of its own; the parent waits `KORPUS_READER_SECONDS` for each. It is in
the parent's process group and ends when its pipe closes: it never outlives the refresh. A child that is stopped
(its time limit, a crash seen) takes its own children with it — a LibreOffice conversion or a Tesseract page runs in a
process group of its own (tasks/runtime/processes.py), which a killed child could not end itself: the child is
frozen, its descendants' groups are killed, then the child.

A child that dies (SIGSEGV, SIGABRT, the OOM killer) or runs out of its memory is that file's `reader-crashed` item
with the signal or the limit it hit; one past its time is `reader-timed-out`. Either refuses the version as a whole,
so the next refresh does not read it again until its bytes change or a reviewer asks (`korpus review retry ID`); a
changed file's previous version stays served meanwhile (flows/refresh_tasks.py `apply_catalog_changes`).

Isolated kinds: every file kind but recordings — PDF (MuPDF), image (PIL), DjVu (djvulibre), office documents and
spreadsheets (LibreOffice, openpyxl/xlrd), archives (libarchive), mail (its attachments' parsers), and text files,
web pages and e-books too: pure Python, but an 11 KB EPUB or a page of nested frames can expand without bound, and
a limit only a child enforces holds for them as for the rest. A recording's probe is ffmpeg in its own process.
`KORPUS_READER_ISOLATION=false` reads everything in-process.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.base import ParseOutcome, problem

ISOLATED = frozenset(set(SourceKind) - {SourceKind.audio, SourceKind.meta})
FAULT_VARIABLE = "KORPUS_FAULT_READ"
"""Fault injection for tests: `<text>:<segv|alloc|hang|orphan>[,…]` makes the child reading a file whose id contains
<text> segfault, allocate past its memory limit, hang in C, or start a program in a process group of its own (`sleep
3617`, as a LibreOffice conversion would run) and then hang — or, for a file read in-process (a kind not isolated, or
isolation off), the process reading it: a Dask worker process dies as a native crash would kill it. Passed to the
child with each request; unset, it costs one environment lookup."""


PURE_PYTHON = frozenset({SourceKind.text, SourceKind.markup})
"""Kinds whose readers are Python alone: nothing native to leak, so they do not count towards a fresh child."""
AHEAD = 8
"""Requests a reading child has waiting (a few KB each: well within a pipe's buffer, so sending never blocks)."""


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
    elif kind in ("hang", "orphan"):
        import ctypes

        if kind == "orphan":
            subprocess.Popen(["sleep", "3617"], process_group=0, stdin=subprocess.DEVNULL)
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
            [
                sys.executable,
                "-m",
                "tasks.runtime.reader_child",
                str(from_parent),
                str(to_parent),
                str(self.limits.memory_mb),
            ],
            pass_fds=(from_parent, to_parent),
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )
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
            end_tree(self.process.pid)
            self.process.wait(5)
        for end in (self.send, self.conn):
            with contextlib.suppress(OSError):
                end.close()  # type: ignore[union-attr]
        self.process, self.send, self.conn = None, None, None

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        (answer,) = self.read_many([source], settings)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def read_many(self, sources: list[Source], settings: Settings) -> list[ParseOutcome | ReaderError]:
        """Each source's outcome (or the error its reader raised), in order. Up to `AHEAD` requests wait in the pipe,
        so the child goes from one file to the next without a round trip between them; each file still has its own
        time limit, counted from the answer before it, and after a crash or a limit the files sent behind the culprit
        go to a fresh child."""
        answers: list[ParseOutcome | ReaderError | None] = [None] * len(sources)
        fault = os.environ.get(FAULT_VARIABLE)
        sent: deque[int] = deque()
        following = 0
        while following < len(sources) or sent:
            if not sent and (
                self.process is None or self.served >= self.limits.files_per_child or self.process.poll() is not None
            ):
                self.stop()
                self._start()
            while following < len(sources) and len(sent) < AHEAD and self.served < self.limits.files_per_child:
                try:
                    self.send.send((sources[following], settings, fault))  # type: ignore[union-attr]
                except OSError:  # the child is gone: its answer below says how
                    break
                sent.append(following)
                self.served += sources[following].kind not in PURE_PYTHON
                following += 1
            if not sent:
                continue
            at = sent.popleft()
            answers[at] = self._answer(sources[at])
            if self.process is None:  # stopped after a crash or a limit: what was sent behind it is sent again
                following, sent = (sent[0] if sent else following), deque()
        return answers  # type: ignore[return-value]

    def _answer(self, source: Source) -> ParseOutcome | ReaderError:
        assert self.conn is not None
        try:
            answered = self.conn.poll(self.limits.seconds)
            answer = self.conn.recv() if answered else None
        except (EOFError, OSError):  # the child died while reading
            answer, answered = None, True
        if answer is None:
            if not answered:
                end_tree(self.process.pid)  # type: ignore[union-attr]
                self.stop()
                return timed_out(source, self.limits.seconds)
            why = self._died()
            self.stop()
            return crashed(source, why)
        status, value = answer
        if status == "ok":
            return value
        if status == "memory":
            self.stop()  # a child that ran out of memory is not trusted with the next file
            return crashed(source, value)
        return ReaderError(value)

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


def timed_out(source: Source, seconds: float) -> ParseOutcome:
    why = f"it took longer than the reader's time limit ({seconds:g} s, KORPUS_READER_SECONDS)"
    return ParseOutcome(problems=[problem(source, ReasonCode.reader_timed_out, why)])


def end_tree(pid: int) -> None:
    """End a child and everything it started, process groups of their own included: frozen first (SIGSTOP: it starts
    nothing more), its descendants' groups killed, then it."""
    import psutil

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    own = os.getpgrp()  # the child shares the refresh's group: that one is never killed whole
    for process in descendants:
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if (group := os.getpgid(process.pid)) != own:
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            process.kill()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


_children = threading.local()
_all: list[ReaderChild] = []
_all_lock = threading.Lock()


def _thread_child(settings: Settings) -> ReaderChild:
    child = getattr(_children, "child", None)
    limits = Limits.from_settings(settings)
    if child is None or child.limits != limits:
        if child is not None:
            child.stop()
        child = _children.child = ReaderChild(limits)
    return child


def warm_reader(settings: Settings) -> None:
    """Start this thread's reading child now (it imports the readers, ~0.5 s, while the caller goes on)."""
    if settings.reader_isolation:
        child = _thread_child(settings)
        if child.process is None:
            child._start()


def read_contained(source: Source, settings: Settings) -> ParseOutcome:
    """`read_source`, in this thread's child process when the file's kind is isolated and isolation is on."""
    (outcome,) = read_all_contained([source], settings)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def read_all_contained(sources: list[Source], settings: Settings) -> list[ParseOutcome | Exception]:
    """Each source read as `read_contained` reads it, in order; an exception its reader raised (or, in-process, an
    OSError) stands in its place, for the caller to make an item of."""
    from tasks.parse import read_source

    outcomes: list[ParseOutcome | Exception | None] = [None] * len(sources)
    contained = [n for n, s in enumerate(sources) if settings.reader_isolation and s.kind in ISOLATED]
    for n in sorted(set(range(len(sources))) - set(contained)):
        source = sources[n]
        try:
            _inject(os.environ.get(FAULT_VARIABLE), source, settings.reader_memory_mb)  # in this process: it dies
            outcomes[n] = read_source(source, settings)
        except Exception as exc:
            outcomes[n] = exc
    if contained:
        child = _thread_child(settings)
        for n, outcome in zip(contained, child.read_many([sources[n] for n in contained], settings), strict=True):
            outcomes[n] = outcome
    return outcomes  # type: ignore[return-value]


def stop_children() -> None:
    """Stop every reading child this process started (the refresh's end; a test's)."""
    with _all_lock:
        children, _all[:] = list(_all), []
    for child in children:
        child.stop()


if __name__ == "__main__":  # the child: python -m tasks.runtime.reader_child REQUESTS_FD ANSWERS_FD MEMORY_MB
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), int(sys.argv[3]))

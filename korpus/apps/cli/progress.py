"""What `korpus refresh` shows while it runs: progress, not library logs.

On a terminal a live display (rich) shows files settled of those planned, pages OCR'd, minutes of audio heard,
chunks indexed, when the first chunk became searchable and an estimate of the time left; without one (cron, CI, a
pipe) the same figures come as a plain line every `PLAIN_EVERY` seconds, with no control codes. The flow's counts
are read from `flows.progress` (the flow runs in this process).

Library logs — Dask's cluster lines, Prefect's per-task lines, the flow's own INFO — go to `<data>/logs/refresh.log`
(rotated); warnings and errors still reach the terminal (Dask's and Tornado's from ERROR up: its "event loop was
unresponsive" on a loaded machine is not the user's concern). `korpus refresh -v` keeps every log line on the
terminal, as before, with the progress as plain lines. The Prefect UI keeps every milestone and log it had.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO

from rich.console import Console, Group
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from flows import progress as refresh_progress
from flows.progress import RefreshProgress

PLAIN_EVERY = 30.0
"""Seconds between two progress lines without a terminal."""
LOG_FILE = Path("logs") / "refresh.log"
"""Under the data directory."""
NOISY = ("distributed", "tornado", "asyncio")
"""Libraries whose warnings stay in the log file: only their errors reach the terminal."""


def clock(seconds: float) -> str:
    """`1 h 02 min`, `4 min 05 s`, `12 s`."""
    whole = round(seconds)
    if whole >= 3600:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    if whole >= 60:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole} s"


def plain_line(p: RefreshProgress) -> str:
    """The counts as one line of text."""
    parts = [f"[{clock(p.elapsed)}] files {p.settled}/{p.planned}"]
    if p.pages_planned:
        parts.append(f"pages OCR'd {p.pages_done}/{p.pages_planned}")
    if p.audio_planned:
        parts.append(f"audio {p.audio_heard / 60:.1f}/{p.audio_planned / 60:.1f} min")
    parts.append(f"chunks indexed {p.chunks_indexed}")
    parts.append(_first(p))
    if p.documents_done:
        parts.append("documents done; documents about the collection next")
    elif (left := p.left()) is not None:
        parts.append(f"about {clock(left)} left")
    return " · ".join(parts)


def _first(p: RefreshProgress) -> str:
    if p.first_searchable is None:
        return "nothing new searchable yet"
    return f"first searchable after {p.first_searchable:.1f} s"


def live_view(p: RefreshProgress | None) -> Group | Spinner:
    """The display of a terminal: a bar each for files, OCR pages and audio (those with work), then the chunks and
    the estimate."""
    if p is None:
        return Spinner("dots", text="finding files and comparing them with the catalog…")
    grid = Table.grid(padding=(0, 2))
    rows = [("files", p.settled, p.planned, f"{p.settled}/{p.planned}")]
    if p.pages_planned:
        rows.append(("pages OCR'd", p.pages_done, p.pages_planned, f"{p.pages_done}/{p.pages_planned}"))
    if p.audio_planned:
        heard = f"{p.audio_heard / 60:.1f}/{p.audio_planned / 60:.1f} min"
        rows.append(("audio heard", p.audio_heard, p.audio_planned, heard))
    for name, done, planned, shown in rows:
        grid.add_row(name, ProgressBar(total=max(planned, 1), completed=done, width=40), shown)
    grid.add_row("chunks indexed", "", str(p.chunks_indexed))
    if p.documents_done:
        after = Spinner("dots", text="documents done; documents about the collection, retention, the mirror…")
    else:
        left = p.left()
        after = Text(f"{clock(p.elapsed)} so far" + (f", about {clock(left)} left" if left is not None else ""))
    return Group(grid, Text(_first(p)), after)


class PlainLines:
    """Progress without a terminal: a line when the plan is known, one every `PLAIN_EVERY` seconds while the counts
    change, and one when the documents are done."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.last, self.printed, self.seen, self.done = "", 0.0, False, False

    def tick(self, p: RefreshProgress | None, now: float) -> None:
        if p is None:
            return
        due = not self.seen or (p.documents_done and not self.done) or now - self.printed >= PLAIN_EVERY
        if due and (line := plain_line(p)) != self.last:
            print(line, file=self.out, flush=True)
            self.last, self.printed = line, now
        self.seen, self.done = True, p.documents_done


class _Terminal(logging.Handler):
    """Warnings and errors onto the terminal, above the live display (printed through its console)."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.WARNING)
        self.console = console
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not record.name.startswith(NOISY)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(self.format(record), markup=False, highlight=False, soft_wrap=True)
        except Exception:
            self.handleError(record)


def _to_terminal(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return isinstance(handler, logging.StreamHandler) and stream in (sys.stderr, sys.stdout, sys.__stderr__)


@contextmanager
def logs_to_file(path: Path, console: Console) -> Iterator[Path]:
    """While inside: every log record to `path` (rotated at 20 MB, 3 kept), warnings and errors (`NOISY` libraries'
    errors only) to the terminal; the handlers as they were afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    into_file = logging.handlers.RotatingFileHandler(path, maxBytes=20 * 2**20, backupCount=3, encoding="utf-8")
    into_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    terminal = _Terminal(console)
    changed: list[tuple[logging.Logger, list[logging.Handler]]] = []
    loggers = [logging.getLogger()] + [
        lg for lg in list(logging.Logger.manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    for logger in loggers:
        if any(_to_terminal(h) for h in logger.handlers):
            changed.append((logger, list(logger.handlers)))
            logger.handlers = [h for h in logger.handlers if not _to_terminal(h)] + [into_file, terminal]
    root = logging.getLogger()
    if not any(lg is root for lg, _ in changed):
        changed.append((root, list(root.handlers)))
        root.handlers = [*root.handlers, into_file, terminal]
    try:
        yield path
    finally:
        for logger, handlers in changed:
            logger.handlers = handlers
        into_file.close()


@contextmanager
def shown(data: Path, verbose: bool = False, out: IO[str] | None = None) -> Iterator[None]:
    """Show the refresh started inside as it runs (a live display on a terminal, plain lines elsewhere), its library
    logs in `data`/logs/refresh.log unless `verbose`."""
    out = out or sys.stdout
    terminal = out.isatty() and not verbose
    console = Console(file=out, force_terminal=terminal or None, no_color=not terminal, highlight=False)
    before = refresh_progress.current()
    stop = threading.Event()

    def mine() -> RefreshProgress | None:
        found = refresh_progress.current()
        return found if found is not before else None

    lines = PlainLines(out)

    def plain() -> None:
        while not stop.wait(1.0):
            lines.tick(mine(), time.monotonic())

    with logs_to_file(data / LOG_FILE, console) if not verbose else nullcontext():
        if terminal:
            from rich.live import Live

            with Live(console=console, get_renderable=lambda: live_view(mine()), refresh_per_second=4):
                yield
        else:
            watcher = threading.Thread(target=plain, name="korpus-progress", daemon=True)
            watcher.start()
            try:
                yield
            finally:
                stop.set()
                watcher.join()
                lines.tick(mine(), time.monotonic())  # the refresh's last counts, however short it was

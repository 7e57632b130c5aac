"""How far the running refresh is, for the terminal (`korpus refresh`, korpus/apps/cli/progress.py shows it).

The flow keeps one `RefreshProgress` up to date as its work comes in — files settled of those planned, pages OCR'd,
seconds of audio heard, chunks indexed, when the first chunk became searchable — at the same points where it updates
its Prefect progress artifacts (the UI's milestones stay as they are). The flow runs in the process that started it
(`run_refresh`), so the terminal reads the same object from a display thread; nothing is sent anywhere.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class RefreshProgress:
    """Counts of one refresh, written by the flow's thread, read by a display (ints and floats: each read is whole)."""

    planned: int = 0
    """Files to read (new and changed); the rest were unchanged."""
    settled: int = 0
    """Of those: indexed, quarantined, held back for unread pages, or changed during the run."""
    pages_planned: int = 0
    """Pages sent to OCR so far (a document's pages are known once it is read)."""
    pages_done: int = 0
    audio_planned: float = 0.0
    """Seconds of the recordings planned for transcription so far."""
    audio_heard: float = 0.0
    chunks_indexed: int = 0
    first_searchable: float | None = None
    """Seconds from the refresh's start to its first searchable chunk."""
    documents_done: bool = False
    """Every document's work is over; the documents about the collection, retention and the mirror follow."""
    started: float = field(default_factory=time.perf_counter)
    _heard: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def heard(self, source_id: str, seconds: float) -> None:
        """A recording is heard up to `seconds` (its windows come back in any order: only progress counts)."""
        before = self._heard.get(source_id, 0.0)
        if seconds > before:
            self._heard[source_id] = seconds
            self.audio_heard += seconds - before

    def indexed(self, chunks: int) -> None:
        self.chunks_indexed += chunks
        if chunks and self.first_searchable is None:
            self.first_searchable = self.elapsed

    def left(self) -> float | None:
        """Seconds still to go, estimated from the rate so far of the slowest kind of work (files, pages, audio);
        None until there is a rate to go by."""
        estimates = []
        for done, planned in (
            (self.settled, self.planned),
            (self.pages_done, self.pages_planned),
            (self.audio_heard, self.audio_planned),
        ):
            if planned and done:
                estimates.append(self.elapsed * (planned - done) / done)
        return max(estimates) if estimates else None


_lock = threading.Lock()
_current: RefreshProgress | None = None


def begin(planned: int, started: float | None = None) -> RefreshProgress:
    """A refresh's counts once its plan is known, timed from `started` (`time.perf_counter()`; default now), made the
    ones `current` returns."""
    global _current
    with _lock:
        _current = RefreshProgress(planned=planned, started=time.perf_counter() if started is None else started)
        return _current


def current() -> RefreshProgress | None:
    """The counts of the refresh this process started last (None before any)."""
    with _lock:
        return _current

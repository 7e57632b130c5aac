"""Transient faults: what is worth trying again, how often, and how long to wait.

A service restarting (vLLM answering 503, a dropped connection, a timeout) or an engine process killed from
outside (Tesseract by the OOM killer) says nothing about the page. Such a fault is a `TransientError`; the
stage retries it with exponential backoff (`with_retries`), and a page still failing after the retries is left
*pending*: the refresh does not publish its document, the previous version stays served, and the next refresh
reads the page again (finished pages come from the page cache). Only a page that keeps failing for
`KORPUS_PENDING_MAX_REFRESHES` refreshes is quarantined `ocr-failed`. Quarantine is for pages that were read and
found bad, or that can never be read.

Every retry is counted (`counting_retries`), so a refresh summary says how many it took.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

logger = logging.getLogger("korpus.retry")
T = TypeVar("T")


class TransientError(RuntimeError):
    """A failure that may not happen again: a timeout, a 5xx, a refused or dropped connection, a killed process.

    `retry_after` is the wait the service asked for (HTTP Retry-After), if any.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` calls in all; the wait before call n+1 is `backoff · 2ⁿ⁻¹` (±20 %), at most `max_delay`."""

    attempts: int = 4
    backoff: float = 0.5
    max_delay: float = 10.0

    @classmethod
    def from_settings(cls, settings: object) -> RetryPolicy:
        return cls(
            attempts=getattr(settings, "retry_attempts", cls.attempts),
            backoff=getattr(settings, "retry_backoff", cls.backoff),
            max_delay=getattr(settings, "retry_max_delay", cls.max_delay),
        )

    def delay(self, failures: int, asked: float | None = None) -> float:
        wait = self.backoff * 2 ** (failures - 1) * random.uniform(0.8, 1.2)
        if asked is not None:
            wait = max(wait, asked)
        return min(wait, self.max_delay)


_retries: ContextVar[list[int] | None] = ContextVar("korpus_retries", default=None)


@contextmanager
def counting_retries() -> Iterator[list[int]]:
    """Count the retries made inside the block (this thread or task): `with counting_retries() as n: …; n[0]`."""
    counter = [0]
    token = _retries.set(counter)
    try:
        yield counter
    finally:
        _retries.reset(token)


def with_retries(call: Callable[[], T], policy: RetryPolicy, what: str) -> T:
    """`call()`, again after each `TransientError` until `policy.attempts` calls were made; the last error is
    raised as it came. Each retry is logged (what, which attempt, the error, the wait) and counted."""
    failures = 0
    while True:
        try:
            return call()
        except TransientError as exc:
            failures += 1
            if failures >= policy.attempts:
                raise
            wait = policy.delay(failures, exc.retry_after)
            logger.warning("%s: %s — retry %d/%d in %.1f s", what, exc, failures, policy.attempts - 1, wait)
            counter = _retries.get()
            if counter is not None:
                counter[0] += 1
            time.sleep(wait)

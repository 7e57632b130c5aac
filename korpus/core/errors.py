"""The typed errors every floor may raise or catch, defined once at the bottom (each stage's own errors stay with
the stage that raises them: `UnreadableSourceError` in tasks/readers, `IndexWriteError` in tasks/index, …)."""

from __future__ import annotations


class KorpusError(RuntimeError):
    """Something korpus says to a person: the message names what is wrong and what to do."""


class ModelMissingError(KorpusError):
    """A model korpus needs is not on disk; the message says which and how to provide it."""

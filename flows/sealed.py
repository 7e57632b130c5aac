"""Task inputs that Prefect passes along without walking through them (flows/refresh_tasks.py, refresh_stream.py)."""

from __future__ import annotations

from functools import wraps
from typing import Any


class Sealed:
    """A task input Prefect passes along without walking through it.

    Prefect visits every task parameter, recursively (lists, dicts, dataclasses, pydantic models), looking for
    futures and states to resolve — for a group of documents with their pages and chunks, and for the settings
    handed to every task, that walk was ~3 s of a ~45 s 1,000-letter refresh (benchmarks/README.md, scale.py).
    korpus never passes a future as an input (the flow hands results on itself, flows/refresh_stream.py), so its
    inputs travel sealed: a plain object Prefect treats as a leaf. `opened` unseals them inside the task; an
    unsealed value passes through as it is (a test or `embed.fn` calling the function directly)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:  # what the Prefect UI shows for the parameter
        return f"<{type(self.value).__name__}>"


def _unsealed(value: Any) -> Any:
    return value.value if isinstance(value, Sealed) else value


def opened(fn: Any) -> Any:
    """A task function taking its inputs sealed or not (`Sealed`)."""

    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return fn(*map(_unsealed, args), **{name: _unsealed(value) for name, value in kwargs.items()})

    return run


def sealed(**parameters: Any) -> dict[str, Any]:
    """Task parameters, each `Sealed`."""
    return {name: Sealed(value) for name, value in parameters.items()}

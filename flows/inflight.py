"""Futures on the Dask cluster, each with the handler its result (or its failure) goes to: the streamed refresh's
engine (flows/refresh_stream.py)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from typing import Any

import dask
import distributed
import numpy as np
from prefect import get_run_logger
from prefect_dask import DaskTaskRunner

from flows.sealed import sealed
from tasks.readers.base import failure


class Inflight:
    """Futures on the Dask cluster, each with the handler its result goes to. `run()` hands results over as they
    complete, in the caller's thread; a handler may submit more work, and `run()` returns when nothing is left."""

    def __init__(self, runner: DaskTaskRunner) -> None:
        self._runner = runner
        self._completed = distributed.as_completed(loop=runner.client.loop)
        self._then: dict[str, tuple[Any, Callable[[Any], None]]] = {}

    def submit(
        self,
        stage: Any,
        then: Callable[[Any], None],
        annotations: dict[str, Any] | None = None,
        failed: Callable[[Exception], None] | None = None,
        **parameters: Any,
    ) -> None:
        """`annotations` are Dask's (`resources`, `priority`: higher runs first among queued tasks). `failed` takes
        the exception of a task that failed past its retries — work on one file turns it into that file's
        quarantine item; without it (embedding, which every document needs) the failure fails the refresh."""
        with dask.annotate(**annotations) if annotations else nullcontext():
            future = self._runner.submit(stage, parameters=sealed(**parameters))
        self._then[future.wrapped_future.key] = (future, then, failed)
        self._completed.add(future.wrapped_future)

    def threads(self) -> int:
        """Worker threads on the cluster now (2 when the scheduler cannot say)."""
        try:
            return max(1, sum(self._runner.client.nthreads().values()))
        except Exception:  # a cluster that does not answer: the caller's own work will fail and say so
            return 2

    def submit_in_slices(
        self,
        stage: Any,
        then: Callable[[np.ndarray], None],
        items: list,
        size: int,
        name: str,
        annotations: dict[str, Any] | None = None,
        **parameters: Any,
    ) -> None:
        """`stage` over `items` (its parameter `name`) in slices of at most `size`, each its own task, so one large
        document's chunks are embedded on every worker thread and not in one long run; `then` gets the slices'
        arrays joined in order once the last is in. A failed slice fails like `submit` without `failed`."""
        parts = [items[at : at + size] for at in range(0, len(items), size)] or [items]
        results: list[np.ndarray | None] = [None] * len(parts)

        def one(n: int, result: np.ndarray) -> None:
            results[n] = result
            if all(r is not None for r in results):
                then(results[0] if len(results) == 1 else np.concatenate(results))

        for n, part in enumerate(parts):
            self.submit(stage, partial(one, n), annotations=annotations, **{name: part}, **parameters)

    def run(self) -> None:
        for finished in self._completed:
            future, then, failed = self._then.pop(finished.key)
            try:
                result = future.result()
            except Exception as exc:
                if failed is None:
                    raise
                get_run_logger().warning("a task failed past its retries; its file is quarantined: %s", failure(exc))
                failed(exc)
                continue
            then(result)

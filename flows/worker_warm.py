"""A Dask worker that is warm before its first task: `dask worker --preload flows.worker_warm` (the topology
starts its workers so; a cluster of the user's own may too).

A refresh's first documents wait on whatever the first task on a fresh worker pays for: importing the flow's tasks
and readers, and loading the embedding model (~1 s and ~3 s here). Measured on the topology (benchmarks/
topology_first_searchable.py), a refresh of 1,000 letters had its first document searchable 17.9 s after it began,
of which the first read batch took 4.3 s and the first embedding 5 s. So the worker does what it can as it starts,
in a thread of its own (its start is not held up): imports the tasks, loads the embedder the refresh's `embed` task
asks for (same model, same cores per task — `shared_embedder` keeps one per process) and runs it once, and starts
each task thread's reading child (tasks/runtime/reader_child.py, kept by the thread across tasks). A model that
cannot be loaded is logged and left to the task, which says what is missing."""

from __future__ import annotations

import logging
import threading
from typing import Any

from korpus.core.settings import Settings

log = logging.getLogger("korpus.worker")


def warm(nthreads: int) -> Settings:
    """Import what a refresh's tasks run and load the embedder an `embed` task on a worker of `nthreads` threads
    uses; the settings it was loaded by."""
    from flows.refresh_tasks import load_embedder  # the tasks, the readers and the gate they import
    from korpus.core.model_store import embed_model_path
    from tasks.retrieval.embedding import token_counter

    settings = Settings()
    load_embedder(settings, nthreads)  # the embed task's own thread count: the same cached embedder
    token_counter(str(embed_model_path(settings)))
    return settings


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: warm this worker in the background."""

    def run() -> None:
        try:
            settings = warm(worker.state.nthreads)
            from tasks.runtime.reader_child import warm_reader

            # a task thread's reading child (one a thread, kept across tasks) started in that thread, best effort
            executor = worker.executors.get("default")
            for _ in range(worker.state.nthreads if executor is not None else 0):
                executor.submit(warm_reader, settings)
            log.info("korpus: worker warm (tasks imported, embedding model loaded)")
        except Exception as exc:  # the first task then pays for it, and reports what is wrong
            log.warning("korpus: the worker could not warm up: %s", exc)

    threading.Thread(target=run, name="korpus-warm", daemon=True).start()

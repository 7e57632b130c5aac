"""The deployments' entrypoints (deployments/prefect.yaml): korpus's flows imported as the package modules they are.

Prefect runs a `path.py:flow` entrypoint as a script: it puts the script's folder first on `sys.path` and names the
module after the file. An entrypoint in flows/ therefore made every file there a top-level module — flows/events.py
shadowed the `events` package opensearch-py imports, so a deployed refresh with KORPUS_BACKEND=opensearch failed — and
the flow's own functions were pickled for Dask as `corpus_refresh.…`, a module a Dask worker process cannot import
(«Error during deserialization of the task graph»). Found by the production topology (tasks/runtime/topology.py).
From here the flows are `flows.corpus_refresh` and the rest, importable wherever the repository is on the path.
"""

from flows.corpus_refresh import corpus_refresh
from flows.quarantine_review import quarantine_review
from flows.reindex import reindex

__all__ = ["corpus_refresh", "quarantine_review", "reindex"]

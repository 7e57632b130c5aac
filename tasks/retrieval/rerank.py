"""Optional cross-encoder rerank of the fused top-N (`KORPUS_RERANK_MODEL`: any sentence-transformers CrossEncoder
folder, e.g. a multilingual MiniLM or bge-reranker). No reranker weights ship with korpus: none exist offline
here, so the code path is tested with a tiny CrossEncoder built in the test. Loaded lazily, offline only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from korpus.core.model_store import ModelMissingError, set_offline_switches


class Reranker:
    """(query, passage) pairs → relevance scores, higher is better.

    >>> Reranker(Path("/models/bge-reranker-v2-m3")).scores("ремонт кровли", ["...", "..."])
    """

    def __init__(self, model_path: Path, batch_size: int = 16) -> None:
        self.model_path = Path(model_path)
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            if not (self.model_path / "config.json").is_file():
                raise ModelMissingError(
                    f"rerank model not found at {self.model_path} (KORPUS_RERANK_MODEL): point it at a local "
                    "sentence-transformers CrossEncoder folder; model hubs are never contacted"
                )
            set_offline_switches()
            from sentence_transformers import CrossEncoder

            self._model = CrossEncoder(str(self.model_path), device="cpu", local_files_only=True)

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        self.warm_up()
        with self._lock:
            values = self._model.predict(
                [(query, p) for p in passages], batch_size=self.batch_size, show_progress_bar=False
            )
        return [float(v) for v in values]


@lru_cache(maxsize=2)
def shared_reranker(model_path: str) -> Reranker:
    return Reranker(Path(model_path))

"""`reindex`: re-embed every current chunk with another embedding model, from the stored text (no re-parsing, no
OCR), then swap the new vectors in. Queries keep the old vectors until the swap. `korpus reindex` runs the same
function; the flow adds a progress artifact and is deployed from deployments/prefect.yaml."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from korpus.core.model_store import embed_model_path, set_offline_switches
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import Embedder


def reindex_vectors(
    settings: Settings, embed_model: Path, batch: int, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    """Embed the index's current chunks with the model at `embed_model` and swap them in; the report names the
    model replaced. Raises ModelMissingError, ValueError or IndexMismatchError with a message for a person."""
    embedder = Embedder(embed_model_path(Settings(data=settings.data, embed_model=embed_model)), batch)
    with SqliteIndex(settings.index_path) as index:
        return index.reindex_vectors(embedder.name, embedder.dims, embedder.embed_passages, batch, progress)


@flow(name="reindex")
def reindex(embed_model: str, data: str | None = None, batch: int = 64) -> dict[str, Any]:
    """Re-embed the index at `data` with the sentence-transformers folder `embed_model`; afterwards set
    KORPUS_EMBED_MODEL to that folder so queries use the same model."""
    set_offline_switches()
    settings = Settings(data=Path(data)) if data else Settings()
    artifact = create_progress_artifact(progress=0.0, description="chunks embedded")

    def progress(done: int, total: int) -> None:
        update_progress_artifact(
            artifact, progress=100.0 * done / max(total, 1), description=f"chunks embedded: {done}/{total}"
        )

    report = reindex_vectors(settings, Path(embed_model), batch, progress)
    update_progress_artifact(artifact, progress=100.0, description=f"chunks embedded: {report['chunks']}")
    return report

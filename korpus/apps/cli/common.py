"""What every `korpus` command shares: the --data option, the settings, and a clear error with exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from korpus.core.settings import Settings

DataOption = Annotated[
    Path | None, typer.Option("--data", help="Data directory (default: KORPUS_DATA or ./korpus-data).")
]


def _settings(data: Path | None) -> Settings:
    return Settings(data=data) if data is not None else Settings()


def _indexed(data: Path | Settings | None) -> Settings:
    """The settings, after checking there is an index to read (a clear error otherwise)."""
    settings = data if isinstance(data, Settings) else _settings(data)
    if not settings.index_path.is_file():
        _fail(f"no index at {settings.index_path}: run `korpus refresh --root DIR` first")
    return settings


def _stateless(settings: Settings) -> bool:
    """This machine has no catalog file, and the catalog on PostgreSQL with the cluster answers instead (a search
    replica: `korpus search` and `korpus cite` read what `korpus serve` reads there)."""
    from tasks.index.registry import serves_without_file

    return serves_without_file(settings) and not settings.index_path.is_file()


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)

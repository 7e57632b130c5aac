"""`korpus serve`: the HTTP API and the review workbench."""

from __future__ import annotations

from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _settings


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
    data: DataOption = None,
) -> None:
    """HTTP API: /search, /exact, /count, /sources/{id}, /health, /tools, OpenAPI docs at /docs."""
    import uvicorn

    from korpus.apps.api import create_app

    uvicorn.run(create_app(_settings(data)), host=host, port=port)

"""`korpus meta`: the documents korpus writes about the collection, per access scope."""

from __future__ import annotations

from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _fail, _indexed
from korpus.core.settings import parse_scopes


def meta_cmd(
    kind: Annotated[str, typer.Argument(help="toc | chronology | persons | organisations")] = "toc",
    scopes: Annotated[
        str | None, typer.Option("--scopes", help="Access scopes, comma-separated (default: settings).")
    ] = None,
    data: DataOption = None,
) -> None:
    """Print a meta-document about the collection — one per access scope the scopes allow (docs/meta.md)."""
    from tasks.index.sqlite import SqliteIndex
    from tasks.meta.publish import read_meta

    settings = _indexed(data)
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    with SqliteIndex(settings.index_path) as index:
        try:
            documents = read_meta(index, kind, scope_list)
        except ValueError as exc:
            _fail(str(exc))
    if not documents:
        _fail(f"no {kind} meta-document for scopes {', '.join(scope_list)}: refresh with KORPUS_META_DOCUMENTS=true")
    for document in documents:
        typer.echo(f"# {document['source_id']} (доступ: {document['access']}, собрано {document['built_at']})")
        for number, part in enumerate(document["parts"], start=1):
            typer.echo(f"\n## часть {number}\n{part}")
        typer.echo("")

"""`korpus catalog sync|status`: the catalog's serving part on PostgreSQL (KORPUS_CATALOG_URL,
tasks/index/pg_catalog.py) — what lets `korpus serve` check every hit without a file of its own."""

from __future__ import annotations

import json

import typer

from korpus.apps.cli.common import DataOption, _fail, _settings

catalog_app = typer.Typer(no_args_is_help=True, help="The catalog's serving part on PostgreSQL (KORPUS_CATALOG_URL).")


@catalog_app.command("sync")
def sync_cmd(data: DataOption = None) -> None:
    """Bind the catalog file to the server KORPUS_CATALOG_URL names (a refresh does this too) and bring the server up
    to date: what an outage held back, or the whole catalog when the server holds another or none."""
    from tasks.index.pg_catalog import CatalogUnavailable
    from tasks.index.sqlite import SqliteIndex

    settings = _settings(data)
    if not settings.catalog_url:
        _fail("KORPUS_CATALOG_URL is not set (postgresql://user@host:5432/db)")
    if not settings.index_path.is_file():
        _fail(f"no catalog at {settings.index_path}: run `korpus refresh --root DIR` first")
    try:
        with SqliteIndex(settings.index_path) as index:
            written = index.bind_serving_catalog(settings.catalog_url)
    except CatalogUnavailable as exc:
        _fail(str(exc))
    typer.echo(f"catalog on PostgreSQL up to date: {written} chunk state(s) written")


@catalog_app.command("status")
def status_cmd(data: DataOption = None) -> None:
    """What the server holds (chunks served, the generation it reflects, each mirror's marks) as JSON; exit 3 when it
    cannot answer."""
    from tasks.index.pg_catalog import CatalogUnavailable, PgCatalog

    settings = _settings(data)
    if not settings.catalog_url:
        _fail("KORPUS_CATALOG_URL is not set (postgresql://user@host:5432/db)")
    catalog = PgCatalog(settings.catalog_url)
    try:
        stats, last, _history = catalog.health_figures()
        meta = {k: v for k, v in catalog.meta().items() if not k.startswith("file:")}
    except CatalogUnavailable as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(3) from None
    finally:
        catalog.close()
    typer.echo(json.dumps({**stats, "meta": meta, "last_refresh": (last or {}).get("finished_at")}, indent=2))

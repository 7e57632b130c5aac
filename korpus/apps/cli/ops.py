"""`korpus` commands for running korpus: health and status, retention (gc), the OpenSearch mirror."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _fail, _indexed, _settings
from korpus.core.settings import Settings


def status(
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Health (ok, or degraded with its reasons: exit 3), the last refresh, open quarantine by reason, the index,
    models, and whether Prefect and Dask answer."""
    from korpus.apps.status import collect_status

    report = collect_status(_settings(data))
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        for key, value in report.items():
            if isinstance(value, dict):
                typer.echo(f"{key}:")
                for inner, item in value.items():
                    typer.echo(f"  {inner:>18}: {item}")
            elif isinstance(value, list):
                typer.echo(f"{key}:")
                for item in value:
                    typer.echo(f"  - {item}")
            else:
                typer.echo(f"{key}: {value}")
    if report["health"] != "ok":
        raise typer.Exit(3)  # degraded: a cron job or a monitor sees it without parsing the text


def gc(
    older_than: Annotated[
        float | None, typer.Option("--older-than", help="Days (default KORPUS_RETENTION_DAYS).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    vacuum: Annotated[bool, typer.Option("--vacuum", help="Then rewrite the index file to its size.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    data: DataOption = None,
) -> None:
    """Remove versions superseded or removed longer ago than the retention period: chunks, terms, vectors, pages,
    page-cache entries, converted PDFs, decoded audio, searchable copies, transcripts and evidence nobody needs."""
    from tasks.index.retention import collect_garbage
    from tasks.runtime.refresh_lock import RefreshLocked

    settings = _settings(data)
    try:
        report = collect_garbage(settings, older_than, dry_run, vacuum=vacuum)
    except RefreshLocked as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(4) from None
    if settings.backend == "opensearch" and report["chunks"] and not dry_run:
        report["opensearch"] = _mirror_now(settings)  # what the catalog let go leaves the cluster too
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    verb = "would remove" if dry_run else "removed"
    typer.echo(
        f"{verb} {report['versions']} versions ({report['chunks']} chunks) older than "
        f"{report['retention_days']:g} days and {report.get('files', 0)} files "
        f"({report.get('file_bytes', 0) / 1e6:.1f} MB); data directory {report['bytes_before'] / 1e6:.1f} MB "
        f"→ {report['bytes_after'] / 1e6:.1f} MB"
    )


def _mirror_now(settings: Settings) -> dict:
    """One sync of the catalog to the cluster; a cluster that does not answer leaves the mirror pending (said)."""
    from functools import partial

    from tasks.index.opensearch import mirror_or_pending
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import configured_embedder

    with SqliteIndex(settings.index_path) as index:
        report = mirror_or_pending(settings, index, partial(configured_embedder, settings))
    if report.get("pending"):
        typer.echo(f"OpenSearch mirror left pending (korpus sync-opensearch): {report['error']}", err=True)
    return report


def sync_opensearch_cmd(
    data: DataOption = None,
    full: Annotated[
        bool, typer.Option("--full", help="Compare every chunk with the cluster: `korpus opensearch reconcile`.")
    ] = False,
) -> None:
    """Mirror the catalog to KORPUS_OPENSEARCH_URL now (a refresh and every review decision do it themselves when
    KORPUS_BACKEND=opensearch): what changed since the last sync — missing chunks indexed from stored text and
    vectors, lifecycles and labels switched, removed ones deleted; --full compares everything."""
    sync_opensearch(data, full)


def sync_opensearch(data: Path | None, full: bool) -> None:
    """One sync (`full`: a reconcile) of the catalog under `data` to the configured cluster, and what it sent."""
    from functools import partial

    from korpus.core.errors import ModelMissingError
    from tasks.index.backend import IndexMismatchError
    from tasks.index.opensearch import opensearch_index
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import configured_embedder
    from tasks.runtime.retry import TransientError

    settings = _indexed(data)
    try:
        cluster = opensearch_index(settings, partial(configured_embedder, settings))
        with SqliteIndex(settings.index_path) as index:
            report = cluster.sync_from(index, full=full)
    except (ValueError, TransientError, IndexMismatchError, ModelMissingError) as exc:
        _fail(str(exc))
    typer.echo(
        f"{cluster.alias}: {report['indexed']} indexed, {report['updated']} updated, {report['deleted']} deleted "
        f"({report['compared']} compared)"
    )


def prefect_cmd(
    action: Annotated[str, typer.Argument(help="status (default), start or stop")] = "status",
) -> None:
    """korpus's local Prefect server, where every refresh is recorded (UI at its address): started by the first
    refresh and reused by the next ones; PREFECT_API_URL, when set, is used instead and korpus starts nothing."""
    import os

    from korpus.core.settings import Settings
    from tasks.runtime.prefect_server import ensure_server, prefect_home, running_server, stop_server

    if os.environ.get("PREFECT_API_URL") and action != "stop":
        typer.echo(f"PREFECT_API_URL is set: flows run on {os.environ['PREFECT_API_URL']} (korpus starts no server)")
        return
    if action == "start":
        try:
            ensure_server(Settings().prefect_port)
        except RuntimeError as exc:
            _fail(str(exc))
    elif action == "stop":
        typer.echo("stopped" if stop_server() else "no local Prefect server was running")
        return
    elif action != "status":
        _fail(f"unknown action {action!r}: status, start or stop")
    state = running_server()
    if state is None:
        typer.echo(f"no local Prefect server is running (PREFECT_HOME {prefect_home()}); the next refresh starts one")
        return
    typer.echo(f"Prefect UI: {state['ui_url']}  (API {state['api_url']}, pid {state['pid']}, home {state['home']})")

"""`korpus review …`: manual quarantine review from the command line — list, show, release, reject, re-OCR, edit.
Every decision goes through `tasks.review.actions.apply_decision` (the web page's path too) and is recorded."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from korpus.apps.cli.common import DataOption, _fail, _settings
from korpus.core.model_store import ModelMissingError, set_offline_switches

review_app = typer.Typer(no_args_is_help=True, help="Manual quarantine review; every decision is recorded.")
ReviewerOption = Annotated[
    str, typer.Option("--reviewer", envvar="KORPUS_REVIEWER", help="Who decides (default: $USER).")
]
NoteOption = Annotated[str, typer.Option("--note", help="Why; kept in the audit trail.")]


def _reviewer(value: str) -> str:
    return value or os.environ.get("USER") or "unknown"


@review_app.command("list")
def review_list(
    status: Annotated[str | None, typer.Option("--status", help="open | released | rejected | resolved")] = "open",
    data: DataOption = None,
) -> None:
    """Quarantine items (open ones by default), with reason codes."""
    from tasks.index.sqlite import SqliteIndex

    with SqliteIndex(_settings(data).index_path) as index:
        items = index.quarantine_items(status if status != "all" else None)
    if not items:
        typer.echo("nothing in quarantine" + (f" with status {status}" if status else ""))
    for item in items:
        where = f" лист {item['page']}" if item["page"] else (f" {item['t_start']:.0f}s" if item["t_start"] else "")
        typer.echo(
            f"{item['item_id']}  {item['status']:<8} {item['source_id']}{where}  {','.join(item['reasons'])}  "
            f"{item['detail']}"
        )


@review_app.command("show")
def review_show(item_id: str, data: DataOption = None) -> None:
    """One item: reasons, evidence, decisions so far."""
    from tasks.index.sqlite import SqliteIndex
    from tasks.review.actions import describe_item

    with SqliteIndex(_settings(data).index_path) as index:
        item = index.quarantine_item(item_id)
        found = index.current_source(item["source_id"]) if item is not None else None
    if item is None:
        _fail(f"no quarantine item {item_id!r}")
    typer.echo(describe_item(item))
    for page in found[1] if found else []:
        if page.layer_check is not None and (item["page"] is None or page.page == item["page"]):
            typer.echo(page_reading(page))


def page_reading(page: Any) -> str:
    """How a page whose layer was flagged was read: the decision and both scores."""
    check = page.layer_check
    flagged = ", ".join(check.layer_reasons) or "—"
    return (
        f"лист {page.page}: {check.decision} (layer score {check.layer_score}, OCR score {check.ocr_score}, "
        f"agreement {check.similarity}; flagged: {flagged})"
    )


def _decide(item_id: str, action: str, reviewer: str, note: str, data: Path | None, text: str | None = None) -> None:
    from tasks.review.actions import Action, ReviewError, apply_decision

    set_offline_switches()
    try:
        outcome = apply_decision(item_id, Action(action), _reviewer(reviewer), note, _settings(data), text=text)
    except (ReviewError, ModelMissingError) as exc:
        _fail(str(exc))
    typer.echo(f"{item_id}: {action} → {outcome}")


@review_app.command("release")
def review_release(item_id: str, note: NoteOption = "", reviewer: ReviewerOption = "", data: DataOption = None) -> None:
    """Index a refused chunk as an approved exception (length and text-quality rules lifted, nothing else)."""
    _decide(item_id, "release", reviewer, note, data)


@review_app.command("reject")
def review_reject(item_id: str, note: NoteOption = "", reviewer: ReviewerOption = "", data: DataOption = None) -> None:
    """Keep the item out of the index (a released chunk is withdrawn)."""
    _decide(item_id, "reject", reviewer, note, data)


@review_app.command("reocr")
def review_reocr(item_id: str, note: NoteOption = "", reviewer: ReviewerOption = "", data: DataOption = None) -> None:
    """OCR the item's page again (no cache) and index it if the result passes the gate."""
    _decide(item_id, "reocr", reviewer, note, data)


@review_app.command("retry")
def review_retry(item_id: str, note: NoteOption = "", reviewer: ReviewerOption = "", data: DataOption = None) -> None:
    """Read a file its reader crashed on (or could not read) again at the next refresh: after raising the limits
    (KORPUS_READER_MEMORY_MB, KORPUS_READER_SECONDS) or fixing what the detail names."""
    _decide(item_id, "retry", reviewer, note, data)


@review_app.command("edit")
def review_edit(
    item_id: str,
    text_file: Annotated[Path, typer.Option("--text-file", help="The page's corrected text (UTF-8); - for stdin.")],
    note: NoteOption = "",
    reviewer: ReviewerOption = "",
    data: DataOption = None,
) -> None:
    """Make your text the page's text (method `manual`): chunked, gated and indexed; korpus's reading stays in the
    audit trail. A later edit of the same page replaces this one."""
    text = sys.stdin.read() if str(text_file) == "-" else text_file.read_text(encoding="utf-8")
    _decide(item_id, "edit", reviewer, note, data, text=text)

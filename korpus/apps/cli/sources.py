"""`korpus` commands that take the archive in: the sample archive, a refresh and how it ended, the catalog, the chunks
and quarantine of what was read, one PDF through the OCR cascade."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from korpus.apps.cli.common import DataOption, _fail, _settings
from korpus.apps.cli.progress import LOG_FILE, shown
from korpus.apps.cli.review import page_reading, review_list
from korpus.core.model_store import (
    ModelMissingError,
    embed_model_path,
)


def sample(
    target: Annotated[Path, typer.Argument(help="Folder to write the sample archive into.")],
    archive_style: Annotated[
        bool, typer.Option("--archive-style", help="Write the archive-style evaluation corpus instead (version 1).")
    ] = False,
    changes: Annotated[
        bool, typer.Option("--changes", help="With --archive-style: rewrite its changed documents (version 2).")
    ] = False,
    questions: Annotated[
        Path | None, typer.Option("--questions", help="With --archive-style: write its labelled questions here.")
    ] = None,
) -> None:
    """Write the bundled sample Russian archive (PDFs, a scan, a recording, a manifest), or the archive-style
    evaluation corpus: refresh it, run `--changes`, refresh again, then `korpus eval` the questions."""
    if not archive_style:
        if changes or questions:
            _fail("--changes and --questions go with --archive-style")
        from corpora.sample_archive import write_sample_archive

        for path in write_sample_archive(target):
            typer.echo(path)
        return
    from corpora import archive_eval

    for path in archive_eval.apply_changes(target) if changes else archive_eval.write_archive(target):
        typer.echo(path)
    if questions is not None:
        typer.echo(f"{archive_eval.write_questions(questions)} questions → {questions}")


def refresh(
    root: Annotated[Path, typer.Option("--root", help="Source root holding the files and korpus.yaml.")],
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Hash every file, also those whose size, times and inode are unchanged."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Library logs (Dask, Prefect) on the terminal instead of <data>/logs/refresh.log."
        ),
    ] = False,
) -> None:
    """Run the corpus_refresh flow: new and changed files indexed, removed ones retired. A file whose size,
    modification and status-change times and inode match its last reading is not read again; --verify reads all.
    On a terminal it shows its progress live (elsewhere, a plain line every 30 s); library logs go to
    <data>/logs/refresh.log unless -v."""
    settings = _settings(data)
    if verify:
        settings = settings.model_copy(update={"verify": True})
    if not root.is_dir():
        _fail(f"source root {root} is not a folder")
    try:
        embed_model_path(settings)
    except ModelMissingError as exc:
        _fail(str(exc))
    from tasks.index.sqlite import IndexWriteError
    from tasks.runtime.refresh_lock import RefreshLocked
    from tasks.unchanged import forget, quick_refresh, remember, replayable, tree_digest

    root = root.resolve()
    try:
        summary = quick_refresh(root, settings)  # nothing changed since a refresh that did nothing: no flow run
        if summary is None:
            from flows.corpus_refresh import run_refresh

            forget(settings)
            # before the flow looks (a file changed while it runs is seen next time); not walked when never replayed
            tree = tree_digest(root) if replayable(settings) else None
            with shown(settings.data, verbose):
                summary = run_refresh(root, settings)
            remember(root, settings, summary, tree)
    except IndexWriteError as exc:
        _fail(str(exc))
    except RefreshLocked as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(4) from None
    except Exception as exc:  # the refresh itself, not a file (a file's failure is its quarantine item)
        typer.echo(
            f"error: {' '.join(str(exc).split())[:500]} — what was published stays served, removals and "
            "relabels were applied; see the Prefect flow run's logs",
            err=True,
        )
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False, indent=2))
    else:
        for key, value in summary.items():
            typer.echo(f"{key:>20}: {value}")
        typer.echo(refresh_verdict(summary))
        if not verbose and summary.get("flow_run_id"):
            typer.echo(f"library logs: {settings.data / LOG_FILE} (-v shows them here)")
    if (summary.get("opensearch") or {}).get("pending"):
        typer.echo(
            f"error: the catalog is refreshed but the OpenSearch mirror is not: {summary['opensearch']['error']}. "
            "The cluster still serves its previous state; the next refresh or `korpus sync-opensearch` completes it.",
            err=True,
        )
        raise typer.Exit(3)


def refresh_verdict(summary: dict) -> str:
    """The one line that says how the refresh ended: every file indexed or quarantined with a reason."""
    pending = summary.get("pending_sources") or 0
    line = (
        f"refresh complete: {summary.get('sources', 0)} files, {summary.get('chunks_indexed', 0)} chunks indexed, "
        f"{summary.get('quarantined', 0)} items quarantined with a reason (korpus review list)"
    )
    if pending:
        line += f", {pending} waiting for unread pages"
    meta = summary.get("meta_documents") or {}
    if isinstance(meta, dict) and meta.get("error"):
        line += f"; meta-documents failed and were withdrawn ({meta['error']})"
    return line


def chunks(
    source_id: Annotated[str, typer.Argument(help="A source id, e.g. договоры/договор.pdf.")],
    policy: Annotated[
        str | None, typer.Option("--policy", help="Re-chunk the stored pages with this policy (not indexed).")
    ] = None,
    data: DataOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Chunk records as JSON, with `tokens`.")] = False,
) -> None:
    """The chunks of one indexed source with locators and sizes; --policy previews another policy."""
    from tasks.contract.chunking import build_chunks
    from tasks.contract.policies import POLICIES
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import token_counter

    settings = _settings(data)
    if policy is not None and policy not in POLICIES:
        _fail(f"unknown policy {policy!r}: {', '.join(POLICIES)}")
    with SqliteIndex(settings.index_path) as index:
        found = index.current_source(source_id)
    if found is None:
        _fail(f"{source_id!r} has no current version in {settings.index_path}")
    source, pages = found
    try:
        count = token_counter(str(embed_model_path(settings)))
    except ModelMissingError as exc:
        _fail(str(exc))
    records, _ = build_chunks(source, pages, policy or settings.chunk_policy, count=count, language=settings.language)
    rows = [c.model_dump(mode="json") | {"tokens": count(c.text)} for c in records]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for page in pages:
        if page.layer_check is not None:
            typer.echo(page_reading(page))
    for row in rows:
        loc = row["locator"]
        where = f"лист {loc['page']}" if loc["page"] is not None else f"{loc['t_start']}-{loc['t_end']} s"
        path = " › ".join(row["section_path"])
        typer.echo(f"{row['chunk_id'][:10]}  {where:<10} [{loc['start']}:{loc['end']}]  {row['tokens']:>4} tok  {path}")


def sources(data: DataOption = None) -> None:
    """The catalog: every source version with its lifecycle — a container's children (attachments, a mailbox's
    letters, an archive's files) under it as a tree."""
    from korpus.core.datamodel import CHILD_SEPARATOR
    from tasks.index.sqlite import SqliteIndex

    with SqliteIndex(_settings(data).index_path) as index:
        for row in index.sources():
            *parents, name = row["source_id"].split(CHILD_SEPARATOR)
            shown = "   " * (len(parents) - 1) + "└─ " + name if parents else name
            typer.echo(
                f"{row['lifecycle']:<11} {shown}  v={row['version'][:12]}  owner={row['owner']}  "
                f"access={row['access']}  pages={row['pages']}  chunks={row['chunks']}"
            )


def quarantine(data: DataOption = None) -> None:
    """Everything ever refused, with status (same as `korpus review list --status all`)."""
    review_list(status="all", data=data)


def ocr(
    source_pdf: Annotated[Path, typer.Argument(help="A PDF to make searchable.")],
    out_pdf: Annotated[Path, typer.Argument(help="Where to write the searchable copy.")],
    data: DataOption = None,
) -> None:
    """OCR one PDF through the cascade (page cache under --data) and write a searchable copy; the input is
    only read."""
    from tasks.parse import ocr_document

    if not source_pdf.is_file():
        _fail(f"{source_pdf} does not exist")
    try:
        summary = ocr_document(source_pdf, out_pdf, _settings(data))
    except (ValueError, FileNotFoundError) as exc:
        _fail(str(exc))
    typer.echo(json.dumps(summary, ensure_ascii=False))


def export(
    dest: Annotated[Path, typer.Argument(help="The folder the copies go to (a tree that mirrors the archive).")],
    pdfa: Annotated[bool, typer.Option("--pdfa", help="The archival PDF/A copies (what korpus exports).")] = False,
    scopes: Annotated[
        str | None, typer.Option("--scopes", help="Access scopes, comma-separated (default: settings).")
    ] = None,
    validate: Annotated[bool, typer.Option("--validate", help="Check each copy with veraPDF (make verapdf).")] = False,
    data: DataOption = None,
) -> None:
    """Export the searchable PDF/A copies of the current sources the scopes may see into DEST, mirroring the
    archive, with DEST/manifest.json: source and copy sha256, pages OCR'd, engines, PDF/A flavour (and veraPDF's
    verdict with --validate). Exit 3 when a validated copy fails."""
    from korpus.core.settings import parse_scopes
    from tasks.index.sqlite import SqliteIndex
    from tasks.pdf.export import export_copies
    from tasks.pdf.validate import ValidatorMissing

    if not pdfa:
        _fail("say what to export: --pdfa (the archival copies)")
    settings = _settings(data)
    if not settings.index_path.is_file():
        _fail(f"no catalog at {settings.index_path}: run `korpus refresh --root DIR` first")
    scope_list = parse_scopes(scopes) if scopes else settings.default_scopes
    try:
        with SqliteIndex(settings.index_path) as index:
            manifest = export_copies(index, settings.data, dest, scope_list, validate)
    except ValidatorMissing as exc:
        _fail(str(exc))
    copies = manifest["copies"]
    typer.echo(
        f"{len(copies)} copies exported to {dest} ({sum(bool(c['pdfa']) for c in copies)} PDF/A; "
        f"{manifest['not_visible']} not visible to {','.join(scope_list)}); manifest: {dest / 'manifest.json'}"
    )
    if validate and not all(c["valid"] for c in copies):
        failed = [c["copy"] for c in copies if not c["valid"]]
        typer.echo(f"not valid PDF/A: {', '.join(failed)}", err=True)
        raise typer.Exit(3)

"""Manual quarantine review: release, reject, re-OCR or rewrite an item; every decision lands in the audit trail.

The CLI (`korpus review …`), the web page (`/review` in `korpus serve`, korpus/apps/review_web.py) and the Prefect flow
(`quarantine_review`) all call `apply_decision` (or `apply_batch`), so a decision means the same thing whichever
way it is made.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any

from korpus.core.datamodel import REASON_ADVICE, Chunk, PageResult, ReasonCode, Source, SourceKind
from korpus.core.errors import ModelMissingError
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.contract.chunking import build_chunks
from tasks.contract.gate import gate_chunk
from tasks.index.backend import IndexMismatchError
from tasks.index.sqlite import SqliteIndex
from tasks.parse import ocr_page
from tasks.receive import file_sha256
from tasks.retrieval.embedding import configured_embedder, shared_embedder, token_counter


class Action(StrEnum):
    release = "release"
    reject = "reject"
    reocr = "reocr"
    edit = "edit"
    """The reviewer's own text becomes the page's text (`method: manual`), chunked, gated and indexed."""
    retry = "retry"
    """A file refused as a whole because its reader crashed (or could not read it) is read again by the next refresh
    (a version refused for its content is otherwise not read again until its bytes change)."""


class ReviewError(RuntimeError):
    """The decision cannot be applied to this item (unknown id, wrong kind of item, stale version)."""


def describe_item(item: dict[str, Any]) -> str:
    """Markdown for a reviewer: what, where, why, the evidence and the decisions so far."""
    where = f"лист {item['page']}" if item["page"] else (f"{item['t_start']:.0f} s" if item["t_start"] else "—")
    lines = [
        f"## Карантин: `{item['source_id']}` · {where}",
        "",
        f"- item: `{item['item_id']}`  status: **{item['status']}**",
        f"- version: `{(item['source_version'] or '')[:12]}`",
        f"- reasons: {', '.join(item['reasons'])}",
        f"- detail: {item['detail'] or '—'}",
        *(f"- what to do ({code}): {REASON_ADVICE[ReasonCode(code)]}" for code in item["reasons"]),
        f"- first seen: {item['first_seen']}",
    ]
    if item.get("evidence_path"):
        lines.append(f"- page image: `{item['evidence_path']}`")
    if item.get("evidence"):
        lines += ["", "```", item["evidence"][:1500], "```"]
    for d in item.get("decisions", []):
        lines.append(f"- {d['decided_at']} {d['reviewer']}: {d['action']} — {d['note']} ({d['outcome']})")
    return "\n".join(lines)


def apply_decision(
    item_id: str,
    action: Action,
    reviewer: str,
    note: str,
    settings: Settings,
    text: str | None = None,
    scopes: Sequence[str] | None = None,
) -> str:
    """Carry out a reviewer's decision and record it. Returns what happened, in words.

    `text` is the reviewer's page text (action `edit` only). `scopes`, when given, are the access scopes the
    reviewer holds: an item of any other scope (or of none) is refused as if it did not exist.
    """
    if not reviewer.strip():
        raise ReviewError("a decision needs a reviewer name")
    if (action is Action.edit) != (text is not None):
        raise ReviewError("the edit action, and only it, takes the reviewer's text")
    with SqliteIndex(settings.index_path) as index:
        item = index.quarantine_item(item_id)
        if item is None or (scopes is not None and item["scope"] not in scopes):
            raise ReviewError(f"no quarantine item {item_id!r}: see `korpus review list`")
        # The slow part (embedding, a VLM call that may take minutes) runs first and writes nothing; what it
        # decided is written in one transaction that holds the write lock and checks again that the item and
        # its version are as they were read — a refresh or another reviewer meanwhile refuses the decision.
        if action is Action.reject:
            outcome, status, write = _reject(item)
        elif action is Action.release:
            outcome, status, write = _release(index, item, settings)
        elif action is Action.edit:
            outcome, status, write = _edit(index, item, settings, text or "", reviewer)
        elif action is Action.retry:
            outcome, status, write = _retry(item)
        else:
            outcome, status, write = _reocr(index, item, settings)
        with index.write_transaction():
            _still_as_read(index, item, needs_current=write is not None and action is not Action.reject, scopes=scopes)
            if write is not None:
                write(index)
            index.record_decision(item_id, reviewer, action.value, note, outcome, status, text=text)
        if settings.backend == "opensearch":
            _mirror(index, settings)
        return outcome


def _mirror(index: SqliteIndex, settings: Settings) -> None:
    """The decision reaches the cluster now if it can. If it cannot, the decision stands in the catalog all the same:
    every cluster hit is checked against the catalog (a rejected chunk is dropped there), and the mirror stays behind
    — /health and `korpus status` say so — until the next sync (a refresh, a decision, `korpus sync-opensearch`)."""
    import logging

    from opensearchpy.exceptions import OpenSearchException

    from tasks.index.opensearch import mirror_or_pending

    try:
        report = mirror_or_pending(settings, index, partial(configured_embedder, settings))
    except (OpenSearchException, IndexMismatchError, ModelMissingError) as exc:
        # refused outright (not a transient fault; or a chunk the cluster lost cannot get its vector again without
        # the catalog's model): the decision stands all the same
        report = {"pending": True, "error": str(exc)}
    if report.get("pending"):
        logging.getLogger(__name__).warning(
            "review decision not mirrored to OpenSearch yet (pending): %s", report["error"]
        )


Write = Callable[[SqliteIndex], None] | None
"""What a decision writes, run inside its transaction once `_still_as_read` holds (None: only the audit row)."""


def _still_as_read(
    index: SqliteIndex, item: dict[str, Any], needs_current: bool, scopes: Sequence[str] | None = None
) -> None:
    """Inside the decision's transaction: the item has not been decided meanwhile, its scope — the catalog row's, read
    again here — is still one the reviewer holds (a relabel between the first read and this write refuses it), and,
    for a decision that indexes text, its version is still the current one."""
    rows = index.conn.execute("SELECT status FROM quarantine WHERE item_id = ?", (item["item_id"],)).fetchall()
    if not rows or rows[0][0] != item["status"]:
        raise ReviewError(f"item {item['item_id']} was decided meanwhile ({rows[0][0] if rows else 'gone'}): reload it")
    now = index.quarantine_item(item["item_id"]) if scopes is not None else None
    if scopes is not None and (now is None or now["scope"] not in scopes):
        raise ReviewError(f"no quarantine item {item['item_id']!r}: see `korpus review list`")
    if needs_current and not index.is_current_version(item["source_id"], item["source_version"] or ""):
        raise ReviewError(
            f"{item['source_id']} version {(item['source_version'] or '')[:12]} is no longer current "
            "(a refresh superseded or removed it meanwhile): nothing was indexed"
        )


def apply_batch(
    item_ids: Sequence[str],
    action: Action,
    reviewer: str,
    note: str,
    settings: Settings,
    scopes: Sequence[str] | None = None,
) -> dict[str, str]:
    """The same decision for many items, one by one: item id → outcome, or `refused: …` for an item it could not
    be applied to (the others still are)."""
    if action is Action.edit:
        raise ReviewError("each page's text is its own: edit items one at a time")
    outcomes: dict[str, str] = {}
    for item_id in dict.fromkeys(item_ids):
        try:
            outcomes[item_id] = apply_decision(item_id, action, reviewer, note, settings, scopes=scopes)
        except ReviewError as exc:
            outcomes[item_id] = f"refused: {exc}"
    return outcomes


def _retry(item: dict[str, Any]) -> tuple[str, str, Write]:
    retryable = {ReasonCode.reader_crashed.value, ReasonCode.reader_timed_out.value, ReasonCode.unreadable_file.value}
    if item["page"] is not None or item["chunk"] is not None or not retryable & set(item["reasons"]):
        raise ReviewError(
            "retry is for a file refused as a whole because it could not be read (reader-crashed, "
            "unreadable-file); this item is about a page or a chunk"
        )
    return "the next refresh reads the file again", "retry", None


def _reject(item: dict[str, Any]) -> tuple[str, str, Write]:
    chunk: Chunk | None = item["chunk"]
    if chunk is None:
        return "kept out of the index", "rejected", None
    return "kept out of the index", "rejected", lambda index: index.withdraw_chunk(chunk.chunk_id)


def _release(index: SqliteIndex, item: dict[str, Any], settings: Settings) -> tuple[str, str, Write]:
    chunk: Chunk | None = item["chunk"]
    if chunk is None:
        if ReasonCode.missing_metadata.value in item["reasons"]:
            raise ReviewError("owner and access come from korpus.yaml: fix the manifest, the next refresh admits it")
        raise ReviewError("nothing to index for this item (no text was produced): use reocr or replace the file")
    if not index.is_current_version(chunk.source_id, chunk.source_version):
        raise ReviewError(f"{chunk.source_id} version {chunk.source_version[:12]} is no longer current")
    failures = gate_chunk(chunk, approved_exception=True)
    if failures:
        raise ReviewError(f"an exception cannot lift these rules: {', '.join(code.value for code, _ in failures)}")
    embedder = shared_embedder(str(embed_model_path(settings)))
    vector = embedder.embed_passages([chunk.text])[0]

    def write(index: SqliteIndex) -> None:
        index.add_reviewed_chunk(chunk, vector, exception=True, embed_model=embedder.name)

    return "indexed as an approved exception", "released", write


def _reocr(index: SqliteIndex, item: dict[str, Any], settings: Settings) -> tuple[str, str, Write]:
    """Re-OCR the item's page with the VLM tier forced (tasks/parse.py cascade), and gate the result: if it
    passes it is indexed and the item closes; else it stays open with the new reasons."""
    source = _page_source(index, item, "reocr")
    outcome = ocr_page(source, item["page"], settings, force_vlm=True)
    if outcome.problems:
        return f"re-OCR refused: {outcome.problems[0].detail}", "open", None
    page = outcome.pages[0]
    count = token_counter(str(embed_model_path(settings)))
    chunks, _empty = build_chunks(source, [page], settings.chunk_policy, count=count, language=settings.language)
    if not chunks:
        return "re-OCR produced no text", "open", None
    chunks = [c.model_copy(update={"chunk_id": f"{c.chunk_id}-reocr-p{item['page']}"}) for c in chunks]
    failures = [code.value for c in chunks for code, _ in gate_chunk(c)]
    if failures:
        return f"re-OCR text still refused: {', '.join(sorted(set(failures)))}", "open", None
    embedder = shared_embedder(str(embed_model_path(settings)))
    vectors = embedder.embed_passages([c.text for c in chunks])

    def write(index: SqliteIndex) -> None:
        for c, vector in zip(chunks, vectors, strict=True):
            index.add_reviewed_chunk(c, vector, exception=False, embed_model=embedder.name)

    return f"re-OCR ({page.engine}, tier {page.tier}, read afresh) passed the gate and was indexed", "resolved", write


def _edit(
    index: SqliteIndex, item: dict[str, Any], settings: Settings, text: str, reviewer: str
) -> tuple[str, str, Write]:
    """The reviewer's text becomes the page's text: chunked and gated like any page, indexed under ids of its own
    (a later edit of the same page replaces it); the text korpus read stays on the item and in the audit trail."""
    if not text.strip():
        raise ReviewError("the page text is empty: reject the item instead")
    source = _page_source(index, item, "edit")
    now = datetime.now(UTC).isoformat(timespec="seconds")
    page = PageResult(
        source_id=source.source_id,
        source_version=source.version,
        page=item["page"],
        text=text,
        method="manual",
        engine=f"manual: {reviewer.strip()}, {now}",
    )
    count = token_counter(str(embed_model_path(settings)))
    chunks, _empty = build_chunks(source, [page], settings.chunk_policy, count=count, language=settings.language)
    if not chunks:
        raise ReviewError("the text holds nothing to index")
    key = hashlib.sha256(f"{source.source_id}\x00{source.version}".encode()).hexdigest()[:12]
    prefix = f"manual-{key}-p{item['page']}-"
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    chunks = [c.model_copy(update={"chunk_id": f"{prefix}{digest}-{n}"}) for n, c in enumerate(chunks)]
    failures = sorted({code.value for c in chunks for code, _ in gate_chunk(c)})
    if failures:
        raise ReviewError(f"the text is refused by the gate: {', '.join(failures)}")
    embedder = shared_embedder(str(embed_model_path(settings)))
    vectors = embedder.embed_passages([c.text for c in chunks])

    def write(index: SqliteIndex) -> None:
        index.add_reviewed_page(page, replaces=prefix)
        for c, vector in zip(chunks, vectors, strict=True):
            index.add_reviewed_chunk(c, vector, exception=False, embed_model=embedder.name)

    return f"the reviewer's text ({len(chunks)} chunk{'s' if len(chunks) > 1 else ''}) was indexed", "resolved", write


def _page_source(index: SqliteIndex, item: dict[str, Any], action: str) -> Source:
    """The current version of a paged item's source, for an action that reads or replaces one page."""
    row = index.source_version(item["source_id"], item["source_version"])
    if item["page"] is None or row is None or not SourceKind(row["kind"] or "text").paged:
        raise ReviewError(f"{action} applies to a page of an indexed PDF, image, DjVu or office version")
    if row["lifecycle"] != "current":
        raise ReviewError(f"{item['source_id']} version {item['source_version'][:12]} is no longer current")
    if not Path(row["path"]).is_file() or file_sha256(Path(row["path"])) != row["version"]:
        raise ReviewError(f"the source file {row['path']} is gone or has changed; refresh first")
    return Source(
        source_id=row["source_id"],
        version=row["version"],
        path=row["path"],
        kind=SourceKind(row["kind"]),
        owner=row["owner"],
        access=row["access"],
        tenant=row["tenant"],
    )

"""`korpus gc`: what korpus keeps of versions nobody is served any more, and for how long.

A changed file's old version stays stored when it is superseded (read before delete: its replacement is indexed
first), and a removed file's versions stay too — for `KORPUS_RETENTION_DAYS` (default 30) after they stopped being
served, so a mistaken change can still be traced. After that `collect_garbage` removes them:

- in the catalog, each version in its own transaction (a kill mid-way leaves every version whole or gone): its
  chunks with their analysed terms, vectors and identifiers, its stored pages, its catalog row. The quarantine items
  and reviewers' decisions stay as the audit trail — ids, reasons, statuses, who decided what and when — but lose
  the version's text: an item's evidence, stored chunk and OCR readings, its page image, a reviewer's edited text;
- on disk, whatever no version still in the catalog (or an open quarantine item) needs: page-cache entries
  (OCR pages, transcript windows, VAD results) by sha256, converted office PDFs, the members unpacked from a letter
  or archive version (`<data>/unpacked/`), decoded audio left by a killed
  refresh, and — for a file gone from the catalog altogether — its searchable PDF, transcript and evidence images.

The disk side is computed from what the catalog still holds, not from what this run removed, so a run killed
between the two is completed by the next. It holds the refresh lock: no refresh publishes while it runs. A
refresh runs it at its end when `KORPUS_GC_AFTER_REFRESH` is on (the default). BM25 statistics need no collection:
only current chunks have a row in the full-text index (tasks/index/schema.py CURRENT_TERMS_SQL).
"""

from __future__ import annotations

import os
import shutil
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from korpus.core.settings import Settings
from tasks.index import catalog_check
from tasks.index.records import PRESENT
from tasks.index.sqlite import SqliteIndex
from tasks.runtime.crash_points import crash_point
from tasks.runtime.refresh_lock import refresh_lock


def disk_use(folder: Path) -> int:
    """Bytes of the files under `folder` (0 when it does not exist)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


UNSERVED_SINCE = "coalesce(superseded_at, switched_at, received_at)"
"""SQL over `sources`: when a version that is no longer current stopped being served (its retention clock)."""


def expired_versions(index: SqliteIndex, cutoff: str) -> list[tuple[str, str]]:
    """(source id, version) of every version superseded (or retired) before `cutoff`, oldest first."""
    rows = index.conn.execute(
        f"SELECT source_id, version FROM sources WHERE lifecycle != 'current' AND {UNSERVED_SINCE} < ? "
        f"ORDER BY {UNSERVED_SINCE}",
        (cutoff,),
    )
    return [(source_id, version) for source_id, version in rows]


def drop_version(index: SqliteIndex, source_id: str, version: str) -> int:
    """Remove one version's chunks (terms, vectors, identifiers), pages and catalog row in one transaction; the
    version must not be current (checked inside it). Returns the chunks removed."""
    conn = index.conn
    with index.write_transaction():
        current = conn.execute(
            "SELECT 1 FROM sources WHERE source_id = ? AND version = ? AND lifecycle = 'current'", (source_id, version)
        ).fetchall()
        if current:  # switched back to current since it was listed (a refresh of the same bytes): keep it
            return 0
        rowids = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM chunks WHERE source_id = ? AND source_version = ?", (source_id, version)
            )
        ]
        marks = ",".join("?" * len(rowids))
        if rowids:
            for table in {index.vector_table(), "chunk_vectors"}:
                conn.execute(f"DELETE FROM {table} WHERE rowid IN ({marks})", rowids)
            conn.execute(f"DELETE FROM chunk_identifiers WHERE rowid IN ({marks})", rowids)
            conn.execute(f"DELETE FROM chunk_terms WHERE rowid IN ({marks})", rowids)  # none unless served
            crash_point("gc-mid-version")
            conn.execute(f"DELETE FROM chunks WHERE rowid IN ({marks})", rowids)  # chunk_tokens by trigger
        for (item_id,) in conn.execute(
            "SELECT item_id FROM quarantine WHERE source_id = ? AND source_version = ? AND status = 'open'",
            (source_id, version),
        ).fetchall():  # the audit trail stays; the question the item asked is moot
            index.record_decision(
                item_id,
                "korpus",
                "expired",
                "",
                "its version expired (korpus gc): a newer one is served or the file was removed",
                "resolved",
            )
        images = scrub_quarantine(index, source_id, version)
        conn.execute("DELETE FROM pages WHERE source_id = ? AND version = ?", (source_id, version))
        conn.execute("DELETE FROM pending_pages WHERE source_id = ? AND version = ?", (source_id, version))
        conn.execute("DELETE FROM sources WHERE source_id = ? AND version = ?", (source_id, version))
    for image in images:  # after the commit: a kill before it leaves the rows pointing at files still there
        Path(image).unlink(missing_ok=True)
    return len(rowids)


def scrub_quarantine(index: SqliteIndex, source_id: str, version: str, only: set[str] | None = None) -> list[str]:
    """Inside `drop_version`'s transaction: the version's quarantine items keep their ids, reasons and statuses and
    their decisions who decided what and when; their text goes (evidence, stored chunk, OCR readings, a reviewer's
    edited text). Returns the page images no other item still points at, for the caller to delete."""
    conn = index.conn
    items = [
        r[0]
        for r in conn.execute(
            "SELECT item_id FROM quarantine WHERE source_id = ? AND source_version = ?", (source_id, version)
        )
        if only is None or r[0] in only
    ]
    if not items:
        return []
    marks = ",".join("?" * len(items))
    images = {
        r[0]
        for r in conn.execute(
            f"SELECT evidence_path FROM quarantine WHERE item_id IN ({marks}) AND evidence_path IS NOT NULL", items
        )
    }
    conn.execute(
        f"UPDATE quarantine SET evidence = NULL, chunk = NULL, readings = NULL, evidence_path = NULL "
        f"WHERE item_id IN ({marks})",
        items,
    )
    conn.execute(f"UPDATE quarantine_decisions SET text = NULL WHERE item_id IN ({marks})", items)
    shared = {
        r[0] for r in conn.execute("SELECT DISTINCT evidence_path FROM quarantine WHERE evidence_path IS NOT NULL")
    }
    return sorted(images - shared)


def quarantine_to_scrub(index: SqliteIndex, expired: list[tuple[str, str]]) -> int:
    """How many quarantine items of these versions still hold text (what `korpus gc --dry-run` says would go)."""
    return sum(
        index.conn.execute(
            "SELECT count(*) FROM quarantine WHERE source_id = ? AND source_version = ? AND (evidence IS NOT NULL OR "
            "chunk IS NOT NULL OR readings IS NOT NULL OR evidence_path IS NOT NULL)",
            pair,
        ).fetchall()[0][0]
        for pair in expired
    )


_STALE_REFUSAL = (
    "q.status = 'open' AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.source_id = q.source_id AND s.version = "
    f"q.source_version) AND NOT ({PRESENT})"
)
"""An open item about a version never indexed, of a file a later refresh saw at another version."""


def stale_refusals(index: SqliteIndex, cutoff: str) -> list[str]:
    """The items `expire_stale_refusals` resolves at `cutoff`."""
    rows = index.conn.execute(
        f"SELECT q.item_id FROM quarantine q WHERE {_STALE_REFUSAL} AND q.last_seen < ?", (cutoff,)
    )
    return [item_id for (item_id,) in rows]


def oldest_stale_refusal(index: SqliteIndex) -> str | None:
    """When the oldest stale refusal was last seen (it expires `KORPUS_RETENTION_DAYS` later); None: there is none."""
    return index.conn.execute(f"SELECT min(q.last_seen) FROM quarantine q WHERE {_STALE_REFUSAL}").fetchone()[0]


def next_expiry(index: SqliteIndex, days: float) -> float | None:
    """When garbage collection next has work (epoch seconds): the oldest unserved version or stale refusal plus
    `days`; None when there is neither."""
    unserved = index.conn.execute(f"SELECT min({UNSERVED_SINCE}) FROM sources WHERE lifecycle != 'current'").fetchone()[
        0
    ]
    times = [datetime.fromisoformat(t).timestamp() for t in (unserved, oldest_stale_refusal(index)) if t is not None]
    return min(times) + timedelta(days=days).total_seconds() if times else None


def expire_stale_refusals(index: SqliteIndex, cutoff: str) -> int:
    """Open items about versions that were never indexed (a refused file), last seen before `cutoff`, of a file
    whose refusal a later refresh recorded again for a newer version: resolved with an audit row, their text
    scrubbed. (The refusals of a never-indexed file that is gone stay open: nothing in the catalog says it is gone.)
    Runs with every refresh's garbage collection that is due, and `korpus gc`. Returns how many."""
    expired = stale_refusals(index, cutoff)
    marks = ",".join("?" * len(expired))
    images: list[str] = []
    with index.write_transaction():
        for item_id in expired:
            index.record_decision(
                item_id,
                "korpus",
                "expired",
                "",
                "a refusal of an older version (korpus gc): the file changed or was removed since",
                "resolved",
            )
        versions = set(
            index.conn.execute(f"SELECT source_id, source_version FROM quarantine WHERE item_id IN ({marks})", expired)
        )
        for source_id, version in versions:
            images += scrub_quarantine(index, source_id, version, only=set(expired))
    for image in images:
        Path(image).unlink(missing_ok=True)
    return len(expired)


def _still_needed(index: SqliteIndex, leaving: set[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """(versions, source ids) the catalog still holds — in a catalog row (other than the `leaving` ones) or an open
    quarantine item."""
    versions: set[str] = set()
    sources: set[str] = set()
    for source_id, version in index.conn.execute("SELECT source_id, version FROM sources"):
        if (source_id, version) not in leaving:
            versions.add(version)
            sources.add(source_id)
    for source_id, version in index.conn.execute(
        "SELECT source_id, source_version FROM quarantine WHERE status = 'open'"
    ):
        sources.add(source_id)
        if version:
            versions.add(version)
    return versions, sources


def _remove(path: Path, dry_run: bool) -> int:
    """Delete a file or folder; returns the bytes it held."""
    size = disk_use(path) if path.is_dir() else (path.stat().st_size if path.exists() else 0)
    if not dry_run:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return size


def _unneeded_files(settings: Settings, versions: set[str], sources: set[str]) -> list[Path]:
    """Files and folders under the data directory that nothing in the catalog needs."""
    found: list[Path] = []
    cache = settings.page_cache_location
    if isinstance(cache, Path) and cache.is_dir():  # a shared fsspec cache is other machines' too: left alone
        found += [
            entry
            for shard in cache.iterdir()
            if shard.is_dir()
            for entry in shard.iterdir()
            if entry.is_dir() and entry.name not in versions
        ]
    if settings.converted_dir.is_dir():
        found += [pdf for pdf in settings.converted_dir.glob("*/*.pdf") if pdf.stem not in versions]
        found += list(settings.converted_dir.glob("*/*.part"))
    unpacked = settings.data / "unpacked"
    if unpacked.is_dir():  # a container version's members: needed while it (and so its children) is in the catalog
        found += [
            entry
            for shard in unpacked.iterdir()
            if shard.is_dir()
            for entry in shard.iterdir()
            if entry.name.split(".")[0] not in versions or entry.name.endswith(".part")
        ]
    audio = settings.data / "cache" / "audio"
    if audio.is_dir():  # decoded audio lives only while its recording is transcribed: no refresh runs now
        found += [entry for entry in audio.iterdir() if entry.is_file()]
    for folder, suffixes in ((settings.data / "searchable", (".pdf",)), (settings.transcripts_dir, (".txt", ".vtt"))):
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix in suffixes:
                source_id = path.relative_to(folder).as_posix()
                for suffix in suffixes:
                    source_id = source_id.removesuffix(suffix)
                if source_id not in sources and path.relative_to(folder).as_posix() not in sources:
                    found.append(path)
    evidence = settings.data / "evidence"
    if evidence.is_dir():
        for folder in sorted({p.parent for p in evidence.rglob("p*.png")}):
            if folder.relative_to(evidence).as_posix() not in sources:
                found.append(folder)
    return found


def collect_garbage(
    settings: Settings,
    retention_days: float | None = None,
    dry_run: bool = False,
    take_lock: bool = True,
    vacuum: bool = False,
) -> dict[str, Any]:
    """Remove what expired (see the module docstring); returns what was removed and the disk use before and after.
    `dry_run` reports what would go and removes nothing. `take_lock=False` is for the refresh, which holds the
    lock already: it returns at once when no version and no stale refusal has expired, without walking the data
    directory (files left by an interrupted run are then collected by the next `korpus gc` or the next refresh that
    expires a version). The index file keeps the pages it freed for its next writes; `vacuum` rewrites it to its size
    (SQLite's VACUUM: it needs free disk space of about the file's size, and a while on a large index)."""
    days = settings.retention_days if retention_days is None else retention_days
    cutoff = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")
    if not take_lock and settings.index_path.is_file():  # inside a refresh: nothing to walk the disk for?
        with SqliteIndex(settings.index_path) as index:
            if not expired_versions(index, cutoff) and not stale_refusals(index, cutoff):
                if not dry_run:
                    with index.write_transaction():  # the outbox rows every mirror holds (all: no mirror)
                        catalog_check.prune_outbox(index.conn)
                return {
                    "retention_days": days,
                    "cutoff": cutoff,
                    "dry_run": dry_run,
                    "versions": 0,
                    "chunks": 0,
                    "files": 0,
                    "file_bytes": 0,
                }
    before = disk_use(settings.data)
    report: dict[str, Any] = {"retention_days": days, "cutoff": cutoff, "dry_run": dry_run, "bytes_before": before}
    if not settings.index_path.is_file():
        return report | {"versions": 0, "chunks": 0, "files": 0, "file_bytes": 0, "bytes_after": before}
    lock = refresh_lock(settings.data, wait=settings.refresh_wait) if take_lock else nullcontext()
    with lock, SqliteIndex(settings.index_path) as index:
        expired = expired_versions(index, cutoff)
        report["quarantine_items_scrubbed"] = quarantine_to_scrub(index, expired)
        if dry_run:
            chunks = sum(
                index.conn.execute(
                    "SELECT count(*) FROM chunks WHERE source_id = ? AND source_version = ?", pair
                ).fetchall()[0][0]
                for pair in expired
            )
            versions, sources = _still_needed(index, set(expired))
        else:
            chunks = sum(drop_version(index, source_id, version) for source_id, version in expired)
            report["refusals_expired"] = expire_stale_refusals(index, cutoff)
            with index.write_transaction():
                report["outbox_pruned"] = catalog_check.prune_outbox(index.conn)
            versions, sources = _still_needed(index, set())
        crash_point("gc-before-files")
        files = _unneeded_files(settings, versions, sources)
        freed = sum(_remove(path, dry_run) for path in files)
        index_pages_free = index.conn.execute("PRAGMA freelist_count").fetchall()[0][0]
        if vacuum and not dry_run:
            index.conn.execute("VACUUM")
    return report | {
        "versions": len(expired),
        "chunks": chunks,
        "files": len(files),
        "file_bytes": freed,
        "index_free_pages": index_pages_free,
        "bytes_after": before - freed if dry_run else disk_use(settings.data),
    }

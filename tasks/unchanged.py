"""An unchanged refresh at the speed of a stat of each file (#47 item 2): `korpus refresh` answers «nothing changed»
without starting a Prefect flow run when it can prove a flow run would do nothing.

The proof is a replay. A full refresh that found nothing to do — every file matched its last reading (none hashed),
nothing new, changed, removed or relabelled, no page waiting, no meta-document or garbage work — leaves a record
(`<data>/unchanged.json`) of what that outcome depended on:

- the tree: a digest of every entry discovery sees (the same hidden-name and linked-folder rules), each with its
  inode, size, modification and status-change times — what discovery compares to trust a file unread — and the
  manifest `korpus.yaml` among them;
- the settings: a digest of every effective setting (a changed chunk policy, model or limit is a full refresh);
- the catalog: the index file's size and modification time (and its write-ahead log's) after the refresh closed it —
  any write since (a reviewer's decision, a relabel, `korpus gc`, another refresh) invalidates the record;
- the clock: when the oldest version no longer served, or the oldest stale refusal (an item of a version never
  indexed, of a file seen since at another version), passes `KORPUS_RETENTION_DAYS`, the refresh's garbage
  collection has work again.

Every input of the refresh's plan (tasks/receive.py: discovery with the readings, the catalog's versions and refusals,
the manifest, the settings) is then what it was when the flow planned nothing, so the plan is again empty. Anything
that differs — or an OpenSearch backend (its mirror is re-checked each refresh), `--verify`, or another refresh
holding the lock — runs the flow as before. A quick refresh records itself for `korpus status` like any other; it
creates no Prefect flow run and emits no Prefect event (`KORPUS_QUICK_UNCHANGED=false`: every refresh is a flow run).

Nothing here imports Prefect: the point is to not pay for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.runtime.refresh_lock import RefreshLocked, refresh_lock

RECORD_NAME = "unchanged.json"
SECRET_SETTINGS = ("api_keys", "review_keys")


def tree_digest(root: Path) -> tuple[int, str]:
    """(entries, digest) of every entry under `root` that discovery sees: names not starting with a dot, folders
    descended into unless linked, each with the stat of what it points to (or the error stat gave)."""
    digest = hashlib.blake2b(digest_size=20)
    count = 0
    stack = [(os.fspath(root), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as entries:
                listed = sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError as exc:
            digest.update(f"{prefix}\0!{exc.errno}\n".encode("utf-8", "surrogateescape"))
            continue
        lines = []
        for entry in listed:
            name = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, name + "/"))
                    continue
                stat = entry.stat()  # a linked file: its target's stat, as discovery reads it
                linked = "l" if entry.is_symlink() else ""
                lines.append(
                    f"{name}\0{linked}{stat.st_mode}.{stat.st_ino}.{stat.st_size}.{stat.st_mtime_ns}."
                    f"{stat.st_ctime_ns}\n"
                )
            except OSError as exc:
                lines.append(f"{name}\0!{exc.errno}\n")
        count += len(lines)
        digest.update("".join(lines).encode("utf-8", "surrogateescape"))
    return count, digest.hexdigest()


def settings_digest(settings: Settings) -> str:
    values = settings.model_dump(mode="json", exclude=set(SECRET_SETTINGS))
    return hashlib.blake2b(json.dumps(values, sort_keys=True, default=str).encode(), digest_size=20).hexdigest()


def catalog_stamp(settings: Settings) -> list[int]:
    """The index file's (and its write-ahead log's) size and modification time: any write changes one of them."""
    stamp = []
    for path in (settings.index_path, settings.index_path.with_name(settings.index_path.name + "-wal")):
        try:
            stat = path.stat()
            stamp += [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        except FileNotFoundError:
            stamp += [-1, -1, -1]
    return stamp


def replayable(settings: Settings) -> bool:
    """Whether a refresh under these settings may be answered from the record at all."""
    return settings.quick_unchanged and settings.backend == "sqlite"


def did_nothing(summary: dict[str, Any]) -> bool:
    """Whether a full refresh's summary says its flow had nothing to do (and so will again, on the same inputs)."""
    meta = summary.get("meta_documents")
    collected = summary.get("garbage_collected") or {}
    return (
        set(summary.get("changes") or {}) <= {"unchanged"}
        and not summary.get("relabelled")
        and not summary.get("files_hashed")
        and not summary.get("chunks_indexed")
        and not summary.get("pending_sources")
        and not summary.get("changed_during_run")
        and summary.get("opensearch") is None
        and (meta is None or set(meta) <= {"scopes_unchanged", "seconds"})
        and not any(collected.values())
    )


def _next_collection(settings: Settings) -> float | None:
    """When garbage collection next has work (epoch seconds), None when never (nothing unserved, or it is off)."""
    if not settings.gc_after_refresh:
        return None
    from tasks.index.retention import next_expiry

    with SqliteIndex(settings.index_path) as index:
        return next_expiry(index, settings.retention_days)


def remember(root: Path, settings: Settings, summary: dict[str, Any], tree: tuple[int, str] | None) -> bool:
    """After a full refresh: record its inputs when it did nothing, else forget any record. `tree` is the tree's
    digest taken before the refresh started — a file changed while it ran (after discovery looked) makes the tree
    differ from it, so the next refresh runs the flow. True when recorded."""
    record = settings.data / RECORD_NAME
    record.unlink(missing_ok=True)
    if tree is None or not replayable(settings) or not did_nothing(summary):
        return False
    state = {
        "root": str(root),
        "entries": tree[0],
        "tree": tree[1],
        "sources": summary.get("sources", 0),
        "quarantined": summary.get("quarantined", 0),
        "settings": settings_digest(settings),
        "collect_at": _next_collection(settings),
        "catalog": catalog_stamp(settings),
    }
    record.write_text(json.dumps(state), encoding="utf-8")
    return True


def forget(settings: Settings) -> None:
    """Before a full refresh: the record no longer holds whatever it finds."""
    (settings.data / RECORD_NAME).unlink(missing_ok=True)


def quick_refresh(root: Path, settings: Settings) -> dict[str, Any] | None:
    """The summary of an unchanged refresh when the record proves the flow would do nothing, else None (run it)."""
    record = settings.data / RECORD_NAME
    if settings.verify or not replayable(settings) or not record.is_file():
        return None
    started = time.perf_counter()
    try:
        state = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        state.get("root") != str(root)
        or state.get("settings") != settings_digest(settings)
        or state.get("catalog") != catalog_stamp(settings)
        or (state.get("collect_at") is not None and time.time() >= state["collect_at"])
    ):
        return None
    try:
        with refresh_lock(settings.data):  # another refresh running: it is the one to wait for
            if tree_digest(root) != (state["entries"], state["tree"]) or state["catalog"] != catalog_stamp(settings):
                return None
            sources = state["sources"]
            summary = {
                "sources": sources,
                "changes": {"unchanged": sources} if sources else {},
                "relabelled": 0,
                "files_hashed": 0,
                "chunks_indexed": 0,
                "quarantined": state.get("quarantined", 0),
                "pending_sources": 0,
                "quick": True,
                "flow_run_id": None,
                "seconds": round(time.perf_counter() - started, 2),
            }
            with SqliteIndex(settings.index_path) as index:
                index.record_refresh(
                    {"finished_at": datetime.now(UTC).isoformat(timespec="seconds"), "root": str(root), **summary}
                )
            state["catalog"] = catalog_stamp(settings)  # its own record is the only write since
            record.write_text(json.dumps(state), encoding="utf-8")
            return summary
    except RefreshLocked:
        return None

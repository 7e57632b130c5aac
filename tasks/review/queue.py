"""The review queue as a reviewer sees it: filtered, paged and counted in SQL, limited to the reviewer's scopes.

An item's scope is its source version's access rule in the catalog (a relabel moves it); for a version never read, the
access recorded with the item. An item with no scope at all — a file the manifest gives no access rule — is shown to
no reviewer key: only its count is, so someone fixes `korpus.yaml` (the CLI on the server still shows it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from korpus.core.datamodel import scope_sql
from tasks.index.sqlite import SqliteIndex

STATUSES = ("open", "released", "rejected", "resolved", "all")

_FROM = "FROM quarantine q LEFT JOIN sources s ON s.source_id = q.source_id AND s.version = q.source_version "
_ACCESS = "coalesce(s.access, q.access)"  # the catalog row first: a relabel moves it
_SCOPE = scope_sql("coalesce(s.tenant, q.tenant)", _ACCESS)  # what the reviewer must hold (tenant/access)
_KIND = "coalesce(q.kind, s.kind)"


@dataclass
class QueueQuery:
    """What the reviewer asked for: filters and a page of the result."""

    scopes: Sequence[str]
    status: str = "open"
    reason: str | None = None
    folder: str | None = None
    kind: str | None = None
    page: int = 1
    per_page: int = 50

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status is one of {', '.join(STATUSES)}")
        self.page = max(1, self.page)
        self.per_page = min(max(1, self.per_page), 500)
        self.folder = self.folder.strip("/") if self.folder else None


@dataclass
class QueuePage:
    items: list[dict[str, Any]]
    total: int
    counts: dict[str, int] = field(default_factory=dict)
    """Open items per reason code, within the reviewer's scopes and the other filters."""
    unscoped: int = 0
    """Items no reviewer key can see (no access rule)."""
    folders: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "total": self.total,
            "counts": self.counts,
            "unscoped": self.unscoped,
            "folders": self.folders,
            "kinds": self.kinds,
        }


def _where(query: QueueQuery, with_reason: bool = True) -> tuple[str, list[Any]]:
    marks = ", ".join("?" for _ in query.scopes) or "NULL"
    clauses, params = [f"{_SCOPE} IN ({marks})"], list(query.scopes)
    if query.status != "all":
        clauses.append("q.status = ?")
        params.append(query.status)
    if with_reason and query.reason:
        clauses.append("EXISTS (SELECT 1 FROM json_each(q.reasons) r WHERE r.value = ?)")
        params.append(query.reason)
    if query.folder:
        prefix = query.folder + "/"
        clauses.append("substr(q.source_id, 1, ?) = ?")
        params += [len(prefix), prefix]
    if query.kind:
        clauses.append(f"{_KIND} = ?")
        params.append(query.kind)
    return "WHERE " + " AND ".join(clauses), params


def queue_page(index: SqliteIndex, query: QueueQuery) -> QueuePage:
    """One page of the queue, oldest first, with the counts a reviewer filters by."""
    conn = index.conn
    where, params = _where(query)
    total = conn.execute(f"SELECT count(*) {_FROM}{where}", params).fetchall()[0][0]
    names = (
        "item_id",
        "source_id",
        "source_version",
        "page",
        "t_start",
        "chunk_id",
        "reasons",
        "detail",
        "first_seen",
        "status",
        "access",
        "kind",
    )
    rows = conn.execute(
        "SELECT q.item_id, q.source_id, q.source_version, q.page, q.t_start, q.chunk_id, q.reasons, q.detail, "
        f"q.first_seen, q.status, {_ACCESS}, {_KIND} {_FROM}{where} "
        "ORDER BY q.first_seen, q.source_id, q.page, q.t_start, q.item_id LIMIT ? OFFSET ?",
        [*params, query.per_page, (query.page - 1) * query.per_page],
    )
    items = [dict(zip(names, row, strict=True)) for row in rows]
    for item in items:
        item["reasons"] = json.loads(item["reasons"])
    where_any, params_any = _where(query, with_reason=False)
    counts = dict(
        conn.execute(
            f"SELECT r.value, count(*) {_FROM}, json_each(q.reasons) r {where_any} GROUP BY r.value ORDER BY 2 DESC",
            params_any,
        ).fetchall()
    )
    visible = _where(QueueQuery(scopes=query.scopes, status="all"))
    folders = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT substr(q.source_id, 1, instr(q.source_id, '/') - 1) AS folder "
            f"{_FROM}{visible[0]} AND instr(q.source_id, '/') > 0 ORDER BY folder",
            visible[1],
        )
    ]
    kinds = [row[0] for row in conn.execute(f"SELECT DISTINCT {_KIND} {_FROM}{visible[0]} ORDER BY 1", visible[1])]
    unscoped = conn.execute(f"SELECT count(*) {_FROM}WHERE {_ACCESS} IS NULL AND q.status = 'open'").fetchall()[0][0]
    return QueuePage(items, total, counts, unscoped, folders, [k for k in kinds if k])


def next_item(index: SqliteIndex, query: QueueQuery, after: str) -> str | None:
    """The open item after `after` in the queue's order (within the same filters): where a reviewer goes next."""
    where, params = _where(QueueQuery(**{**query.__dict__, "status": "open"}))
    ids = [
        row[0]
        for row in index.conn.execute(
            f"SELECT q.item_id {_FROM}{where} ORDER BY q.first_seen, q.source_id, q.page, q.t_start, q.item_id", params
        )
    ]
    if after in ids:
        position = ids.index(after)
        ids = ids[position + 1 :] + ids[:position]
    return ids[0] if ids else None

"""The quarantine, pending pages and the reviewers' decisions in the embedded catalog: a part of `SqliteIndex`
(tasks/index/sqlite.py), apart so each file reads in one sitting. Every method runs on the index's connection."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import apsw
import numpy as np

from korpus.core.datamodel import ADMISSION_REASONS, Chunk, PageResult, QuarantineItem, Source, scope_of
from tasks.index.schema import utc_now

_OPEN_WHOLE_SOURCE = "page IS NULL AND chunk_id IS NULL AND t_start IS NULL AND status = 'open'"
"""An open item about a version as a whole (not a page, a chunk or a stretch of a recording)."""


class QuarantineStore:
    """What the refresh could not index, what waits for a retry, and what reviewers decided."""

    conn: apsw.Connection
    # provided by SqliteIndex: the model binding and the chunk writer a released chunk goes through
    bind_embedding: Any
    _add_chunk: Any

    def refused_versions(self) -> dict[str, dict[str, set[str]]]:
        """Source id → {version: reason codes} for versions refused as a whole (not single pages)."""
        refused: dict[str, dict[str, set[str]]] = {}
        rows = self.conn.execute(
            f"SELECT source_id, source_version, reasons FROM quarantine WHERE {_OPEN_WHOLE_SOURCE}"
        )
        for source_id, version, reasons in rows:
            refused.setdefault(source_id, {}).setdefault(version, set()).update(json.loads(reasons))
        return refused

    def served_older(self) -> list[dict[str, Any]]:
        """Files served at an older version because the version after it was refused as a whole (a crash, a time
        limit, unreadable): the old version stays until the new one is in. Each with the refusal's reasons."""
        rows = self.conn.execute(
            "SELECT s.source_id, s.version, q.source_version, q.reasons FROM sources s JOIN (SELECT source_id, "
            f"source_version, reasons, first_seen FROM quarantine WHERE {_OPEN_WHOLE_SOURCE}) q "
            "ON q.source_id = s.source_id AND q.source_version != s.version WHERE s.lifecycle = 'current' "
            "AND julianday(q.first_seen) >= julianday(s.switched_at) ORDER BY s.source_id"
        )
        return [
            {"source_id": sid, "served": served, "refused": version, "reasons": json.loads(reasons)}
            for sid, served, version, reasons in rows
        ]

    def relabel_refused(self, source: Source) -> int:
        """A version refused as a whole has no catalog row for the triggers to follow: its quarantine items take the
        manifest's access here (a file moved to `hr` takes its refused items out of a `public` reviewer's queue)."""
        labels = (source.access, source.tenant, source.source_id, source.version)
        with self.write_transaction():
            self.conn.execute(
                "UPDATE quarantine SET access = ?, tenant = ? WHERE source_id = ? AND source_version = ? "
                "AND (access IS NOT ? OR tenant IS NOT ?) "
                "AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.source_id = ? AND s.version = ?)",
                (*labels, *labels),
            )
            return self.conn.changes()

    def record_quarantine(self, items: Iterable[QuarantineItem]) -> int:
        """Add items to the queue; an item seen again keeps its first-seen time and any decision made on it."""
        count = 0
        with self.write_transaction():
            for item in items:
                self.conn.execute(
                    "INSERT INTO quarantine (item_id, source_id, source_version, page, t_start, chunk_id, reasons, "
                    "detail, evidence, evidence_path, chunk, first_seen, last_seen, access, kind, readings, tenant) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(item_id) DO UPDATE SET last_seen = excluded.last_seen, "
                    "reasons = excluded.reasons, detail = excluded.detail, "
                    "access = coalesce(excluded.access, access), tenant = coalesce(excluded.tenant, tenant), "
                    "kind = coalesce(excluded.kind, kind), "
                    "readings = coalesce(excluded.readings, readings)",
                    (
                        item.item_id,
                        item.source_id,
                        item.source_version,
                        item.page,
                        item.t_start,
                        item.chunk_id,
                        json.dumps([r.value for r in item.reasons]),
                        item.detail,
                        item.evidence,
                        item.evidence_path,
                        item.chunk.model_dump_json() if item.chunk else None,
                        item.first_seen.isoformat(timespec="seconds"),
                        utc_now(),
                        item.access,
                        item.kind,
                        json.dumps(item.readings, ensure_ascii=False) if item.readings else None,
                        item.tenant,
                    ),
                )
                count += 1
        return count

    def resolve_admitted(self, source_id: str, version: str) -> int:
        """Resolve the open whole-source items of a version refused only for what the manifest or the root said
        (`ADMISSION_REASONS`), now that the version is published: the manifest was fixed, and a reviewer should not
        find the refusal still waiting. Runs inside the publish's transaction; each gets an audit row. Returns how
        many were resolved."""
        rows = self.conn.execute(
            "SELECT item_id, reasons FROM quarantine WHERE source_id = ? AND source_version = ? "
            f"AND {_OPEN_WHOLE_SOURCE}",
            (source_id, version),
        ).fetchall()
        admitted = [item_id for item_id, reasons in rows if set(json.loads(reasons)) <= ADMISSION_REASONS]
        for item_id in admitted:  # a savepoint inside the publish's transaction
            self.record_decision(
                item_id,
                "korpus",
                "admitted",
                "",
                "a later refresh admitted this version (its manifest was fixed) and indexed it",
                "resolved",
            )
        return len(admitted)

    def record_pending(self, source: Source, unread: dict[int, str]) -> dict[int, int]:
        """Pages a transient fault kept unread in this refresh: count one more attempt for each; returns page →
        refreshes tried so far (the flow quarantines a page past `KORPUS_PENDING_MAX_REFRESHES`)."""
        attempts: dict[int, int] = {}
        with self.write_transaction():
            for page, error in unread.items():
                self.conn.execute(
                    "INSERT INTO pending_pages VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(source_id, version, page) "
                    "DO UPDATE SET attempts = attempts + 1, error = excluded.error, last_tried = excluded.last_tried",
                    (source.source_id, source.version, page, error[:500], utc_now()),
                )
                attempts[page] = self.conn.execute(
                    "SELECT attempts FROM pending_pages WHERE source_id = ? AND version = ? AND page = ?",
                    (source.source_id, source.version, page),
                ).fetchall()[0][0]
        return attempts

    def pending_pages(self) -> list[dict[str, Any]]:
        """Pages left unread by transient faults, with refreshes tried; a page given up (quarantined) keeps its
        row, counted on, until its document is published or removed."""
        names = ("source_id", "version", "page", "attempts", "error", "last_tried")
        cursor = self.conn.execute(f"SELECT {', '.join(names)} FROM pending_pages ORDER BY source_id, version, page")
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def quarantine_items(self, status: str | None = None) -> list[dict[str, Any]]:
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
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
            "last_seen",
            "status",
        )
        cursor = self.conn.execute(  # an empty result has no description in apsw: the names are spelled out
            f"SELECT {', '.join(names)} FROM quarantine {where} ORDER BY first_seen, source_id, page, t_start", params
        )
        items = [dict(zip(names, row, strict=True)) for row in cursor]
        for item in items:
            item["reasons"] = json.loads(item["reasons"])
        return items

    def quarantine_item(self, item_id: str) -> dict[str, Any] | None:
        """One item with its evidence, refused chunk and decision trail."""
        cursor = self.conn.execute("SELECT * FROM quarantine WHERE item_id = ?", (item_id,))
        try:
            names = [d[0] for d in cursor.getdescription()]
        except apsw.ExecutionCompleteError:  # no such item: apsw has no description for an empty result
            return None
        rows = cursor.fetchall()
        if not rows:
            return None
        item = dict(zip(names, rows[0], strict=True))
        item["reasons"] = json.loads(item["reasons"])
        item["chunk"] = Chunk.model_validate_json(item["chunk"]) if item["chunk"] else None
        item["readings"] = json.loads(item["readings"]) if item["readings"] else []
        row = self.source_version(item["source_id"], item["source_version"])
        if row:  # the catalog's row decides the scope (a relabel moves it); the item's copy is for versions never read
            item["access"], item["kind"] = row["access"] or item["access"], item["kind"] or row["kind"]
            item["tenant"] = row["tenant"] or item["tenant"]
            if item["chunk"] is not None:
                item["chunk"] = item["chunk"].model_copy(
                    update={
                        "owner": row["owner"],
                        "access_rule": row["access"],
                        "tenant": row["tenant"] or item["chunk"].tenant,
                    }
                )
        item["scope"] = scope_of(item["access"], item["tenant"])  # what a reviewer must hold to see it
        fields = ("decided_at", "reviewer", "action", "note", "outcome", "text")
        decisions = self.conn.execute(
            f"SELECT {', '.join(fields)} FROM quarantine_decisions WHERE item_id = ? ORDER BY rowid", (item_id,)
        )
        item["decisions"] = [dict(zip(fields, row, strict=True)) for row in decisions]
        return item

    def record_decision(
        self, item_id: str, reviewer: str, action: str, note: str, outcome: str, status: str, text: str | None = None
    ) -> None:
        """Append to the audit trail (with a reviewer's own text, when they wrote the page) and set the item's
        status, in one transaction."""
        with self.write_transaction():
            self.conn.execute(
                "INSERT INTO quarantine_decisions (item_id, decided_at, reviewer, action, note, outcome, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (item_id, utc_now(), reviewer, action, note, outcome, text),
            )
            self.conn.execute("UPDATE quarantine SET status = ? WHERE item_id = ?", (status, item_id))

    def add_reviewed_chunk(
        self, chunk: Chunk, vector: np.ndarray, exception: bool, embed_model: str | None = None
    ) -> None:
        """Index a chunk a reviewer let in: a released one (an approved exception) or a re-OCR'd page."""
        with self.write_transaction():
            if embed_model is not None:
                self.bind_embedding(embed_model, int(np.asarray(vector).shape[0]))
            if self.conn.execute("SELECT 1 FROM chunks WHERE chunk_id = ?", (chunk.chunk_id,)).fetchall():
                self.conn.execute(
                    "UPDATE chunks SET lifecycle = 'current', exception = ? WHERE chunk_id = ?",
                    (int(exception), chunk.chunk_id),
                )
                return
            ordinal = self.conn.execute(
                "SELECT coalesce(max(ordinal), -1) + 1 FROM chunks WHERE source_id = ? AND source_version = ?",
                (chunk.source_id, chunk.source_version),
            ).fetchall()[0][0]
            self._add_chunk(chunk, ordinal, np.asarray(vector, dtype=np.float32), exception=exception)

    def add_reviewed_page(self, page: PageResult, replaces: str) -> None:
        """Store a page a reviewer wrote (`method: manual`) beside the version's pages, and take out of service the
        chunks of any earlier text written for the same page: ids starting with `replaces`."""
        with self.write_transaction():
            self.conn.execute(
                "UPDATE chunks SET lifecycle = 'quarantined' WHERE source_id = ? AND source_version = ? "
                "AND substr(chunk_id, 1, length(?)) = ? AND lifecycle = 'current'",
                (page.source_id, page.source_version, replaces, replaces),
            )
            self.conn.execute(
                "INSERT INTO pages (source_id, version, ordinal, page) SELECT ?, ?, coalesce(max(ordinal), -1) + 1, ? "
                "FROM pages WHERE source_id = ? AND version = ?",
                (page.source_id, page.source_version, page.model_dump_json(), page.source_id, page.source_version),
            )

    def withdraw_chunk(self, chunk_id: str) -> None:
        """Take a chunk out of service (a released chunk rejected later): it stays stored, never returned."""
        with self.write_transaction():
            self.conn.execute("UPDATE chunks SET lifecycle = 'quarantined' WHERE chunk_id = ?", (chunk_id,))

"""What the embedded catalog remembers about its own runs: the last refresh's figures and the open quarantine's size
after each refresh (for `korpus status` and `/health`), the meta-documents' fingerprints per scope, each file's last
reading (size, times, inode → the version its bytes hashed to), and the counts a health check reads. A part of
`SqliteIndex` (tasks/index/sqlite.py), apart so each file reads in one sitting."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

import apsw

QUARANTINE_HISTORY = 4
"""Refreshes whose open-quarantine size is kept: three rises in a row make `korpus status` say it is growing."""


PRESENT = (
    "EXISTS (SELECT 1 FROM sources s WHERE s.source_id = q.source_id AND s.version = q.source_version "
    "AND s.lifecycle = 'current') OR (NOT EXISTS (SELECT 1 FROM sources s WHERE s.source_id = q.source_id "
    "AND s.version = q.source_version) AND q.last_seen = (SELECT max(last_seen) FROM quarantine o "
    "WHERE o.source_id = q.source_id))"
)
"""SQL over `quarantine q`: the item is about the archive as it is now (see `open_items_of_the_present`)."""


class RefreshRecords:
    """Rows of `index_meta` and the counts over the catalog; every method runs on the index's connection."""

    conn: apsw.Connection
    _retire: Any  # provided by SqliteIndex: take a source's versions out of service

    def withdraw_meta_documents(self) -> int:
        """Retire every meta-document (a build failed: the old registers may name what is no longer there or no
        longer in their scope) and forget their fingerprints, so the next refresh builds them all. Returns how
        many were withdrawn."""
        with self.write_transaction():
            meta = [
                row[0]
                for row in self.conn.execute(
                    "SELECT source_id FROM sources WHERE kind = 'meta' AND lifecycle = 'current'"
                )
            ]
            for source_id in meta:
                self._retire(source_id)
            self.conn.execute("DELETE FROM index_meta WHERE key LIKE 'meta:%'")
        return len(meta)

    def file_readings(self) -> dict[str, tuple[str, int, int, int, int]]:
        """Source id → (version, size, mtime_ns, ctime_ns, inode) of the file's last hashing: discovery trusts the
        version while the file's stat is the same (tasks/receive.py), `korpus refresh --verify` hashes anyway."""
        return {row[0]: tuple(row[1:]) for row in self.conn.execute("SELECT * FROM file_readings")}

    def file_dates(self, source_ids: Iterable[str]) -> dict[str, date]:
        """Each file's date as a reader of the archive knows it: its modification time at its last reading, else the
        day korpus last received it; a source with neither is left out."""
        ids = sorted(set(source_ids))
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        received = self.conn.execute(
            f"SELECT source_id, max(received_at) FROM sources WHERE source_id IN ({marks}) GROUP BY source_id", ids
        )
        dates = {source_id: datetime.fromisoformat(at).date() for source_id, at in received if at}
        read = self.conn.execute(f"SELECT source_id, mtime_ns FROM file_readings WHERE source_id IN ({marks})", ids)
        dates.update({source_id: datetime.fromtimestamp(ns / 1e9, UTC).date() for source_id, ns in read})
        return dates

    def record_file_readings(self, readings: dict[str, tuple[str, int, int, int, int]]) -> None:
        """The files as this discovery found them: readings of files no longer there are forgotten."""
        with self.write_transaction():
            self.conn.execute("DELETE FROM file_readings")
            self.conn.executemany(
                "INSERT INTO file_readings VALUES (?, ?, ?, ?, ?, ?)",
                [(source_id, *reading) for source_id, reading in readings.items()],
            )

    def record_refresh(self, summary: dict[str, Any]) -> None:
        """Keep a finished (or failed) refresh's headline figures for `korpus status`, and the open quarantine's size
        after each of the last few refreshes (`quarantine_history`: a queue that only grows is reported)."""
        with self.write_transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO index_meta VALUES ('last_refresh', ?)",
                (json.dumps(summary, ensure_ascii=False, default=str),),
            )
            history = [*self.quarantine_history(), self.open_items_of_the_present()][-QUARANTINE_HISTORY:]
            self.conn.execute(
                "INSERT OR REPLACE INTO index_meta VALUES ('quarantine_history', ?)", (json.dumps(history),)
            )

    def open_items_of_the_present(self) -> int:
        """Open items about what the archive holds now: of a current version, or of the newest version of a file
        that was never indexed (a refusal a refresh sees again). Items left open on versions since superseded or
        removed are not counted — they say nothing about whether the queue is growing (`korpus gc` resolves them
        once their version expires)."""
        return self.conn.execute(
            f"SELECT count(*) FROM quarantine q WHERE q.status = 'open' AND ({PRESENT})"
        ).fetchall()[0][0]

    def quarantine_history(self) -> list[int]:
        rows = self.conn.execute("SELECT value FROM index_meta WHERE key = 'quarantine_history'").fetchall()
        return json.loads(rows[0][0]) if rows else []

    def last_refresh(self) -> dict[str, Any] | None:
        rows = self.conn.execute("SELECT value FROM index_meta WHERE key = 'last_refresh'").fetchall()
        return json.loads(rows[0][0]) if rows else None

    def meta_fingerprints(self) -> dict[str, str]:
        """Scope (`tenant/access`) → the fingerprint of the sources its meta-documents were last built from."""
        rows = self.conn.execute("SELECT key, value FROM index_meta WHERE key LIKE 'meta:%'")
        return {key.removeprefix("meta:"): value for key, value in rows}

    def set_meta_fingerprint(self, scope: str, fingerprint: str | None) -> None:
        with self.write_transaction():
            if fingerprint is None:
                self.conn.execute("DELETE FROM index_meta WHERE key = ?", (f"meta:{scope}",))
            else:
                self.conn.execute("INSERT OR REPLACE INTO index_meta VALUES (?, ?)", (f"meta:{scope}", fingerprint))

    def stats(self) -> dict[str, Any]:
        """Counts for a health check: current chunks and sources, open quarantine items, the embedding model."""
        one = lambda sql: self.conn.execute(sql).fetchall()[0][0]  # noqa: E731
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        return {
            "chunks_current": one("SELECT count(*) FROM chunks WHERE lifecycle = 'current'"),
            "sources_current": one("SELECT count(*) FROM sources WHERE lifecycle = 'current'"),
            "quarantine_open": one("SELECT count(*) FROM quarantine WHERE status = 'open'"),
            "last_switch": one("SELECT max(switched_at) FROM sources"),
            "embed_model": meta.get("embed_model"),
            "embed_dims": int(meta["embed_dims"]) if "embed_dims" in meta else None,
        }

    def chunk_count(self, lifecycle: str | None = "current") -> int:
        if lifecycle is None:
            return self.conn.execute("SELECT count(*) FROM chunks").fetchall()[0][0]
        return self.conn.execute("SELECT count(*) FROM chunks WHERE lifecycle = ?", (lifecycle,)).fetchall()[0][0]

"""The embedded index and catalog: one SQLite file through apsw, FTS5 for BM25; exact kNN in numpy over an
in-memory snapshot of the vectors (tasks/index/vector_cache.py), which sqlite-vec stores and checks against.

Access and lifecycle filters are part of every query on both sides, applied before the top-N cut, so a chunk the
caller may not see can never take a rank. A source version's chunks are written and switched current in one
transaction: readers see the old version or the new one, never both or neither.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec

from korpus.datamodel import Chunk, Lifecycle, Locator, PageResult, QuarantineItem, Source
from tasks.index.backend import IndexMismatchError
from tasks.index.exact import mentions
from tasks.index.sqlite_search import SqliteSearch
from tasks.index.vector_cache import GENERATION_SQL
from tasks.runtime.crash_points import crash_point
from tasks.text.analysis import terms_of, words
from tasks.text.identifiers import extract_identifiers

SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    source_id TEXT NOT NULL, version TEXT NOT NULL, kind TEXT, size INTEGER, path TEXT,
    owner TEXT, access TEXT, tenant TEXT, lifecycle TEXT NOT NULL, pages INTEGER, chunks INTEGER,
    received_at TEXT NOT NULL, switched_at TEXT, PRIMARY KEY (source_id, version));
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL UNIQUE, source_id TEXT NOT NULL,
    source_version TEXT NOT NULL, ordinal INTEGER NOT NULL, page INTEGER, t_start REAL, t_end REAL,
    heading TEXT, start_off INTEGER, end_off INTEGER, section_path TEXT NOT NULL, text TEXT NOT NULL,
    body TEXT NOT NULL, previous_id TEXT, next_id TEXT, owner TEXT NOT NULL, access TEXT NOT NULL,
    tenant TEXT NOT NULL, lifecycle TEXT NOT NULL, policy_version TEXT NOT NULL, language TEXT NOT NULL,
    exception INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks (source_id, source_version);
CREATE INDEX IF NOT EXISTS chunks_by_filter ON chunks (lifecycle, access);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms USING fts5(
    terms, exact, tokenize = "unicode61 remove_diacritics 0 tokenchars '.,''’:_'");
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms_vocab USING fts5vocab(chunk_terms, 'col');
CREATE TABLE IF NOT EXISTS pages (
    source_id TEXT NOT NULL, version TEXT NOT NULL, ordinal INTEGER NOT NULL, page TEXT NOT NULL,
    PRIMARY KEY (source_id, version, ordinal));
CREATE TABLE IF NOT EXISTS chunk_identifiers (rowid INTEGER NOT NULL, identifier TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunk_identifiers_by_value ON chunk_identifiers (identifier);
CREATE TABLE IF NOT EXISTS chunk_vectors (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine (
    item_id TEXT PRIMARY KEY, source_id TEXT NOT NULL, source_version TEXT, page INTEGER, t_start REAL,
    chunk_id TEXT, reasons TEXT NOT NULL, detail TEXT, evidence TEXT, evidence_path TEXT, chunk TEXT,
    first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'open',
    access TEXT, kind TEXT, readings TEXT);
CREATE TABLE IF NOT EXISTS pending_pages (
    source_id TEXT NOT NULL, version TEXT NOT NULL, page INTEGER NOT NULL, attempts INTEGER NOT NULL,
    error TEXT NOT NULL, last_tried TEXT NOT NULL, PRIMARY KEY (source_id, version, page));
CREATE TABLE IF NOT EXISTS quarantine_decisions (
    item_id TEXT NOT NULL, decided_at TEXT NOT NULL, reviewer TEXT NOT NULL, action TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL DEFAULT '', text TEXT);
CREATE INDEX IF NOT EXISTS quarantine_by_status ON quarantine (status, first_seen);
"""
# Columns added after the first release: (table, column, type). An older index gets them on open.
ADDED_COLUMNS = (("quarantine", "access", "TEXT"), ("quarantine", "kind", "TEXT"), ("quarantine", "readings", "TEXT"),
                 ("quarantine_decisions", "text", "TEXT"))  # fmt: skip


# What a filter needs, in a table of two narrow columns: `visible` is the access rule of a current chunk and NULL
# otherwise. BM25 joins it instead of `chunks`, whose rows carry text and body: at 100k chunks the join over a
# query's matches fell from p95 ~75 ms to ~19 ms. Triggers keep it exact inside every writing transaction.
VISIBILITY_SQL = """
CREATE TABLE IF NOT EXISTS chunk_visibility (rowid INTEGER PRIMARY KEY, visible TEXT);
CREATE TRIGGER IF NOT EXISTS chunks_visibility_insert AFTER INSERT ON chunks BEGIN
    INSERT OR REPLACE INTO chunk_visibility VALUES (new.rowid, CASE WHEN new.lifecycle = 'current' THEN new.access END);
END;
CREATE TRIGGER IF NOT EXISTS chunks_visibility_update AFTER UPDATE OF lifecycle, access ON chunks BEGIN
    UPDATE chunk_visibility SET visible = CASE WHEN new.lifecycle = 'current' THEN new.access END
    WHERE rowid = new.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_visibility_delete AFTER DELETE ON chunks BEGIN
    DELETE FROM chunk_visibility WHERE rowid = old.rowid;
END;
INSERT OR REPLACE INTO chunk_visibility SELECT rowid, CASE WHEN lifecycle = 'current' THEN access END FROM chunks;
"""
DERIVED_TRIGGERS = 6  # chunks_generation_* (tasks/index/vector_cache.py) and chunks_visibility_*


@dataclass(frozen=True)
class StoredChunk:
    chunk: Chunk
    ordinal: int
    vector: np.ndarray
    kind: str | None
    exception: bool


class IndexWriteError(RuntimeError):
    """The index file could not be written (disk full, read-only): the refresh stops, nothing half-switched."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SqliteIndex:
    """Catalog + hybrid index in one SQLite file.

    >>> index = SqliteIndex(Path("korpus-data/korpus.db"))
    >>> hits = Retriever(index.searcher).search("договор поставки", query_vector, scopes=["public"], k=5)
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = apsw.Connection(str(path))
        self.conn.enable_load_extension(True)
        self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.enable_load_extension(False)
        self.conn.setbusytimeout(30_000)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        with self.conn:
            for table, column, kind in ADDED_COLUMNS:  # before SCHEMA: its indexes may name a new column
                have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
                if have and column not in have:
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            self.conn.execute(SCHEMA)
        triggers = "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'chunks_%'"
        if self.conn.execute(triggers).fetchall()[0][0] < DERIVED_TRIGGERS:
            # A write: take the lock up front (a deferred transaction upgraded later can fail at once with BUSY).
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(GENERATION_SQL)
                self.conn.execute(VISIBILITY_SQL)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> SqliteIndex:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- embedding model binding ------------------------------------------------------------------------

    def bind_embedding(self, model_name: str, dims: int) -> None:
        """Record the embedding model on first use; refuse a different one later."""
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        if "embed_dims" not in meta:
            with self.conn:
                self.conn.execute(
                    "INSERT INTO index_meta VALUES ('embed_model', ?), ('embed_dims', ?)",
                    (model_name, str(dims)),
                )
            return
        if int(meta["embed_dims"]) != dims or meta["embed_model"] != model_name:
            raise IndexMismatchError(
                f"index {self.path} holds {meta['embed_dims']}-dim vectors from {meta['embed_model']!r}; "
                f"the configured model is {model_name!r} ({dims} dims). Use the model the index was built "
                f"with, or move the index to the new model: korpus reindex --embed-model PATH."
            )

    def vector_table(self) -> str:
        """The table holding the current model's vectors (the 'alias' a reindex swaps)."""
        rows = self.conn.execute("SELECT value FROM index_meta WHERE key = 'vector_table'").fetchall()
        return rows[0][0] if rows else "chunk_vectors"

    def reindex_vectors(
        self,
        model_name: str,
        dims: int,
        embed: Callable[[list[str]], np.ndarray],
        batch: int = 64,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Embed every current chunk's stored text with another model into a new vector table, then swap it in.

        No parsing or OCR: the chunk text is in the index. Queries keep using the old table until the swap, a
        single transaction that also embeds any chunk published meanwhile, records the new model and drops the
        old vectors. A refresh still running with the old model is refused at publish (IndexMismatchError).
        """
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        old_table = self.vector_table()
        table = "chunk_vectors_" + re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_") + f"_{dims}"
        if meta.get("embed_model") == model_name and meta.get("embed_dims") == str(dims):
            raise ValueError(f"index {self.path} already holds {dims}-dim vectors from {model_name!r}")
        if table == old_table:
            table += "_new"
        with self.conn:
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")
            self.conn.execute(f"CREATE TABLE {table} (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
        missing_sql = (
            f"SELECT c.rowid, c.text FROM chunks c WHERE c.lifecycle = 'current' "
            f"AND NOT EXISTS (SELECT 1 FROM {table} v WHERE v.rowid = c.rowid) ORDER BY c.rowid LIMIT ?"
        )
        total = self.chunk_count()

        def fill(rows: list[tuple[int, str]]) -> None:
            vectors = np.asarray(embed([text for _, text in rows]), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[1] != dims:
                raise IndexMismatchError(f"{model_name!r} returned vectors of shape {vectors.shape}, not (n, {dims})")
            self.conn.executemany(
                f"INSERT INTO {table} (rowid, embedding) VALUES (?, ?)",
                [(rowid, vector.tobytes()) for (rowid, _), vector in zip(rows, vectors, strict=True)],
            )

        done = 0
        while rows := self.conn.execute(missing_sql, (batch,)).fetchall():
            with self.conn:
                fill(rows)
            done += len(rows)
            if progress is not None:
                progress(done, max(total, done))
        with self.conn:  # the swap
            while rows := self.conn.execute(missing_sql, (batch,)).fetchall():
                fill(rows)
                done += len(rows)
            self.conn.execute(
                "INSERT OR REPLACE INTO index_meta VALUES ('embed_model', ?), ('embed_dims', ?), ('vector_table', ?)",
                (model_name, str(dims), table),
            )
            if old_table == "chunk_vectors":
                self.conn.execute("DELETE FROM chunk_vectors")  # the schema's own table stays, empty
            else:
                self.conn.execute(f"DROP TABLE {old_table}")
        return {
            "model": model_name,
            "dims": dims,
            "chunks": done,
            "replaced": {"model": meta.get("embed_model"), "dims": meta.get("embed_dims")},
        }

    # --- catalog ---------------------------------------------------------------------------------------

    def indexed_versions(self) -> dict[str, dict[str, tuple]]:
        """Source id → {version: (owner, access, tenant)} for every version that is current (the files under the
        root; the meta-documents korpus writes about them are not files and are left out)."""
        known: dict[str, dict[str, tuple]] = {}
        rows = self.conn.execute(
            "SELECT source_id, version, owner, access, tenant FROM sources WHERE lifecycle = 'current' "
            "AND kind IS NOT 'meta'"
        )
        for source_id, version, owner, access, tenant in rows:
            known.setdefault(source_id, {})[version] = (owner, access, tenant)
        return known

    def current_vectors(self, source_id: str) -> dict[str, np.ndarray]:
        """Chunk text → vector of a source's current chunks (to reuse for unchanged text in a new version)."""
        rows = self.conn.execute(
            f"SELECT c.text, v.embedding FROM chunks c INDEXED BY chunks_by_source JOIN {self.vector_table()} v "
            "ON v.rowid = c.rowid WHERE c.source_id = ? AND c.lifecycle = 'current'",
            (source_id,),
        )
        return {text: np.frombuffer(blob, dtype=np.float32) for text, blob in rows}

    def record_refresh(self, summary: dict[str, Any]) -> None:
        """Keep a finished refresh's headline figures for `korpus status`."""
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO index_meta VALUES ('last_refresh', ?)",
                              (json.dumps(summary, ensure_ascii=False, default=str),))  # fmt: skip

    def last_refresh(self) -> dict[str, Any] | None:
        rows = self.conn.execute("SELECT value FROM index_meta WHERE key = 'last_refresh'").fetchall()
        return json.loads(rows[0][0]) if rows else None

    def served_chunk_keys(self) -> dict[str, str]:
        """Source id → a digest of the chunk ids it serves now (changes with a new version and a review decision)."""
        rows = self.conn.execute(
            "SELECT source_id, group_concat(chunk_id, ',') FROM (SELECT source_id, chunk_id FROM chunks "
            "WHERE lifecycle = 'current' ORDER BY source_id, chunk_id) GROUP BY source_id"
        )
        return {source_id: hashlib.sha256(ids.encode()).hexdigest()[:32] for source_id, ids in rows}

    def meta_fingerprints(self) -> dict[str, str]:
        """Scope (`tenant/access`) → the fingerprint of the sources its meta-documents were last built from."""
        rows = self.conn.execute("SELECT key, value FROM index_meta WHERE key LIKE 'meta:%'")
        return {key.removeprefix("meta:"): value for key, value in rows}

    def set_meta_fingerprint(self, scope: str, fingerprint: str | None) -> None:
        with self.conn:
            if fingerprint is None:
                self.conn.execute("DELETE FROM index_meta WHERE key = ?", (f"meta:{scope}",))
            else:
                self.conn.execute("INSERT OR REPLACE INTO index_meta VALUES (?, ?)", (f"meta:{scope}", fingerprint))

    def refused_versions(self) -> dict[str, dict[str, set[str]]]:
        """Source id → {version: reason codes} for versions refused as a whole (not single pages)."""
        refused: dict[str, dict[str, set[str]]] = {}
        rows = self.conn.execute(
            "SELECT source_id, source_version, reasons FROM quarantine WHERE page IS NULL AND chunk_id IS NULL "
            "AND t_start IS NULL AND status = 'open'"
        )
        for source_id, version, reasons in rows:
            refused.setdefault(source_id, {}).setdefault(version, set()).update(json.loads(reasons))
        return refused

    def sources(self) -> list[dict[str, Any]]:
        cursor = self.conn.execute(
            "SELECT source_id, version, kind, owner, access, tenant, lifecycle, pages, chunks, switched_at "
            "FROM sources ORDER BY source_id, received_at"
        )
        return _dicts(cursor)

    def source_version(self, source_id: str, version: str | None) -> dict[str, Any] | None:
        """One version's catalog row (kind, path, owner, access, tenant, lifecycle, pages), by primary key."""
        names = ("source_id", "version", "kind", "path", "owner", "access", "tenant", "lifecycle", "pages")
        rows = self.conn.execute(
            f"SELECT {', '.join(names)} FROM sources WHERE source_id = ? AND version = ?", (source_id, version)
        ).fetchall()
        return dict(zip(names, rows[0], strict=True)) if rows else None

    def record_quarantine(self, items: Iterable[QuarantineItem]) -> int:
        """Add items to the queue; an item seen again keeps its first-seen time and any decision made on it."""
        count = 0
        with self.conn:
            for item in items:
                self.conn.execute(
                    "INSERT INTO quarantine (item_id, source_id, source_version, page, t_start, chunk_id, reasons, "
                    "detail, evidence, evidence_path, chunk, first_seen, last_seen, access, kind, readings) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(item_id) DO UPDATE SET last_seen = excluded.last_seen, "
                    "reasons = excluded.reasons, detail = excluded.detail, "
                    "access = coalesce(excluded.access, access), kind = coalesce(excluded.kind, kind), "
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
                        _now(),
                        item.access,
                        item.kind,
                        json.dumps(item.readings, ensure_ascii=False) if item.readings else None,
                    ),
                )
                count += 1
        return count

    def record_pending(self, source: Source, unread: dict[int, str]) -> dict[int, int]:
        """Pages a transient fault kept unread in this refresh: count one more attempt for each; returns page →
        refreshes tried so far (the flow quarantines a page past `KORPUS_PENDING_MAX_REFRESHES`)."""
        attempts: dict[int, int] = {}
        with self.conn:
            for page, error in unread.items():
                self.conn.execute(
                    "INSERT INTO pending_pages VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(source_id, version, page) "
                    "DO UPDATE SET attempts = attempts + 1, error = excluded.error, last_tried = excluded.last_tried",
                    (source.source_id, source.version, page, error[:500], _now()),
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
        names = ("item_id", "source_id", "source_version", "page", "t_start", "chunk_id", "reasons", "detail",
                 "first_seen", "last_seen", "status")  # fmt: skip
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
        if item["access"] is None or item["kind"] is None:  # an item recorded before these columns: its version's
            row = self.source_version(item["source_id"], item["source_version"])
            if row:
                item["access"], item["kind"] = item["access"] or row["access"], item["kind"] or row["kind"]
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
        with self.conn:
            self.conn.execute(
                "INSERT INTO quarantine_decisions (item_id, decided_at, reviewer, action, note, outcome, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (item_id, _now(), reviewer, action, note, outcome, text),
            )
            self.conn.execute("UPDATE quarantine SET status = ? WHERE item_id = ?", (status, item_id))

    def is_current_version(self, source_id: str, version: str) -> bool:
        rows = self.conn.execute(
            "SELECT 1 FROM sources WHERE source_id = ? AND version = ? AND lifecycle = 'current'", (source_id, version)
        ).fetchall()
        return bool(rows)

    def add_reviewed_chunk(
        self, chunk: Chunk, vector: np.ndarray, exception: bool, embed_model: str | None = None
    ) -> None:
        """Index a chunk a reviewer let in: a released one (an approved exception) or a re-OCR'd page."""
        with self.conn:
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
        with self.conn:
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
        with self.conn:
            self.conn.execute("UPDATE chunks SET lifecycle = 'quarantined' WHERE chunk_id = ?", (chunk_id,))

    def reconcile(self) -> int:
        """Repair any state a crash could leave: exactly one current version per source, and current chunks only
        for current versions. Returns the number of rows repaired (0 in a healthy index)."""
        repaired = 0
        with self.conn:
            doubles = self.conn.execute(
                "SELECT source_id FROM sources WHERE lifecycle = 'current' GROUP BY source_id HAVING count(*) > 1"
            ).fetchall()
            for (source_id,) in doubles:
                keep = self.conn.execute(
                    "SELECT version FROM sources WHERE source_id = ? AND lifecycle = 'current' "
                    "ORDER BY switched_at DESC, rowid DESC LIMIT 1",
                    (source_id,),
                ).fetchall()[0][0]
                self._retire(source_id, keep_version=keep)
                repaired += 1
            self.conn.execute(
                "UPDATE chunks SET lifecycle = 'superseded' WHERE lifecycle = 'current' AND NOT EXISTS ("
                "SELECT 1 FROM sources s WHERE s.source_id = chunks.source_id AND s.version = chunks.source_version "
                "AND s.lifecycle = 'current')"
            )
            repaired += self.conn.changes()
        return repaired

    # --- writes ----------------------------------------------------------------------------------------

    def publish_version(
        self,
        source: Source,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        pages: Sequence[PageResult] | int,
        embed_model: str | None = None,
    ) -> None:
        """Store a source version's chunks (and page texts, for re-chunking without re-parsing) and make it the
        only current version, in one transaction. With `embed_model`, the vectors' model is checked against the
        index inside that transaction (a reindex may have swapped models since they were computed). A disk that
        is full or a file that cannot be written rolls the transaction back: `IndexWriteError` says so, and
        every version current before stays served."""
        page_results = [] if isinstance(pages, int) else list(pages)
        page_count = pages if isinstance(pages, int) else len(page_results)
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors for {source.source_id}")
        vectors = np.asarray(vectors, dtype=np.float32)
        with self._written(source.source_id), self.conn:
            if embed_model is not None and len(chunks):
                self.bind_embedding(embed_model, int(vectors.shape[1]))
            self._retire(source.source_id, keep_version=source.version)
            self.conn.execute("DELETE FROM pending_pages WHERE source_id = ?", (source.source_id,))
            self.conn.execute(
                "DELETE FROM chunk_terms WHERE rowid IN (SELECT rowid FROM chunks WHERE source_id = ? "
                "AND source_version = ?)",
                (source.source_id, source.version),
            )
            table = self.vector_table()
            self.conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM chunks WHERE source_id = ? "
                "AND source_version = ?)",
                (source.source_id, source.version),
            )
            self.conn.execute(
                "DELETE FROM chunks WHERE source_id = ? AND source_version = ?",
                (source.source_id, source.version),
            )
            for ordinal, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True)):
                self._add_chunk(chunk, ordinal, vector, table=table)
            self.conn.execute(
                "DELETE FROM pages WHERE source_id = ? AND version = ?", (source.source_id, source.version)
            )
            for ordinal, page in enumerate(page_results):
                self.conn.execute(
                    "INSERT INTO pages (source_id, version, ordinal, page) VALUES (?, ?, ?, ?)",
                    (source.source_id, source.version, ordinal, page.model_dump_json()),
                )
            crash_point("publish-mid-transaction")
            self.conn.execute(
                "INSERT INTO sources (source_id, version, kind, size, path, owner, access, tenant, lifecycle, "
                "pages, chunks, received_at, switched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'current', ?, ?, ?, ?) "
                "ON CONFLICT(source_id, version) DO UPDATE SET lifecycle = 'current', owner = excluded.owner, "
                "access = excluded.access, tenant = excluded.tenant, pages = excluded.pages, "
                "chunks = excluded.chunks, switched_at = excluded.switched_at",
                (
                    source.source_id,
                    source.version,
                    source.kind.value if source.kind else None,
                    source.size,
                    source.path,
                    source.owner,
                    source.access,
                    source.tenant,
                    page_count,
                    len(chunks),
                    _now(),
                    _now(),
                ),
            )

    @contextmanager
    def _written(self, source_id: str) -> Iterator[None]:
        """A write SQLite cannot make (disk full, read-only file, I/O error) as `IndexWriteError`, saying what to do;
        the transaction inside has rolled back by then."""
        try:
            yield
        except (apsw.FullError, apsw.ReadOnlyError, apsw.IOError, apsw.CantOpenError) as exc:
            raise IndexWriteError(
                f"cannot write the index {self.path} ({type(exc).__name__}: {exc}) while publishing {source_id}: "
                "nothing was switched, the versions current before are still served; free disk space or make the "
                "data directory writable, then run `korpus refresh` again"
            ) from exc

    def _add_chunk(
        self, chunk: Chunk, ordinal: int, vector: np.ndarray, exception: bool = False, table: str | None = None
    ) -> None:
        """Insert one chunk with its terms, vector (into `table`, looked up when not given) and identifiers."""
        rowid = self._insert_chunk(chunk, ordinal, exception)
        tokens = words(chunk.text)
        self.conn.execute(
            "INSERT INTO chunk_terms (rowid, terms, exact) VALUES (?, ?, ?)",
            (rowid, " ".join(terms_of(tokens)), " ".join(tokens)),
        )
        self.conn.execute(
            f"INSERT INTO {table or self.vector_table()} (rowid, embedding) VALUES (?, ?)", (rowid, vector.tobytes())
        )
        for identifier in extract_identifiers(chunk.body):
            self.conn.execute("INSERT INTO chunk_identifiers (rowid, identifier) VALUES (?, ?)", (rowid, identifier))

    def _insert_chunk(self, chunk: Chunk, ordinal: int, exception: bool = False) -> int:
        loc = chunk.locator
        self.conn.execute(
            "INSERT INTO chunks (chunk_id, source_id, source_version, ordinal, page, t_start, t_end, heading, "
            "start_off, end_off, section_path, text, body, previous_id, next_id, owner, access, tenant, "
            "lifecycle, policy_version, language, exception) "
            f"VALUES ({', '.join('?' * 22)})",
            (
                chunk.chunk_id,
                chunk.source_id,
                chunk.source_version,
                ordinal,
                loc.page,
                loc.t_start,
                loc.t_end,
                loc.heading,
                loc.start,
                loc.end,
                json.dumps(chunk.section_path, ensure_ascii=False),
                chunk.text,
                chunk.body,
                chunk.previous_id,
                chunk.next_id,
                chunk.owner,
                chunk.access_rule,
                chunk.tenant,
                Lifecycle.current.value,
                chunk.policy_version,
                chunk.language,
                int(exception),
            ),
        )
        return self.conn.last_insert_rowid()

    def _retire(self, source_id: str, keep_version: str | None = None) -> None:
        params: tuple = (source_id,) if keep_version is None else (source_id, keep_version)
        extra = "" if keep_version is None else " AND version != ?"
        self.conn.execute(
            f"UPDATE sources SET lifecycle = 'superseded' WHERE source_id = ? AND lifecycle = 'current'{extra}",
            params,
        )
        extra = "" if keep_version is None else " AND source_version != ?"
        # Without INDEXED BY the planner (no ANALYZE statistics) may pick chunks_by_filter for lifecycle = 'current'
        # and scan every current chunk: 37 ms a publish at 30k chunks, growing with the corpus.
        self.conn.execute(
            "UPDATE chunks INDEXED BY chunks_by_source SET lifecycle = 'superseded' "
            f"WHERE source_id = ? AND lifecycle = 'current'{extra}",
            params,
        )

    def retire_source(self, source_id: str) -> None:
        """A source removed from the root (or no longer admissible): its chunks stop being served."""
        with self.conn:
            self._retire(source_id)
            crash_point("retire-mid-transaction")
            self.conn.execute("DELETE FROM pending_pages WHERE source_id = ?", (source_id,))

    def relabel_source(self, source: Source) -> None:
        """Manifest metadata of a known version changed: update it in place, no re-parsing."""
        with self.conn:
            self.conn.execute(
                "UPDATE sources SET owner = ?, access = ?, tenant = ? WHERE source_id = ? AND version = ?",
                (source.owner, source.access, source.tenant, source.source_id, source.version),
            )
            self.conn.execute(
                "UPDATE chunks SET owner = ?, access = ?, tenant = ? WHERE source_id = ? AND source_version = ?",
                (source.owner, source.access, source.tenant, source.source_id, source.version),
            )

    # --- reads: the search side is tasks/index/sqlite_search.py (composed by tasks/retrieval/retriever.py) ---

    @property
    def searcher(self) -> SqliteSearch:
        """This index as a `SearchBackend`."""
        return SqliteSearch(self)

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        return self.searcher.exact_occurrences(text, scopes, limit)

    def count_mentions(self, text: str, scopes: Sequence[str]) -> dict[str, Any]:
        return mentions(self.searcher.exact_occurrences(text, scopes, limit=0))

    def embedding_model(self) -> tuple[str, int] | None:
        """(model name, dimension) of the stored vectors; None before the first publish."""
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        return (meta["embed_model"], int(meta["embed_dims"])) if "embed_model" in meta else None

    def chunk_states(self) -> dict[str, tuple[str, str, str, str, bool]]:
        """chunk id → (lifecycle, access, owner, tenant, exception) of every stored chunk (what a mirror serves)."""
        rows = self.conn.execute("SELECT chunk_id, lifecycle, access, owner, tenant, exception FROM chunks")
        return {row[0]: (row[1], row[2], row[3], row[4], bool(row[5])) for row in rows}

    def stored_chunks(self, chunk_ids: Sequence[str]) -> Iterator[StoredChunk]:
        """The chunks with these ids as stored — text, locator, labels, vector, the source's kind — to mirror them
        without re-parsing or re-embedding."""
        marks = ", ".join("?" for _ in chunk_ids)
        cursor = self.conn.execute(
            "SELECT c.chunk_id, c.source_id, c.source_version, c.ordinal, c.page, c.t_start, c.t_end, "
            "c.section_path, c.text, c.body, c.owner, c.access, c.tenant, c.language, c.policy_version, "
            f"c.exception, s.kind, v.embedding FROM chunks c JOIN {self.vector_table()} v ON v.rowid = c.rowid "
            "LEFT JOIN sources s ON s.source_id = c.source_id AND s.version = c.source_version "
            f"WHERE c.chunk_id IN ({marks})",
            list(chunk_ids),
        )
        for row in cursor:
            (chunk_id, source_id, version, ordinal, page, t0, t1, section, text, body, owner, access, tenant,
             language, policy, exception, kind, blob) = row  # fmt: skip
            chunk = Chunk(chunk_id=chunk_id, source_id=source_id, source_version=version,
                          section_path=json.loads(section), locator=Locator(page=page, t_start=t0, t_end=t1),
                          text=text, body=body, owner=owner, access_rule=access, tenant=tenant,
                          policy_version=policy, language=language)  # fmt: skip
            yield StoredChunk(chunk, ordinal, np.frombuffer(blob, dtype=np.float32), kind, bool(exception))

    def current_source(self, source_id: str) -> tuple[Source, list[PageResult]] | None:
        """The current version of a source with its stored page texts and units."""
        rows = self.conn.execute(
            "SELECT version, kind, size, path, owner, access, tenant FROM sources WHERE source_id = ? "
            "AND lifecycle = 'current'",
            (source_id,),
        ).fetchall()
        if not rows:
            return None
        version, kind, size, path, owner, access, tenant = rows[0]
        source = Source(source_id=source_id, version=version, kind=kind, size=size or 0, path=path, owner=owner,
                        access=access, tenant=tenant)  # fmt: skip
        pages = [
            PageResult.model_validate_json(row[0])
            for row in self.conn.execute(
                "SELECT page FROM pages WHERE source_id = ? AND version = ? ORDER BY ordinal", (source_id, version)
            )
        ]
        return source, pages

    def source_chunks(self, source_id: str) -> list[dict[str, Any]]:
        """The current chunks of a source, in order."""
        cursor = self.conn.execute(
            "SELECT chunk_id, page, t_start, t_end, start_off, end_off, section_path, text, body, policy_version, "
            "lifecycle, exception FROM chunks INDEXED BY chunks_by_source WHERE source_id = ? "
            "AND lifecycle = 'current' ORDER BY source_version, ordinal",
            (source_id,),
        )
        out = _dicts(cursor)
        for row in out:
            row["section_path"] = json.loads(row["section_path"])
        return out

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


def _dicts(cursor: apsw.Cursor) -> list[dict[str, Any]]:
    """Rows as dicts. apsw has no description for an empty result (ExecutionCompleteError): that is no rows."""
    try:
        names = [d[0] for d in cursor.getdescription()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(names, row, strict=True)) for row in cursor]

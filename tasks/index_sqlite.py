"""The embedded index and catalog: one SQLite file through apsw, FTS5 for BM25; exact kNN in numpy over an
in-memory snapshot of the vectors (tasks/vector_cache.py), which sqlite-vec stores and checks against.

Access and lifecycle filters are part of every query on both sides, applied before the top-N cut, so a chunk the
caller may not see can never take a rank. A source version's chunks are written and switched current in one
transaction: readers see the old version or the new one, never both or neither.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np
import sqlite_vec

from korpus.datamodel import Chunk, Lifecycle, PageResult, QuarantineItem, Source
from tasks.analysis import analyse, terms_of, words
from tasks.audio import timecode
from tasks.crash_points import crash_point
from tasks.identifiers import extract_identifiers
from tasks.typos import expand
from tasks.vector_cache import GENERATION_SQL, Snapshot, cache_for

if TYPE_CHECKING:
    from tasks.rerank import Reranker

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


SEARCH_MODES = ("hybrid", "hybrid+rerank", "hybrid-rrf", "bm25", "bm25-nostem", "dense")
HYBRID_MODES = ("hybrid", "hybrid+rerank", "hybrid-rrf")


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
DERIVED_TRIGGERS = 6  # chunks_generation_* (tasks/vector_cache.py) and chunks_visibility_*


class IndexWriteError(RuntimeError):
    """The index file could not be written (disk full, read-only): the refresh stops, nothing half-switched."""


class IndexMismatchError(RuntimeError):
    """The index was built with another embedding model or dimension than the one asked to query it."""


_STAMP = re.compile(r"\[(\d\d:\d\d:\d\d)\]")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _fts_query(terms: Iterable[str], column: str = "terms") -> str | None:
    unique = list(dict.fromkeys(t for t in terms if t))
    if not unique:
        return None
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in unique)
    return f"{column} : ({quoted})"


def rrf_fuse(rankings: Sequence[Sequence[int]], k: int) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: score = Σ 1/(k + rank), rank starting at 1."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, rowid in enumerate(ranking, start=1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def idf_coverage(terms: Sequence[str], held: Iterable[str], df: dict[str, int], total: int) -> float:
    """The IDF-weighted share of `terms` found among `held` (a chunk's terms); `df` gives document frequencies
    out of `total` documents (a term missing from `df` counts as rare). The routing measure of every backend."""
    held = set(held)
    idf = {t: math.log(1.0 + max(total - df.get(t, 0) + 0.5, 0.5) / (df.get(t, 0) + 0.5)) for t in terms}
    return sum(idf[t] for t in terms if t in held) / sum(idf.values())


def locate_occurrences(
    text: str, rows: Iterable[tuple[str, int | None, float | None, str, str]], limit: int
) -> dict[str, Any]:
    """Every occurrence of `text` (case-insensitive, any run of whitespace between its words) in the bodies of
    `rows` — (source id, page, start time, body, chunk id) of chunks that matched the phrase — with file, page or
    timecode, the line, ±80 characters of context, counts per source and the total. Shared by every backend."""
    pattern = re.compile(r"\s+".join(re.escape(part) for part in text.split()), re.IGNORECASE)
    occurrences: list[dict[str, Any]] = []
    by_source: dict[str, int] = {}
    for source_id, page, t_start, body, chunk_id in rows:
        for match in pattern.finditer(body):
            by_source[source_id] = by_source.get(source_id, 0) + 1
            if len(occurrences) >= limit:
                continue
            line_start = body.rfind("\n", 0, match.start()) + 1
            line_end = body.find("\n", match.end())
            stamp = _STAMP.findall(body[: match.start()])
            occurrences.append(
                {
                    "source_id": source_id,
                    "page": page,
                    "timecode": stamp[-1] if stamp else (timecode(t_start) if t_start is not None else None),
                    "line": body[line_start : line_end if line_end >= 0 else len(body)].strip(),
                    "context": body[max(0, match.start() - 80) : match.end() + 80].replace("\n", " "),
                    "chunk_id": chunk_id,
                }
            )
    return {"query": text, "total": sum(by_source.values()), "by_source": by_source, "occurrences": occurrences}


class SqliteIndex:
    """Catalog + hybrid index in one SQLite file.

    >>> index = SqliteIndex(Path("korpus-data/korpus.db"))
    >>> hits = index.search("договор поставки", query_vector, scopes=["public"], k=5)
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

    def _vector_table(self) -> str:
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
        old_table = self._vector_table()
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
            f"SELECT c.text, v.embedding FROM chunks c INDEXED BY chunks_by_source JOIN {self._vector_table()} v "
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
            table = self._vector_table()
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
            f"INSERT INTO {table or self._vector_table()} (rowid, embedding) VALUES (?, ?)", (rowid, vector.tobytes())
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

    # --- reads -----------------------------------------------------------------------------------------

    @staticmethod
    def _filter_sql(scopes: Sequence[str]) -> tuple[str, list[Any]]:
        if not scopes:
            return "0", []
        marks = ", ".join("?" for _ in scopes)
        return f"c.lifecycle = 'current' AND c.access IN ({marks})", list(scopes)

    @staticmethod
    def _visible_sql(scopes: Sequence[str]) -> tuple[str, list[Any]]:
        """The same filter on `chunk_visibility v` (current and in scope)."""
        if not scopes:
            return "0", []
        return f"v.visible IN ({', '.join('?' for _ in scopes)})", list(scopes)

    def lexical_ranking(
        self,
        query: str,
        scopes: Sequence[str],
        depth: int,
        stemmed: bool = True,
        variants: dict[str, list[str]] | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 over the Russian-analysed `terms` field (with the typo variants of unknown terms; `variants` when the
        caller has them already), or (stemmed=False) over the unstemmed `exact` field."""
        if stemmed:
            terms = analyse(query)
            variants = self.typo_variants(terms) if variants is None else variants
            match = _fts_query([*terms, *(v for found in variants.values() for v in found)])
        else:
            match = _fts_query(words(query), column="exact")
        if match is None:
            return []
        where, params = self._visible_sql(scopes)
        weights = "1.0, 0.0" if stemmed else "0.0, 1.0"
        rows = self.conn.execute(
            f"SELECT v.rowid, bm25(chunk_terms, {weights}) AS s FROM chunk_terms "
            f"JOIN chunk_visibility v ON v.rowid = chunk_terms.rowid WHERE chunk_terms MATCH ? AND {where} "
            "ORDER BY s LIMIT ?",
            [match, *params, depth],
        )
        return [(rowid, -score) for rowid, score in rows]

    def term_frequency(self, term: str) -> int:
        """Chunks whose analysed text holds `term` (an index lookup on fts5vocab; deleted rows may count)."""
        rows = self.conn.execute("SELECT doc FROM chunk_terms_vocab WHERE term = ? AND col = 'terms'", (term,))
        found = rows.fetchall()
        return found[0][0] if found else 0

    def typo_variants(self, terms: Sequence[str]) -> dict[str, list[str]]:
        """Indexed terms a typo away from each query term the index does not know (tasks/typos.py)."""

        def starting_with(letter: str) -> list[tuple[str, int]]:
            return self.conn.execute(
                "SELECT term, doc FROM chunk_terms_vocab WHERE term >= ? AND term < ? AND col = 'terms'",
                (letter, chr(ord(letter) + 1)),
            ).fetchall()

        return expand(terms, self.term_frequency, starting_with)

    def identifier_ranking(self, identifiers: Sequence[str], scopes: Sequence[str], depth: int) -> list[int]:
        """Chunks holding the query's identifiers exactly, most identifiers matched first."""
        if not identifiers:
            return []
        where, params = self._visible_sql(scopes)
        marks = ", ".join("?" for _ in identifiers)
        rows = self.conn.execute(
            "SELECT v.rowid, count(DISTINCT i.identifier) AS n FROM chunk_identifiers i "
            f"JOIN chunk_visibility v ON v.rowid = i.rowid WHERE i.identifier IN ({marks}) AND {where} "
            "GROUP BY v.rowid ORDER BY n DESC, v.rowid LIMIT ?",
            [*identifiers, *params, depth],
        )
        return [rowid for rowid, _ in rows]

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        """`search_exact`: every occurrence of `text` (case-insensitive, any run of whitespace between its words)
        in current chunks the scopes may see: file, page or timecode, the line, context, and the total count."""
        tokens = words(text)
        if not tokens:
            return {"query": text, "total": 0, "by_source": {}, "occurrences": []}
        where, params = self._filter_sql(scopes)
        phrase = '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'
        rows = self.conn.execute(
            "SELECT c.source_id, c.page, c.t_start, c.body, c.chunk_id FROM chunk_terms "
            f"JOIN chunks c ON c.rowid = chunk_terms.rowid WHERE chunk_terms MATCH ? AND {where} "
            "ORDER BY c.source_id, c.page, c.t_start, c.rowid",
            [f"exact : {phrase}", *params],
        )
        return locate_occurrences(text, rows, limit)

    def count_mentions(self, text: str, scopes: Sequence[str]) -> dict[str, Any]:
        """`count_mentions`: how often `text` occurs, per source, in what the scopes may see."""
        found = self.exact_occurrences(text, scopes, limit=0)
        return {"query": text, "total": found["total"], "by_source": found["by_source"]}

    def lexical_coverage(self, query: str, rowid: int, variants: dict[str, list[str]] | None = None) -> float:
        """How much of the query the best lexical hit holds: the IDF-weighted share of the query's analysed terms
        found in that chunk (1.0 = every term). Low coverage means BM25 ranked on a word or two the question
        happens to share — the mark of a paraphrase — and its ranking deserves less weight in the fusion."""
        terms = list(dict.fromkeys(analyse(query)))
        if not terms:
            return 0.0
        stored = self.conn.execute("SELECT terms FROM chunk_terms WHERE rowid = ?", (rowid,)).fetchall()
        held = set(stored[0][0].split()) if stored else set()
        # A mistyped term counts as held when the chunk holds one of its variants, and weighs as that variant.
        for term, found in (self.typo_variants(terms) if variants is None else variants).items():
            kept = next((v for v in found if v in held), found[0])
            terms[terms.index(term)] = kept
        # N and document frequencies by index lookups only: count(*) on FTS5 and `term IN (…)` on fts5vocab both
        # scan (160 ms and 5 ms at 100k chunks); max(rowid) and `term = ?` take microseconds. max(rowid) counts
        # deleted rows too, which moves an IDF by a hair.
        total = self.conn.execute("SELECT max(rowid) FROM chunks").fetchall()[0][0] or 1
        df = {term: self.term_frequency(term) for term in terms}
        return idf_coverage(terms, held, df, total)

    def vector_ranking(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """Exact kNN over the current chunks the scopes may see, from the process's in-memory copy of the vectors
        (tasks/vector_cache.py), synced to this connection's snapshot first."""
        if not scopes:
            return []
        return self._vectors().top(vector, scopes, depth)

    def _vectors(self) -> Snapshot:
        """The in-memory vectors at this connection's snapshot (one read transaction for check and sync)."""
        with self.conn:
            table = self._vector_table()
            generation = self.conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()[0][0]
            return cache_for(self.path, table).current(self.conn, table, generation)

    def vector_ranking_sql(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """The same ranking by sqlite-vec inside SQL (no memory copy): the reference the cache is tested against."""
        where, params = self._filter_sql(scopes)
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        rows = self.conn.execute(
            "SELECT c.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c "
            f"JOIN {self._vector_table()} v ON v.rowid = c.rowid WHERE {where} ORDER BY d LIMIT ?",
            [blob, *params, depth],
        )
        return [(rowid, 1.0 - distance) for rowid, distance in rows]

    def search(
        self,
        query: str,
        vector: np.ndarray | None,
        scopes: Sequence[str],
        k: int = 10,
        depth: int = 50,
        rrf_k: int = 60,
        mode: str = "hybrid",
        min_coverage: float = 0.35,
        reranker: Reranker | None = None,
        rerank_top: int = 20,
        explain: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid (RRF over BM25 and kNN, routed by lexical coverage), plain RRF ('hybrid-rrf'), or one side
        alone ('bm25', 'bm25-nostem', 'dense'). Identifier matches rank first in every mode that reads BM25.
        `explain`, when given, is filled with how the ranking was decided (`korpus search --explain`): the query's
        terms and typo variants, the lexical coverage and whether BM25 joined the fusion, identifier pins, and
        each hit's rank on either side.

        Both sides and the hit lookup read one snapshot (one read transaction): a version switch committed
        meanwhile is seen by all of them or by none.
        """
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; one of {', '.join(SEARCH_MODES)}")
        if mode == "hybrid+rerank" and reranker is None:
            raise ValueError("hybrid+rerank needs a rerank model: set KORPUS_RERANK_MODEL to a CrossEncoder folder")
        if mode in (*HYBRID_MODES, "dense") and vector is None:
            raise ValueError("dense and hybrid search need a query vector")
        if vector is not None:
            dims = self.conn.execute("SELECT value FROM index_meta WHERE key = 'embed_dims'").fetchall()
            if dims and int(dims[0][0]) != len(vector):
                raise IndexMismatchError(
                    f"index {self.path} holds {dims[0][0]}-dim vectors; the query vector has {len(vector)} dims. "
                    "Query with the model the index was built with (korpus sources / /health show it)."
                )
        with self.conn:
            rankings = []
            if mode == "bm25-nostem":  # the baseline evaluations compare against: no Russian morphology
                rankings.append([rowid for rowid, _ in self.lexical_ranking(query, scopes, depth, stemmed=False)])
            if mode in HYBRID_MODES or mode == "bm25":
                terms = analyse(query)
                variants = self.typo_variants(terms)  # one vocabulary lookup for both the ranking and the coverage
                lexical = [rowid for rowid, _ in self.lexical_ranking(query, scopes, depth, variants=variants)]
                # Routed fusion: when BM25's best hit holds less than `min_coverage` of the query (IDF-weighted),
                # BM25 matched a stray word of a paraphrase and its ranking is left out; any weight it kept would
                # reorder dense's top ranks, which RRF spaces only 1/(k+r) - 1/(k+r+1) apart. 'hybrid-rrf' is
                # plain equal-weight RRF, the baseline evaluations compare against.
                routed = mode in ("hybrid", "hybrid+rerank") and lexical
                coverage = self.lexical_coverage(query, lexical[0], variants) if routed else None
                joined = not (routed and coverage < min_coverage)
                if joined:
                    rankings.append(lexical)
                if explain is not None:
                    explain.update(terms=terms, typo_variants=variants, coverage=coverage,
                                   min_coverage=min_coverage, bm25_joined=joined,
                                   bm25_ranks={r: n + 1 for n, r in enumerate(lexical)})  # fmt: skip
            if mode in HYBRID_MODES or mode == "dense":
                rankings.append([rowid for rowid, _ in self.vector_ranking(vector, scopes, depth)])
                if explain is not None:
                    explain["dense_ranks"] = {r: n + 1 for n, r in enumerate(rankings[-1])}
            fused = rrf_fuse(rankings, rrf_k)
            if mode in HYBRID_MODES or mode == "bm25":
                # A query carrying an ИНН, ОГРН or document number wants that document: exact identifier
                # matches rank first, whatever either side of the fusion thought of them.
                exact = self.identifier_ranking(extract_identifiers(query), scopes, depth)
                first = [(rowid, 1.0 + 1.0 / (rank + 1)) for rank, rowid in enumerate(exact)]
                fused = first + [(rowid, score) for rowid, score in fused if rowid not in set(exact)]
            else:
                exact = []
            if explain is not None:
                explain["identifier_pins"] = len(exact)
            if mode != "hybrid+rerank":
                return self._explained(self._hits(fused[:k]), fused[:k], explain)
            # The cross-encoder reorders the fused top-N that the filters already passed; identifier matches
            # keep their place in front of it.
            hits = self._hits(fused[: max(k, rerank_top + len(exact))])
            pinned, rest = hits[: len(exact)], hits[len(exact) : len(exact) + rerank_top]
            for hit, score in zip(rest, reranker.scores(query, [h["text"] for h in rest]), strict=True):
                hit["fused_score"], hit["score"] = hit["score"], round(score, 6)
            rest.sort(key=lambda h: -h["score"])
            return (pinned + rest + hits[len(exact) + rerank_top :])[:k]

    @staticmethod
    def _explained(
        hits: list[dict[str, Any]], scored: Sequence[tuple[int, float]], explain: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """Each hit's place on either side of the fusion, when the caller asked how the ranking was decided."""
        if explain is None:
            return hits
        lexical, dense = explain.pop("bm25_ranks", {}), explain.pop("dense_ranks", {})
        for hit, (rowid, _score) in zip(hits, scored, strict=True):
            hit["explain"] = {"bm25_rank": lexical.get(rowid), "dense_rank": dense.get(rowid)}
        return hits

    def _hits(self, scored: Sequence[tuple[int, float]]) -> list[dict[str, Any]]:
        if not scored:
            return []
        marks = ", ".join("?" for _ in scored)
        cursor = self.conn.execute(
            "SELECT rowid, chunk_id, source_id, source_version, page, t_start, t_end, section_path, text, "
            f"lifecycle, access, exception FROM chunks WHERE rowid IN ({marks})",
            [rowid for rowid, _ in scored],
        )
        rows = {row[0]: row[1:] for row in cursor}
        hits = []
        for rowid, score in scored:
            chunk_id, source_id, version, page, t0, t1, section, text, lifecycle, access, exception = rows[rowid]
            hits.append(
                {
                    "chunk_id": chunk_id,
                    "source_id": source_id,
                    "source_version": version,
                    "page": page,
                    "t_start": t0,
                    "t_end": t1,
                    "section_path": json.loads(section),
                    "text": text,
                    "score": round(score, 6),
                    "lifecycle": lifecycle,
                    "access": access,
                    "exception": bool(exception),
                }
            )
        return hits

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

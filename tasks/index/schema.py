"""The embedded index's tables: catalog (sources, versions, page texts), chunks with their FTS5 terms, vectors and
identifiers, the visibility table every filter joins, quarantine, pending pages and the decisions' audit trail;
and the two row helpers every SQLite module uses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import apsw

from korpus.core.datamodel import scope_sql


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def row_dicts(cursor: apsw.Cursor) -> list[dict[str, Any]]:
    """Rows as dicts. apsw has no description for an empty result (ExecutionCompleteError): that is no rows."""
    try:
        names = [d[0] for d in cursor.getdescription()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(names, row, strict=True)) for row in cursor]


SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS file_readings (
    source_id TEXT PRIMARY KEY, version TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL, inode INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    source_id TEXT NOT NULL, version TEXT NOT NULL, kind TEXT, size INTEGER, path TEXT,
    owner TEXT, access TEXT, tenant TEXT, lifecycle TEXT NOT NULL, pages INTEGER, chunks INTEGER,
    received_at TEXT NOT NULL, switched_at TEXT, superseded_at TEXT, listing TEXT, PRIMARY KEY (source_id, version));
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL UNIQUE, source_id TEXT NOT NULL,
    source_version TEXT NOT NULL, ordinal INTEGER NOT NULL, page INTEGER, t_start REAL, t_end REAL,
    heading TEXT, start_off INTEGER, end_off INTEGER, section_path TEXT NOT NULL, text TEXT NOT NULL,
    body TEXT NOT NULL, previous_id TEXT, next_id TEXT, owner TEXT NOT NULL, access TEXT NOT NULL,
    tenant TEXT NOT NULL, lifecycle TEXT NOT NULL, policy_version TEXT NOT NULL, language TEXT NOT NULL,
    exception INTEGER NOT NULL DEFAULT 0, regions TEXT);
CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks (source_id, source_version);
CREATE INDEX IF NOT EXISTS chunks_by_filter ON chunks (lifecycle, access);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms USING fts5(
    terms, exact, content = '', contentless_delete = 1,
    tokenize = "unicode61 remove_diacritics 0 tokenchars '.,''’:_'");
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms_vocab USING fts5vocab(chunk_terms, 'col');
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms_instance USING fts5vocab(chunk_terms, 'instance');
CREATE TABLE IF NOT EXISTS chunk_tokens (rowid INTEGER PRIMARY KEY, terms TEXT NOT NULL, exact TEXT NOT NULL);
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
    access TEXT, kind TEXT, readings TEXT, tenant TEXT);
CREATE TABLE IF NOT EXISTS pending_pages (
    source_id TEXT NOT NULL, version TEXT NOT NULL, page INTEGER NOT NULL, attempts INTEGER NOT NULL,
    error TEXT NOT NULL, last_tried TEXT NOT NULL, PRIMARY KEY (source_id, version, page));
CREATE TABLE IF NOT EXISTS quarantine_decisions (
    item_id TEXT NOT NULL, decided_at TEXT NOT NULL, reviewer TEXT NOT NULL, action TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL DEFAULT '', text TEXT);
CREATE INDEX IF NOT EXISTS quarantine_by_status ON quarantine (status, first_seen);
"""
# Columns added after the first release: (table, column, type). An older index gets them on open.
ADDED_COLUMNS = (
    ("quarantine", "access", "TEXT"),
    ("quarantine", "kind", "TEXT"),
    ("quarantine", "readings", "TEXT"),
    ("quarantine_decisions", "text", "TEXT"),
    ("sources", "superseded_at", "TEXT"),
    ("chunks", "regions", "TEXT"),
    ("quarantine", "tenant", "TEXT"),
    ("sources", "listing", "TEXT"),
)


# What a filter needs, in a table of two narrow columns: `visible` is the scope of a current chunk (its access rule,
# `tenant/access` outside the default tenant: korpus/core/datamodel.scope_of) and NULL otherwise. BM25 joins it
# instead of `chunks`, whose rows carry text and body: at 100k chunks the join over a query's matches fell
# from p95 ~75 ms to ~19 ms. Triggers keep it exact inside every writing transaction. The insert trigger reads the
# row, not `new`: SQLite runs the AFTER INSERT triggers newest first, so `chunks_access_from_catalog` (below) may
# already have given the row the catalog's labels, and `new` still holds what the writer passed — a reviewer's
# release of a chunk stored before a relabel was served under its old scope by BM25 (the lifecycle machine).
VISIBILITY_SQL = f"""
CREATE TABLE IF NOT EXISTS chunk_visibility (rowid INTEGER PRIMARY KEY, visible TEXT);
DROP TRIGGER IF EXISTS chunks_visibility_insert;
DROP TRIGGER IF EXISTS chunks_visibility_update;
DROP TRIGGER IF EXISTS chunks_scope_insert;
CREATE TRIGGER IF NOT EXISTS chunks_scope_of_row AFTER INSERT ON chunks BEGIN
    INSERT OR REPLACE INTO chunk_visibility SELECT rowid,
        CASE WHEN lifecycle = 'current' THEN {scope_sql("tenant", "access")} END FROM chunks WHERE rowid = new.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_scope_update AFTER UPDATE OF lifecycle, access, tenant ON chunks BEGIN
    UPDATE chunk_visibility
    SET visible = CASE WHEN new.lifecycle = 'current' THEN {scope_sql("new.tenant", "new.access")} END
    WHERE rowid = new.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_visibility_delete AFTER DELETE ON chunks BEGIN
    DELETE FROM chunk_visibility WHERE rowid = old.rowid;
END;
INSERT OR REPLACE INTO chunk_visibility
SELECT rowid, CASE WHEN lifecycle = 'current' THEN {scope_sql("tenant", "access")} END FROM chunks;
"""

# The one place the access a chunk is served under comes from: the catalog's row for its source version. A chunk
# inserted by any path (a publish, a reviewer's release of a chunk stored with the quarantine item, a re-OCR, an
# edit) takes its labels from that row; a relabel of the row moves every chunk and quarantine item of the version
# with it, in the relabel's own transaction. The copies on chunks (for the filters) and on quarantine items (for
# the review queue) can then never disagree with the catalog — whichever code path wrote them.
_FOLLOW_THE_ROW = """
    UPDATE chunks SET owner = new.owner, access = new.access, tenant = coalesce(new.tenant, tenant)
        WHERE source_id = new.source_id AND source_version = new.version
        AND (access IS NOT new.access OR owner IS NOT new.owner OR tenant IS NOT coalesce(new.tenant, tenant));
    UPDATE quarantine SET access = new.access, tenant = new.tenant
        WHERE source_id = new.source_id AND source_version = new.version
        AND (access IS NOT new.access OR tenant IS NOT new.tenant);
"""
"""Every chunk and quarantine item of a catalog row's version takes the row's labels (SQLite has no trigger on
INSERT OR UPDATE: the two triggers below share this body)."""
CATALOG_ACCESS_SQL = f"""
CREATE TRIGGER IF NOT EXISTS chunks_access_from_catalog AFTER INSERT ON chunks
WHEN EXISTS (SELECT 1 FROM sources s WHERE s.source_id = new.source_id AND s.version = new.source_version
             AND (s.access IS NOT new.access OR s.owner IS NOT new.owner
                  OR coalesce(s.tenant, new.tenant) IS NOT new.tenant))
BEGIN
    UPDATE chunks SET (owner, access, tenant) = (SELECT s.owner, s.access, coalesce(s.tenant, new.tenant)
        FROM sources s WHERE s.source_id = new.source_id AND s.version = new.source_version) WHERE rowid = new.rowid;
END;
DROP TRIGGER IF EXISTS sources_access_insert;
DROP TRIGGER IF EXISTS sources_access_update;
CREATE TRIGGER IF NOT EXISTS sources_labels_insert AFTER INSERT ON sources BEGIN {_FOLLOW_THE_ROW} END;
CREATE TRIGGER IF NOT EXISTS sources_labels_update AFTER UPDATE OF owner, access, tenant ON sources
BEGIN {_FOLLOW_THE_ROW} END;
UPDATE chunks SET (owner, access, tenant) = (SELECT s.owner, s.access, coalesce(s.tenant, chunks.tenant)
    FROM sources s WHERE s.source_id = chunks.source_id AND s.version = chunks.source_version)
    WHERE EXISTS (SELECT 1 FROM sources s WHERE s.source_id = chunks.source_id AND s.version = chunks.source_version
                  AND (s.access IS NOT chunks.access OR s.owner IS NOT chunks.owner));
UPDATE quarantine SET (access, tenant) = (SELECT s.access, s.tenant FROM sources s
    WHERE s.source_id = quarantine.source_id AND s.version = quarantine.source_version)
    WHERE EXISTS (SELECT 1 FROM sources s WHERE s.source_id = quarantine.source_id
                  AND s.version = quarantine.source_version
                  AND (s.access IS NOT quarantine.access OR s.tenant IS NOT quarantine.tenant));
"""

# BM25 statistics (document count, average length, term frequencies) over the chunks that are served, not over every
# version ever indexed: a chunk's row in the FTS5 table exists exactly while it is current. Its analysed terms are
# kept in `chunk_tokens` (computed once, in Python, at insert), so a chunk switched back to current (a reviewer's
# release of a withdrawn chunk) gets its FTS row again in the same transaction. An index made before this is
# migrated on open: the terms copied out of the FTS table, the rows of chunks no longer served deleted.
CURRENT_TERMS_SQL = """
CREATE TRIGGER IF NOT EXISTS chunks_terms_retired AFTER UPDATE OF lifecycle ON chunks
WHEN old.lifecycle = 'current' AND new.lifecycle != 'current' BEGIN
    DELETE FROM chunk_terms WHERE rowid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_terms_restored AFTER UPDATE OF lifecycle ON chunks
WHEN new.lifecycle = 'current' AND old.lifecycle != 'current' BEGIN
    INSERT INTO chunk_terms (rowid, terms, exact) SELECT rowid, terms, exact FROM chunk_tokens WHERE rowid = new.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_terms_deleted AFTER DELETE ON chunks BEGIN
    DELETE FROM chunk_tokens WHERE rowid = old.rowid;
END;
DELETE FROM chunk_terms WHERE rowid IN (SELECT rowid FROM chunks WHERE lifecycle != 'current');
"""

# The FTS5 table keeps no copy of the terms (`content=''`): they are `chunk_tokens`' already, and the copy was a
# quarter of the file (20,000 generated chunks: 60 MB of 256). `contentless_delete` lets the triggers above delete a
# retired chunk's row by its rowid alone. A file made with the copy is migrated on open (`CONTENTLESS_SQL`): its
# terms are kept in `chunk_tokens`, the table made again and filled with the current chunks' rows.
CONTENTLESS_SQL = """
INSERT OR IGNORE INTO chunk_tokens (rowid, terms, exact) SELECT rowid, terms, exact FROM chunk_terms;
DROP TABLE chunk_terms_vocab;
DROP TABLE chunk_terms_instance;
DROP TABLE chunk_terms;
CREATE VIRTUAL TABLE chunk_terms USING fts5(
    terms, exact, content = '', contentless_delete = 1,
    tokenize = "unicode61 remove_diacritics 0 tokenchars '.,''’:_'");
CREATE VIRTUAL TABLE chunk_terms_vocab USING fts5vocab(chunk_terms, 'col');
CREATE VIRTUAL TABLE chunk_terms_instance USING fts5vocab(chunk_terms, 'instance');
INSERT INTO chunk_terms (rowid, terms, exact)
    SELECT t.rowid, t.terms, t.exact FROM chunk_tokens t JOIN chunks c ON c.rowid = t.rowid
    WHERE c.lifecycle = 'current';
"""
# The mirror's outbox (tasks/index/opensearch_mirror.py): every chunk a write touched — inserted, deleted, its
# lifecycle or labels changed — with a sequence number that only grows (AUTOINCREMENT: a number is never reused, so
# a chunk changed again is seen past the number a mirror reached). One row a chunk, its latest change: the old row
# deleted, then a new one inserted — not `INSERT OR REPLACE`, since inside a trigger the conflict handling of the
# statement that fired it overrides the trigger's own (the lifecycle machine found it: publish's upsert of a source
# row, `ON CONFLICT DO UPDATE`, relabels its chunks through a trigger, and the outbox's REPLACE became an abort).
# A sync reads only the rows past what its mirror holds; `korpus gc` drops the rows every mirror has. `at` (epoch
# seconds) says how long the oldest change a mirror lacks has waited: its lag.
OUTBOX_SQL = """
CREATE TABLE IF NOT EXISTS chunk_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id TEXT NOT NULL UNIQUE,
    at REAL NOT NULL DEFAULT (unixepoch('subsec'))
);
CREATE TRIGGER IF NOT EXISTS chunks_outbox_insert AFTER INSERT ON chunks BEGIN
    DELETE FROM chunk_outbox WHERE chunk_id = new.chunk_id;
    INSERT INTO chunk_outbox (chunk_id) VALUES (new.chunk_id); END;
CREATE TRIGGER IF NOT EXISTS chunks_outbox_delete AFTER DELETE ON chunks BEGIN
    DELETE FROM chunk_outbox WHERE chunk_id = old.chunk_id;
    INSERT INTO chunk_outbox (chunk_id) VALUES (old.chunk_id); END;
CREATE TRIGGER IF NOT EXISTS chunks_outbox_state AFTER UPDATE OF lifecycle, access, owner, tenant, exception ON chunks
BEGIN
    DELETE FROM chunk_outbox WHERE chunk_id = new.chunk_id;
    INSERT INTO chunk_outbox (chunk_id) VALUES (new.chunk_id); END;
"""
DERIVED_TRIGGERS = (
    "chunks_generation_insert",
    "chunks_generation_delete",
    "chunks_generation_labels",  # tasks/index/vector_cache.py
    "chunks_scope_of_row",
    "chunks_scope_update",
    "chunks_visibility_delete",
    "chunks_access_from_catalog",
    "sources_labels_insert",
    "sources_labels_update",
    "chunks_terms_retired",
    "chunks_terms_restored",
    "chunks_terms_deleted",
    "chunks_outbox_insert",
    "chunks_outbox_delete",
    "chunks_outbox_state",
)
"""The triggers an index opened by this release has; one missing (an older index: renamed ones) installs them."""

"""The embedded index and catalog: one SQLite file through apsw, FTS5 for BM25; exact kNN in numpy over an
in-memory snapshot of the vectors (tasks/index/vector_cache.py), which sqlite-vec stores and checks against.

Access and lifecycle filters are part of every query on both sides, applied before the top-N cut, so a chunk the
caller may not see can never take a rank. A source version's chunks are written and switched current in one
transaction: readers see the old version or the new one, never both or neither.

`SqliteIndex` is the catalog — sources, versions, the lifecycle switch, page texts — and owns the connection; its
other parts live beside it, one concern a file: the tables (`schema.py`), vectors and reindex (`vector_tables.py`),
quarantine and decisions (`quarantine_store.py`), what it remembers of its refreshes (`records.py`) and the search
side, a `SearchBackend` (`sqlite_search.py`, `index.searcher`). It runs over 400 lines because the version switch
and the catalog reads a refresh plans from (versions, listings, readings) are one concern: the catalog.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec

from korpus.core.datamodel import Chunk, Lifecycle, PageResult, Source, listing_key
from tasks.index.pg_catalog import BIND_KEY, PgWriter, without_password
from tasks.index.quarantine_store import QuarantineStore
from tasks.index.records import RefreshRecords
from tasks.index.schema import (
    ADDED_COLUMNS,
    CATALOG_ACCESS_SQL,
    CONTENTLESS_SQL,
    CURRENT_TERMS_SQL,
    DERIVED_TRIGGERS,
    OUTBOX_SQL,
    SCHEMA,
    VISIBILITY_SQL,
    row_dicts,
    utc_now,
)
from tasks.index.sqlite_search import SqliteSearch
from tasks.index.vector_cache import GENERATION_SQL
from tasks.index.vector_tables import VectorTables
from tasks.runtime.crash_points import crash_point
from tasks.text.analysis import terms_of, words
from tasks.text.identifiers import extract_identifiers
from tasks.text.regions import pack

SEARCH_TERMS_KEY = "search_terms"
"""index_meta: 'cluster' when the file holds no search terms of its own (`SqliteIndex.keep_search_terms`)."""


class IndexWriteError(RuntimeError):
    """The index file could not be written (disk full, read-only): the refresh stops, nothing half-switched."""


class SqliteIndex(VectorTables, QuarantineStore, RefreshRecords):
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
            made = self.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunk_terms'").fetchall()
            if "contentless_delete" not in made[0][0]:  # a file whose FTS table kept its own copy of the terms
                self.conn.execute(CONTENTLESS_SQL)
        bound = self.conn.execute("SELECT value FROM index_meta WHERE key = ?", (BIND_KEY,)).fetchall()
        self.serving: PgWriter | None = PgWriter(bound[0][0], self.conn) if bound else None
        """The PostgreSQL server this file's writes go through (tasks/index/pg_catalog.py); None: SQLite alone."""
        have = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        if not have.issuperset(DERIVED_TRIGGERS):
            with self.write_transaction():
                self.conn.execute(GENERATION_SQL)
                self.conn.execute(VISIBILITY_SQL)
                self.conn.execute(CATALOG_ACCESS_SQL)
                self.conn.execute(CURRENT_TERMS_SQL)
                self.conn.execute(OUTBOX_SQL)

    def bind_serving_catalog(self, url: str) -> int:
        """Write every later change through the server at `url` too (tasks/index/pg_catalog.py), and bring it up
        to date now (a whole load when it holds another catalog or none); returns the chunks written."""
        url = without_password(url)
        self.conn.execute("INSERT OR REPLACE INTO index_meta VALUES (?, ?)", (BIND_KEY, url))
        if self.serving is None or self.serving.url != url:
            if self.serving is not None:
                self.serving.close()
            self.serving = PgWriter(url, self.conn)
        return self.sync_serving_catalog()

    def sync_serving_catalog(self) -> int:
        """Carry to the bound server whatever it lacks (a widening an outage held back); the chunks written."""
        if self.serving is None:
            return 0
        with self.write_transaction():  # the narrowing step, under the SQLite write lock; the widening after it
            pass
        return self.serving.written

    def close(self) -> None:
        if self.serving is not None:
            self.serving.close()
        self.conn.close()

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        """The write lock from the first statement (BEGIN IMMEDIATE); inside another transaction, a savepoint. Every
        write goes through it: a deferred one that reads first fails at once (SQLITE_BUSY_SNAPSHOT) when another
        connection committed meanwhile — `reconcile` did, beside a reviewer's decision (the lifecycle machine)."""
        if self.conn.in_transaction:
            with self.conn:
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            if self.serving is not None:  # narrow the serving catalog before this commits (pg_catalog.py)
                self.serving.narrow()
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        try:
            self.conn.execute("COMMIT")
        finally:
            if self.serving is not None:  # then widen it to what committed (or restore it, when nothing did)
                self.serving.widen()

    def __enter__(self) -> SqliteIndex:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- embedding model binding, vectors, reindex: tasks/index/vector_tables.py ---------------------------

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

    def listing_keys(self) -> dict[str, dict[str, str]]:
        """Source id → {version: the members its page leaves out (`listing_key`)} for current containers whose page
        leaves some out: a manifest rule that changes which is a new listing, and the page is read again."""
        known: dict[str, dict[str, str]] = {}
        rows = self.conn.execute(
            "SELECT source_id, version, listing FROM sources WHERE lifecycle = 'current' AND listing IS NOT NULL"
        )
        for source_id, version, listing in rows:
            known.setdefault(source_id, {})[version] = listing
        return known

    def served_chunk_keys(self) -> dict[str, str]:
        """Source id → a digest of the chunk ids it serves now (changes with a new version and a review decision)."""
        rows = self.conn.execute(
            "SELECT source_id, group_concat(chunk_id, ',') FROM (SELECT source_id, chunk_id FROM chunks "
            "WHERE lifecycle = 'current' ORDER BY source_id, chunk_id) GROUP BY source_id"
        )
        return {source_id: hashlib.sha256(ids.encode()).hexdigest()[:32] for source_id, ids in rows}

    def sources(self) -> list[dict[str, Any]]:
        cursor = self.conn.execute(
            "SELECT source_id, version, kind, owner, access, tenant, lifecycle, pages, chunks, switched_at "
            "FROM sources ORDER BY source_id, received_at"
        )
        return row_dicts(cursor)

    def source_version(self, source_id: str, version: str | None) -> dict[str, Any] | None:
        """One version's catalog row (kind, path, owner, access, tenant, lifecycle, pages), by primary key."""
        names = ("source_id", "version", "kind", "path", "owner", "access", "tenant", "lifecycle", "pages")
        rows = self.conn.execute(
            f"SELECT {', '.join(names)} FROM sources WHERE source_id = ? AND version = ?", (source_id, version)
        ).fetchall()
        return dict(zip(names, rows[0], strict=True)) if rows else None

    def serves_other_version(self, source: Source) -> bool:
        """The source has a current version, and it is not this one."""
        query = "SELECT 1 FROM sources WHERE source_id = ? AND version != ? AND lifecycle = 'current'"
        return bool(self.conn.execute(query, (source.source_id, source.version)).fetchall())

    def is_current_version(self, source_id: str, version: str) -> bool:
        query = "SELECT 1 FROM sources WHERE source_id = ? AND version = ? AND lifecycle = 'current'"
        return bool(self.conn.execute(query, (source_id, version)).fetchall())

    def reconcile(self) -> int:
        """Repair any state a crash could leave: exactly one current version per source, and current chunks only
        for current versions. Returns the number of rows repaired (0 in a healthy index)."""
        repaired = 0
        with self.write_transaction():
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
        with self._written(source.source_id), self.write_transaction():
            if embed_model is not None and len(chunks):
                self.bind_embedding(embed_model, int(vectors.shape[1]))
            self._retire(source.source_id, keep_version=source.version)
            self.conn.execute("DELETE FROM pending_pages WHERE source_id = ?", (source.source_id,))
            self.resolve_admitted(source.source_id, source.version)
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
            terms = self.keeps_search_terms()
            for ordinal, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True)):
                self._add_chunk(chunk, ordinal, vector, table=table, terms=terms)
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
                "pages, chunks, received_at, switched_at, listing) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'current', ?, ?, "
                "?, ?, ?) ON CONFLICT(source_id, version) DO UPDATE SET lifecycle = 'current', owner = excluded.owner, "
                "access = excluded.access, tenant = excluded.tenant, pages = excluded.pages, "
                "chunks = excluded.chunks, switched_at = excluded.switched_at, listing = excluded.listing",
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
                    utc_now(),
                    utc_now(),
                    listing_key(source) or None,
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
        self,
        chunk: Chunk,
        ordinal: int,
        vector: np.ndarray,
        exception: bool = False,
        table: str | None = None,
        terms: bool | None = None,
    ) -> None:
        """Insert one chunk with its vector (into `table`, looked up when not given) and, unless a cluster answers
        the searches (`terms`, looked up by `keeps_search_terms` when not given), its terms and identifiers."""
        rowid = self._insert_chunk(chunk, ordinal, exception)
        if self.keeps_search_terms() if terms is None else terms:
            self._add_terms(rowid, chunk.text, chunk.body, current=True)
        self.conn.execute(
            f"INSERT INTO {table or self.vector_table()} (rowid, embedding) VALUES (?, ?)", (rowid, vector.tobytes())
        )

    def _add_terms(self, rowid: int, text: str, body: str, current: bool) -> None:
        """A chunk's analysed terms (its FTS5 row while current) and identifiers: what the embedded search reads."""
        tokens = words(text)
        analysed = (rowid, " ".join(terms_of(tokens)), " ".join(tokens))
        self.conn.execute("INSERT INTO chunk_tokens (rowid, terms, exact) VALUES (?, ?, ?)", analysed)
        if current:
            self.conn.execute("INSERT INTO chunk_terms (rowid, terms, exact) VALUES (?, ?, ?)", analysed)
        for identifier in extract_identifiers(body):
            self.conn.execute("INSERT INTO chunk_identifiers (rowid, identifier) VALUES (?, ?)", (rowid, identifier))

    def keeps_search_terms(self) -> bool:
        """Whether the file holds the embedded search's terms (FTS5 postings, analysed terms, identifiers). With
        KORPUS_BACKEND=opensearch the cluster holds and searches them, and the file does not (`keep_search_terms`)."""
        rows = self.conn.execute("SELECT value FROM index_meta WHERE key = ?", (SEARCH_TERMS_KEY,)).fetchall()
        return not rows or rows[0][0] != "cluster"

    def keep_search_terms(self, keep: bool, batch: int = 2_000) -> int:
        """Make the file hold the embedded search's terms (`keep`) or none; the chunks whose terms were built.

        Off (a cluster answers the searches): every chunk's terms, postings and identifiers are deleted at once —
        at 20,000 generated chunks they were 73 of the file's 195 MB (benchmarks/catalog_size.py) — and no later
        write adds any. On again (KORPUS_BACKEND=sqlite after a cluster): every chunk's terms are built from its
        stored text, `batch` chunks a transaction, the mode switched with the last, so a search never reads a
        half-built index as whole; each transaction moves the generation, so a serving process drops the BM25
        postings it holds."""
        if keep == self.keeps_search_terms():
            return 0
        if not keep:
            with self.write_transaction():
                self.conn.execute("DELETE FROM chunk_tokens")
                self.conn.execute("INSERT INTO chunk_terms (chunk_terms) VALUES ('delete-all')")
                self.conn.execute("DELETE FROM chunk_identifiers")
                self.conn.execute("INSERT OR REPLACE INTO index_meta VALUES (?, 'cluster')", (SEARCH_TERMS_KEY,))
            return 0
        built, after = 0, 0
        while True:
            with self.write_transaction():
                rows = self.conn.execute(
                    "SELECT c.rowid, c.text, c.body, c.lifecycle FROM chunks c WHERE c.rowid > ? AND NOT EXISTS "
                    "(SELECT 1 FROM chunk_tokens t WHERE t.rowid = c.rowid) ORDER BY c.rowid LIMIT ?",
                    (after, batch),
                ).fetchall()
                for rowid, text, body, lifecycle in rows:
                    self._add_terms(rowid, text, body, current=lifecycle == "current")
                built += len(rows)
                self.conn.execute("UPDATE index_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                if len(rows) < batch:
                    self.conn.execute("DELETE FROM index_meta WHERE key = ?", (SEARCH_TERMS_KEY,))
                    return built
                after = rows[-1][0]

    def _insert_chunk(self, chunk: Chunk, ordinal: int, exception: bool = False) -> int:
        loc = chunk.locator
        self.conn.execute(
            "INSERT INTO chunks (chunk_id, source_id, source_version, ordinal, page, t_start, t_end, heading, "
            "start_off, end_off, section_path, text, body, previous_id, next_id, owner, access, tenant, "
            "lifecycle, policy_version, language, exception, regions) "
            f"VALUES ({', '.join('?' * 23)})",
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
                pack(chunk.regions),
            ),
        )
        return self.conn.last_insert_rowid()

    def _retire(self, source_id: str, keep_version: str | None = None) -> None:
        params: tuple = (source_id,) if keep_version is None else (source_id, keep_version)
        extra = "" if keep_version is None else " AND version != ?"
        self.conn.execute(
            f"UPDATE sources SET lifecycle = 'superseded', superseded_at = '{utc_now()}' WHERE source_id = ? "
            f"AND lifecycle = 'current'{extra}",
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
        with self.write_transaction():
            self._retire(source_id)
            crash_point("retire-mid-transaction")
            self.conn.execute("DELETE FROM pending_pages WHERE source_id = ?", (source_id,))

    def relabel_source(self, source: Source) -> None:
        """Manifest metadata of a known version changed: update it in place, no re-parsing."""
        with self.write_transaction():
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
        source = Source(
            source_id=source_id,
            version=version,
            kind=kind,
            size=size or 0,
            path=path,
            owner=owner,
            access=access,
            tenant=tenant,
        )
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
        out = row_dicts(cursor)
        for row in out:
            row["section_path"] = json.loads(row["section_path"])
        return out

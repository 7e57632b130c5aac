"""The catalog's serving part on PostgreSQL (KORPUS_CATALOG_URL): which chunk is current and visible to which scope,
so that `korpus serve` with the OpenSearch backend checks every hit against a shared engine and needs no file.

What it holds (tasks/index/pg_schema.py): `chunk_access` — a chunk's source, version, access rule and `visible`,
the scope it is served under while current, NULL otherwise (the SQLite catalog's `chunk_visibility`);
`catalog_meta` — the catalog's generation it reflects, the outbox number it applied, each OpenSearch mirror's sync
marks; `catalog_changes` — when each applied write was made, for a mirror's lag.

How it stays exact. The writer's own catalog is still the SQLite file on the refreshing machine (its outbox,
tasks/index/schema.py, numbers every chunk a write touched). A file bound to a server (`bind`: `korpus refresh` and
`korpus catalog sync` bind the one KORPUS_CATALOG_URL names) sends every write transaction through it
(`SqliteIndex.write_transaction`):
1. before SQLite commits, under the writers' advisory lock, every chunk the write narrows — no longer visible, or
   visible elsewhere — is set not visible (`narrow`) and that is committed;
2. SQLite commits;
3. the new states of every chunk past the number the server applied are written (`widen`), with the new number, and
   the lock is released.
So at every instant what the server says a caller may see is at most what the SQLite catalog says: a hit is served
late, never wider. A write whose narrowing cannot reach the server is rolled back (a relabel never commits unseen
by serving). A widening that cannot reach it waits for the next write or `korpus catalog sync`. A server bound to
another catalog (its `catalog_id` differs) is emptied and loaded whole, in keyset pages.

Reads (`served`, `mirror_lag`) run on one autocommit connection per thread; a server that cannot answer raises
`CatalogUnavailable`, which the API turns into a 503 — an unchecked hit is never served.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import apsw

from tasks.index import catalog_check
from tasks.index.catalog_check import MIRROR_KEY, OUTBOX_KEY
from tasks.index.pg_schema import LOCK_KEY, migrate

log = logging.getLogger(__name__)
T = TypeVar("T")

WRITER_LOCK = LOCK_KEY + 1
"""The advisory lock every writer holds from its narrowing to its widening: a widening that read the SQLite catalog
before another writer's narrowing committed there can then never land after it."""
BIND_KEY = "serving_catalog"
"""SQLite index_meta: the conninfo of the server this file writes through (without a password)."""
ID_KEY = "catalog_id"
"""SQLite index_meta and the server's catalog_meta: which catalog the server's rows are of."""
APPLIED_KEY = "outbox_applied"
SERVING_ALIAS = "postgresql"
"""The name the file's own sync marks give the server (catalog_check.mark_synced): the outbox keeps what it lacks."""
CARRIED = ("last_refresh", "quarantine_history", "embed_model", "embed_dims")
"""The file's index_meta rows a replica's /health reads (`PgCatalog.health_figures`), carried with every write."""
CARRIED_PREFIX = "file:"
BATCH = 1_000
CONNECT_SECONDS = 5


class CatalogUnavailable(RuntimeError):
    """The PostgreSQL catalog cannot answer (down, unreachable, in recovery): nothing is served unchecked."""


def without_password(url: str) -> str:
    """The conninfo to record: a password never goes into the catalog file (libpq reads PGPASSWORD or ~/.pgpass)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    params.pop("password", None)
    return make_conninfo(**params)


def _connect(url: str, autocommit: bool) -> Any:
    import psycopg

    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_SECONDS)
    except psycopg.Error as exc:
        raise CatalogUnavailable(f"the catalog on PostgreSQL cannot answer: {str(exc).strip()[:300]}") from exc


class PgCatalog:
    """The serving part on one server: reads for `korpus serve`, the writer's narrow-then-widen steps."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()
        self._migrated = False

    # --- reads: every request of korpus serve ------------------------------------------------------------

    def _run(self, work: Callable[[Any], T]) -> T:
        """`work` on this thread's connection. A kept connection the server dropped (it restarted since) is replaced
        and the work run once more — every call here is a read or an idempotent mark; any other failure, or the
        second, is `CatalogUnavailable`."""
        import psycopg

        while True:
            conn = getattr(self._local, "conn", None)
            kept = conn is not None and not conn.closed
            if not kept:
                conn = self._local.conn = _connect(self.url, autocommit=True)
                if not self._migrated:
                    migrate(conn)
                    self._migrated = True
            try:
                return work(conn)
            except psycopg.Error as exc:
                self.close()
                if not (kept and isinstance(exc, psycopg.OperationalError)):
                    raise CatalogUnavailable(
                        f"the catalog on PostgreSQL cannot answer: {str(exc).strip()[:300]}"
                    ) from exc

    def served(self, chunk_ids: Sequence[str], scopes: Sequence[str]) -> dict[str, str]:
        """chunk id → access rule, for those of `chunk_ids` the catalog holds current and visible under `scopes`: one
        indexed query a search."""
        if not chunk_ids or not scopes:
            return {}
        sql = "SELECT chunk_id, access FROM chunk_access WHERE chunk_id = ANY(%s) AND visible = ANY(%s)"
        return dict(self._run(lambda conn: conn.execute(sql, (list(chunk_ids), list(scopes))).fetchall()))

    def visible_source(self, source_id: str, scopes: Sequence[str]) -> dict[str, Any] | None:
        """The current version of a file the scopes may see (version, kind, path, size, access, tenant); None
        otherwise — as the SQLite side's `visible_source`, for a replica's viewer."""
        sql = (
            "SELECT source_id, version, kind, path, size, access, tenant FROM catalog_sources "
            "WHERE source_id = %s AND lifecycle = 'current' AND kind IS DISTINCT FROM 'meta'"
        )
        names = ("source_id", "version", "kind", "path", "size", "access", "tenant")
        return self._current_in_scope(sql, names, source_id, scopes)

    def source_summary(self, source_id: str, scopes: Sequence[str]) -> dict[str, Any] | None:
        """A file's current version as /sources shows it (version, kind, owner, access, pages, chunks served), when
        the scopes may see it; None otherwise — what the SQLite side answers from the file."""
        sql = (
            "SELECT s.source_id, s.version, s.kind, s.owner, s.access, s.tenant, s.pages, (SELECT count(*) FROM "
            "chunk_access a WHERE a.source_id = s.source_id AND a.source_version = s.version AND a.visible IS NOT "
            "NULL) FROM catalog_sources s WHERE s.source_id = %s AND s.lifecycle = 'current'"
        )
        names = ("source_id", "version", "kind", "owner", "access", "tenant", "pages", "chunks")
        found = self._current_in_scope(sql, names, source_id, scopes)
        if found is None:
            return None
        del found["tenant"]  # /sources shows the access rule, as the file's answer does
        return found | {"pages": found["pages"] or 0, "chunks": int(found["chunks"])}

    def _current_in_scope(
        self, sql: str, names: tuple[str, ...], source_id: str, scopes: Sequence[str]
    ) -> dict[str, Any] | None:
        """The first row of `sql` (a source's current versions, `names` its columns, access and tenant among them)
        that the scopes may see."""
        from korpus.core.datamodel import scope_of

        for row in self._run(lambda conn: conn.execute(sql, (source_id,)).fetchall()):
            found = dict(zip(names, row, strict=True))
            if scope_of(found["access"], found["tenant"]) in scopes:
                return found
        return None

    def meta_documents(self, scopes: Sequence[str]) -> list[dict[str, Any]]:
        """The current meta-documents these scopes may read, as the file's `read_meta` gives them (id, access,
        version, built at, parts), for a replica's /meta (tasks.meta.publish.of_kind picks one kind)."""
        from korpus.core.datamodel import scope_of

        sql = (
            "SELECT source_id, access, tenant, version, switched_at, parts FROM catalog_sources WHERE kind = 'meta' "
            "AND lifecycle = 'current' ORDER BY source_id"
        )
        return [
            {"source_id": sid, "access": access, "version": version, "built_at": built, "parts": list(parts or [])}
            for sid, access, tenant, version, built, parts in self._run(lambda conn: conn.execute(sql).fetchall())
            if scope_of(access, tenant) in scopes
        ]

    def meta(self) -> dict[str, str]:
        return dict(self._run(lambda conn: conn.execute("SELECT key, value FROM catalog_meta").fetchall()))

    def health_figures(self) -> tuple[dict[str, Any], dict[str, Any] | None, list[int]]:
        """What /health reports of the catalog, from the server: (stats, last refresh, quarantine history)."""
        meta = self.meta()
        sql = "SELECT count(*) FROM chunk_access WHERE visible IS NOT NULL"
        current = self._run(lambda conn: conn.execute(sql).fetchone()[0])
        carried = {k.removeprefix(CARRIED_PREFIX): v for k, v in meta.items() if k.startswith(CARRIED_PREFIX)}
        stats = {
            "chunks_current": current,
            "embed_model": carried.get("embed_model"),
            "embed_dims": int(carried["embed_dims"]) if "embed_dims" in carried else None,
            "catalog_generation": int(meta.get("generation", 0)),
        }
        last = json.loads(carried["last_refresh"]) if "last_refresh" in carried else None
        return stats, last, json.loads(carried.get("quarantine_history", "[]"))

    def synced_mark(self, alias: str) -> tuple[int | None, int | None]:
        """As `catalog_check.SqliteCatalog.synced_mark`, from the server."""
        sql = "SELECT key, value FROM catalog_meta WHERE key IN (%s, %s)"
        keys = (MIRROR_KEY + alias, OUTBOX_KEY + alias)
        found = dict(self._run(lambda conn: conn.execute(sql, keys).fetchall()))
        return tuple(None if found.get(key) is None else int(found[key]) for key in keys)  # type: ignore[return-value]

    def mirror_lag(self, alias: str, max_seconds: float = 0.0) -> dict[str, Any] | None:
        """As `catalog_check.mirror_lag`, from the server: None when the mirror behind `alias` holds every change
        the server applied, or lacks only changes younger than `max_seconds`."""
        meta = self.meta()
        synced, held = meta.get(MIRROR_KEY + alias), meta.get(OUTBOX_KEY + alias)
        sql = "SELECT min(at) FROM catalog_changes WHERE seq > %s"
        return catalog_check.lag_of(
            int(meta.get("generation", 0)),
            None if synced is None else int(synced),
            None if held is None else int(held),
            lambda after: self._run(lambda conn: conn.execute(sql, (after,)).fetchone()[0]),
            max_seconds,
        )

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class PgWriter:
    """One SQLite catalog's writes carried to the server (module docstring): `narrow` inside the SQLite transaction,
    `widen` after its commit. One per open `SqliteIndex`; its connection is its own."""

    def __init__(self, url: str, sqlite: Any) -> None:
        self.url, self.sqlite = url, sqlite
        self.conn: Any = None
        self.locked = False
        self.written = 0
        """Chunks the last widening wrote."""

    def _conn(self) -> Any:
        if self.conn is None or self.conn.closed:
            self.conn = _connect(self.url, autocommit=True)
            migrate(self.conn)
        return self.conn

    def _catalog_id(self) -> str:
        rows = self.sqlite.execute("SELECT value FROM index_meta WHERE key = ?", (ID_KEY,)).fetchall()
        if rows:
            return rows[0][0]
        made = uuid.uuid4().hex
        self.sqlite.execute("INSERT OR REPLACE INTO index_meta VALUES (?, ?)", (ID_KEY, made))
        return made

    def _applied(self, conn: Any, catalog_id: str) -> int | None:
        """The outbox number the server applied of this catalog; None — it holds another catalog's rows or none, or
        the file's own mark of it is missing or past it (the outbox may have dropped rows it never applied) — and a
        whole load comes next. The file's mark is written after the server's (`widen`), and
        `catalog_check.prune_outbox` keeps every row past it."""
        meta = dict(conn.execute("SELECT key, value FROM catalog_meta").fetchall())
        if meta.get(ID_KEY) != catalog_id or APPLIED_KEY not in meta:
            return None
        applied = int(meta[APPLIED_KEY])
        mark = catalog_check.synced_outbox(self.sqlite, SERVING_ALIAS)
        return applied if mark is not None and mark <= applied else None

    def _states(self, chunk_ids: list[str]) -> dict[str, tuple[str, str, str | None, str]]:
        marks = ", ".join("?" for _ in chunk_ids)
        rows = self.sqlite.execute(
            "SELECT c.chunk_id, c.source_id, c.source_version, v.visible, c.access FROM chunks c "
            f"JOIN chunk_visibility v ON v.rowid = c.rowid WHERE c.chunk_id IN ({marks})",
            chunk_ids,
        )
        return {chunk_id: tuple(rest) for chunk_id, *rest in rows}

    def narrow(self) -> None:
        """Inside the SQLite write transaction: take the writers' lock, and commit on the server every narrowing the
        transaction makes (a chunk gone, no longer visible, or visible elsewhere or under another rule)."""
        import psycopg

        try:
            conn = self._conn()
            conn.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
            self.locked = True
            catalog_id = self._catalog_id()
            applied = self._applied(conn, catalog_id)
            with conn.transaction():
                if applied is None:  # a whole load follows the commit: until then nothing is served from here
                    conn.execute("TRUNCATE chunk_access, catalog_sources")
                    conn.execute("DELETE FROM catalog_meta WHERE key IN (%s, %s)", (ID_KEY, APPLIED_KEY))
                    return
                head = catalog_check.outbox_head(self.sqlite)  # this transaction's own rows included
                for ids in catalog_check.changed_since(self.sqlite, applied, head, BATCH):
                    states = self._states(ids)
                    gone = [c for c in ids if c not in states]
                    kept = [c for c in ids if c in states]
                    self._narrow_sources(conn, self._versions_of(conn, states, gone))
                    conn.execute("DELETE FROM chunk_access WHERE chunk_id = ANY(%s)", (gone,))
                    conn.execute(
                        "UPDATE chunk_access a SET visible = NULL FROM unnest(%s::text[], %s::text[], %s::text[]) "
                        "AS n(chunk_id, visible, access) WHERE a.chunk_id = n.chunk_id AND a.visible IS NOT NULL "
                        "AND (a.visible IS DISTINCT FROM n.visible OR a.access IS DISTINCT FROM n.access)",
                        (kept, [states[c][2] for c in kept], [states[c][3] for c in kept]),
                    )
        except psycopg.Error as exc:
            self.release()
            raise CatalogUnavailable(
                f"the catalog on PostgreSQL cannot take this write's narrowing, so the write is not made: "
                f"{str(exc).strip()[:300]}"
            ) from exc
        except BaseException:
            self.release()
            raise

    def widen(self) -> int:
        """After the SQLite commit (or its failure): write the states of every chunk past the applied number — a
        whole load when the server holds none of this catalog — record the number and generation, and release the
        lock. A server that fails here stays narrower (logged); the next write or `korpus catalog sync` completes
        it. Returns the chunks written."""
        import psycopg

        written = 0
        try:
            conn = self._conn()
            if not self.locked:
                conn.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
                self.locked = True
            catalog_id = self._catalog_id()
            applied = self._applied(conn, catalog_id)
            head, generation = self._head()
            with conn.transaction():
                if applied is None:
                    conn.execute("TRUNCATE chunk_access, catalog_sources")
                    written = self._load_whole(conn)
                    oldest = time.time()
                else:
                    # no bound writer commits while this one holds the lock: nothing lies past `head`
                    oldest = catalog_check.oldest_change_after(self.sqlite, applied)
                    for ids in catalog_check.changed_since(self.sqlite, applied, head, BATCH):
                        written += self._write_states(conn, ids)
                kept = self.sqlite.execute(
                    f"SELECT key, value FROM index_meta WHERE key IN ({', '.join('?' for _ in CARRIED)})", CARRIED
                ).fetchall()
                carried = [(CARRIED_PREFIX + key, value) for key, value in kept]
                for key, value in ((ID_KEY, catalog_id), (APPLIED_KEY, head), ("generation", generation), *carried):
                    conn.execute(
                        "INSERT INTO catalog_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = "
                        "excluded.value",
                        (key, str(value)),
                    )
                if oldest is not None:
                    conn.execute(
                        "INSERT INTO catalog_changes VALUES (%s, %s) ON CONFLICT (seq) DO NOTHING", (head, oldest)
                    )
        except (psycopg.Error, CatalogUnavailable) as exc:
            log.warning(
                "the catalog on PostgreSQL lags this write until the next one (or korpus catalog sync): %s", exc
            )
            self._drop()
            return written
        finally:
            self.release()
            self.written = written
        # The file's mark of what the server applied, after the lock is let go (a writer holding SQLite's lock may be
        # waiting for it): the outbox keeps every row past it (catalog_check.prune_outbox).
        with contextlib.suppress(apsw.BusyError):
            catalog_check.mark_synced(self.sqlite, SERVING_ALIAS, generation, head)
        return written

    def _head(self) -> tuple[int, int]:
        """(the last outbox number ever given — kept by SQLite when every row was pruned —, the generation)."""
        floor = self.sqlite.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunk_outbox'").fetchall()
        head = max(catalog_check.outbox_head(self.sqlite), int(floor[0][0]) if floor else 0)
        return head, catalog_check.generation(self.sqlite)

    def _versions_of(self, conn: Any, states: dict[str, tuple], gone: list[str]) -> set[tuple[str, str]]:
        """The source versions of these chunks: from the file, and from the server for those the file deleted."""
        pairs = {(state[0], state[1]) for state in states.values()}
        if gone:
            sql = "SELECT DISTINCT source_id, source_version FROM chunk_access WHERE chunk_id = ANY(%s)"
            pairs |= {tuple(row) for row in conn.execute(sql, (gone,))}
        return pairs

    def _source_rows(self, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], tuple]:
        """The file's rows of these source versions: (kind, path, size, access, tenant, lifecycle, owner, pages) by
        version."""
        out: dict[tuple[str, str], tuple] = {}
        listed = sorted(pairs)
        for start in range(0, len(listed), 400):
            part = listed[start : start + 400]
            rows = self.sqlite.execute(
                "SELECT source_id, version, kind, path, size, access, tenant, lifecycle, owner, pages FROM sources "
                "WHERE "
                f"(source_id, version) IN (VALUES {', '.join('(?, ?)' for _ in part)})",
                [value for pair in part for value in pair],
            )
            out.update({(sid, version): tuple(rest) for sid, version, *rest in rows})
        return out

    def _narrow_sources(self, conn: Any, pairs: set[tuple[str, str]]) -> None:
        """Before the commit: a source version the server shows current whose row changed (relabelled, superseded,
        removed) is taken off the server until the widening writes it again."""
        if not pairs:
            return
        rows = self._source_rows(pairs)
        changed = [
            pair
            for pair, shown in self._server_sources(conn, pairs).items()
            if shown[5] == "current" and rows.get(pair) != shown
        ]
        _drop_sources(conn, changed)

    def _server_sources(self, conn: Any, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], tuple]:
        listed = sorted(pairs)
        rows = conn.execute(
            "SELECT s.source_id, s.version, kind, path, size, access, tenant, lifecycle, owner, pages "
            "FROM catalog_sources s "
            "JOIN unnest(%s::text[], %s::text[]) AS p(source_id, version) "
            "ON s.source_id = p.source_id AND s.version = p.version",
            ([p[0] for p in listed], [p[1] for p in listed]),
        )
        return {(sid, version): tuple(rest) for sid, version, *rest in rows}

    def _write_sources(self, conn: Any, pairs: set[tuple[str, str]]) -> None:
        rows = self._source_rows(pairs)
        _drop_sources(conn, [pair for pair in pairs if pair not in rows])
        if rows:
            extra = self._meta_parts([pair for pair, row in rows.items() if row[0] == "meta"])
            columns = list(
                zip(*((*pair, *row, *extra.get(pair, (None, None))) for pair, row in rows.items()), strict=True)
            )
            conn.execute(
                "INSERT INTO catalog_sources (source_id, version, kind, path, size, access, tenant, lifecycle, owner, "
                "pages, switched_at, parts) SELECT s, v, k, p, z, a, t, l, o, n, w, d::jsonb FROM unnest(%s::text[], "
                "%s::text[], %s::text[], %s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], "
                "%s::integer[], %s::text[], %s::text[]) AS u(s, v, k, p, z, a, t, l, o, n, w, d) "
                "ON CONFLICT (source_id, version) DO UPDATE SET kind = excluded.kind, path = excluded.path, size = "
                "excluded.size, access = excluded.access, tenant = excluded.tenant, lifecycle = excluded.lifecycle, "
                "owner = excluded.owner, pages = excluded.pages, switched_at = excluded.switched_at, parts = "
                "excluded.parts",
                [list(column) for column in columns],
            )

    def _meta_parts(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str | None, str]]:
        """(built at, page texts as JSON) of these meta-document versions: what /meta shows travels with their rows —
        one table of contents, chronology or register a scope, never a file's pages."""
        out: dict[tuple[str, str], tuple[str | None, str]] = {}
        for source_id, version in pairs:
            built = self.sqlite.execute(
                "SELECT switched_at FROM sources WHERE source_id = ? AND version = ?", (source_id, version)
            ).fetchall()
            texts = [
                json.loads(page)["text"]
                for (page,) in self.sqlite.execute(
                    "SELECT page FROM pages WHERE source_id = ? AND version = ? ORDER BY ordinal", (source_id, version)
                )
            ]
            out[(source_id, version)] = (built[0][0] if built else None, json.dumps(texts, ensure_ascii=False))
        return out

    def _write_states(self, conn: Any, ids: list[str]) -> int:
        states = self._states(ids)
        gone = [c for c in ids if c not in states]
        kept = [c for c in ids if c in states]
        self._write_sources(conn, self._versions_of(conn, states, gone))
        conn.execute("DELETE FROM chunk_access WHERE chunk_id = ANY(%s)", (gone,))
        columns = list(zip(*(states[c] for c in kept), strict=True)) if kept else [[], [], [], []]
        conn.execute(
            "INSERT INTO chunk_access SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[]) ON CONFLICT (chunk_id) DO UPDATE SET source_id = excluded.source_id, source_version = "
            "excluded.source_version, visible = excluded.visible, access = excluded.access",
            (kept, *[list(col) for col in columns]),
        )
        return len(kept)

    def _load_whole(self, conn: Any) -> int:
        """Every chunk of the catalog, in keyset pages of chunk id (memory: one page)."""
        written, after = 0, ""
        while True:
            ids = [
                chunk_id
                for (chunk_id,) in self.sqlite.execute(
                    "SELECT chunk_id FROM chunks WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?", (after, BATCH)
                ).fetchall()
            ]
            if not ids:
                return written
            written += self._write_states(conn, ids)
            after = ids[-1]

    def release(self) -> None:
        if self.locked and self.conn is not None and not self.conn.closed:
            try:
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK,))
            except Exception:  # a broken connection's session lock went with it
                self._drop()
        self.locked = False

    def _drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.locked = None, False

    def mark_synced(self, alias: str, reached: int, outbox: int) -> None:
        """An OpenSearch mirror's marks, on the server too (replicas read its lag there); a server that cannot take
        them leaves the mirror shown behind until the next sync."""
        import psycopg

        try:
            mark_synced(self._conn(), alias, reached, outbox)
        except (psycopg.Error, CatalogUnavailable) as exc:
            log.warning("the catalog on PostgreSQL did not take the mirror's sync marks: %s", exc)
            self._drop()

    def close(self) -> None:
        self.release()
        self._drop()


def mark_synced(conn: Any, alias: str, reached: int, outbox: int) -> None:
    """The mirror behind `alias` holds what the SQLite catalog held at generation `reached` (outbox number `outbox`);
    the changes every mirror holds are dropped."""
    with conn.transaction():
        for key, value in ((MIRROR_KEY + alias, reached), (OUTBOX_KEY + alias, outbox)):
            conn.execute(
                "INSERT INTO catalog_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, str(value)),
            )
        conn.execute(
            "DELETE FROM catalog_changes WHERE seq <= (SELECT min(value::bigint) FROM catalog_meta WHERE key LIKE %s)",
            (OUTBOX_KEY + "%",),
        )


def _drop_sources(conn: Any, pairs: list[tuple[str, str]]) -> None:
    """Take these source versions off the server."""
    if pairs:
        conn.execute(
            "DELETE FROM catalog_sources s USING unnest(%s::text[], %s::text[]) AS p(source_id, version) "
            "WHERE s.source_id = p.source_id AND s.version = p.version",
            ([p[0] for p in pairs], [p[1] for p in pairs]),
        )

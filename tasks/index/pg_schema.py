"""The PostgreSQL catalog's schema, as numbered migrations: each applied once, in order, in one transaction with its
record in `korpus_schema`; a server another korpus already migrated further is left as it is (a newer release's
steps only add). Never edit a released step: add the next one.
"""

from __future__ import annotations

from typing import Any

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "serving part: chunk access, meta, changes",
        """
        CREATE TABLE chunk_access (
            chunk_id TEXT PRIMARY KEY,
            source_id TEXT NOT NULL,
            source_version TEXT NOT NULL,
            visible TEXT,
            access TEXT NOT NULL
        );
        COMMENT ON COLUMN chunk_access.visible IS
            'the scope a current chunk is served under (its access rule, tenant/access outside the default tenant); '
            'NULL: not served (superseded, withdrawn, quarantined)';
        CREATE INDEX chunk_access_by_source ON chunk_access (source_id, source_version);
        CREATE TABLE catalog_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE catalog_changes (seq BIGINT PRIMARY KEY, at DOUBLE PRECISION NOT NULL);
        COMMENT ON TABLE catalog_changes IS
            'one row a write the writer applied: its last change number and when the oldest of its changes was made '
            '(a mirror that lacks changes past its number is behind by now() - at)';
        """,
    ),
    (
        2,
        "serving part: source versions, for the viewer",
        """
        CREATE TABLE catalog_sources (
            source_id TEXT NOT NULL,
            version TEXT NOT NULL,
            kind TEXT,
            path TEXT,
            size BIGINT,
            access TEXT,
            tenant TEXT,
            lifecycle TEXT NOT NULL,
            PRIMARY KEY (source_id, version)
        );
        """,
    ),
    (
        3,
        "serving part: a source version's owner and pages, for /sources",
        """
        ALTER TABLE catalog_sources ADD COLUMN owner TEXT, ADD COLUMN pages INTEGER;
        -- the rows written before have neither: the next write loads the catalog whole (pg_catalog.APPLIED_KEY)
        DELETE FROM catalog_meta WHERE key = 'outbox_applied';
        """,
    ),
    (
        4,
        "serving part: a meta-document's parts and build time, for /meta",
        """
        ALTER TABLE catalog_sources ADD COLUMN switched_at TEXT, ADD COLUMN parts JSONB;
        COMMENT ON COLUMN catalog_sources.parts IS
            'a meta-document''s page texts (kind meta only: one table of contents, chronology or register a scope)';
        DELETE FROM catalog_meta WHERE key = 'outbox_applied';
        """,
    ),
)
LOCK_KEY = 0x6B6F72707573  # "korpus": the advisory lock of migrations and of every writer's narrow-then-widen


def migrate(conn: Any) -> list[int]:
    """Apply the steps this server lacks (under the advisory lock: two processes opening one server at once apply each
    step once); returns the numbers applied now. `conn`: a psycopg connection."""
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS korpus_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM korpus_schema")}
        for version, name, sql in MIGRATIONS:
            if version in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO korpus_schema (version, name) VALUES (%s, %s)", (version, name))
            applied_now.append(version)
    return applied_now

"""The SQLite catalog as the authority over a mirror: which chunks it serves to whom, whether a mirror caught up.

A cluster hit is served only if the catalog holds its chunk current and visible under the caller's scopes, read in
the same request (`served`): a relabel, a retirement or a review decision the cluster has not received yet can
delay what a cluster finds, never widen it. `chunk_visibility` (tasks/index/schema.py) is the catalog's own answer
— the access rule of a current chunk, NULL otherwise — kept exact by triggers in every writing transaction.

A mirror records the catalog's generation (a counter triggers bump on every change to chunks: insert, delete,
lifecycle, access; tasks/index/vector_cache.py) it last synced completely (`mark_synced`); while the catalog's
generation is past it, the mirror is behind (`mirror_lag`), and /health and `korpus status` say degraded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw

BATCH = 500  # chunk ids a statement: far below SQLite's limit on bound parameters
MIRROR_KEY = "mirror_synced:"
"""index_meta key prefix: `mirror_synced:<alias>` → the generation the mirror behind that alias last reached."""


def read_only(path: Path) -> apsw.Connection:
    """A read-only connection to the catalog (it never creates or migrates one)."""
    if not path.is_file():
        raise FileNotFoundError(f"no catalog at {path}: run `korpus refresh --root DIR` first")
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(10_000)
    return conn


def served(conn: apsw.Connection, chunk_ids: Sequence[str], scopes: Sequence[str]) -> dict[str, str]:
    """chunk id → access rule, for those of `chunk_ids` the catalog holds current and visible under `scopes`."""
    if not chunk_ids or not scopes:
        return {}
    allowed, out = ", ".join("?" for _ in scopes), {}
    for start in range(0, len(chunk_ids), BATCH):
        part = list(chunk_ids[start : start + BATCH])
        rows = conn.execute(
            f"SELECT c.chunk_id, c.access FROM chunks c JOIN chunk_visibility v ON v.rowid = c.rowid "
            f"WHERE c.chunk_id IN ({', '.join('?' for _ in part)}) AND v.visible IN ({allowed})",
            [*part, *scopes],
        )
        out.update(rows)
    return out


def generation(conn: apsw.Connection) -> int:
    rows = conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()
    return int(rows[0][0]) if rows else 0


def synced_generation(conn: apsw.Connection, alias: str) -> int | None:
    rows = conn.execute("SELECT value FROM index_meta WHERE key = ?", (MIRROR_KEY + alias,)).fetchall()
    return int(rows[0][0]) if rows else None


def mark_synced(conn: apsw.Connection, alias: str, reached: int) -> None:
    """The mirror behind `alias` holds everything the catalog held at generation `reached`."""
    conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)", (MIRROR_KEY + alias, str(reached)))


def mirror_lag(conn: apsw.Connection, alias: str) -> dict[str, Any] | None:
    """None when the mirror has every change the catalog holds; else the two generations."""
    now, synced = generation(conn), synced_generation(conn, alias)
    if synced is not None and synced >= now:
        return None
    return {"catalog_generation": now, "mirror_generation": synced}

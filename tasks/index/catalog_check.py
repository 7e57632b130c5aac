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

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw

BATCH = 500  # chunk ids a statement: far below SQLite's limit on bound parameters
MIRROR_KEY = "mirror_synced:"
"""index_meta key prefix: `mirror_synced:<alias>` → the generation the mirror behind that alias last reached."""
OUTBOX_KEY = "mirror_outbox:"
"""index_meta key prefix: `mirror_outbox:<alias>` → the last outbox number (`chunk_outbox.seq`) that mirror holds."""
ROWID_KEY = "mirror_rowid:"
"""index_meta key prefix: `mirror_rowid:<alias>` → the largest chunk rowid the catalog held when that mirror's last
sync began: a changed chunk past it was written since (`inserted_after`), so the cluster cannot hold it yet."""


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


def mark_synced(
    conn: apsw.Connection, alias: str, reached: int, outbox: int | None = None, rowid: int | None = None
) -> None:
    """The mirror behind `alias` holds everything the catalog held at generation `reached` (and every outbox row up to
    number `outbox`, and every chunk up to `rowid` that was there when its sync began, when given)."""
    conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)", (MIRROR_KEY + alias, str(reached)))
    for key, value in ((OUTBOX_KEY, outbox), (ROWID_KEY, rowid)):
        if value is not None:
            conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)", (key + alias, str(value)))


def top_rowid(conn: apsw.Connection) -> int:
    """The largest chunk rowid (0: no chunks)."""
    return int(conn.execute("SELECT coalesce(max(rowid), 0) FROM chunks").fetchall()[0][0])


def synced_rowid(conn: apsw.Connection, alias: str) -> int | None:
    """`top_rowid` when the last sync of the mirror behind `alias` began; None: not recorded (an older catalog)."""
    rows = conn.execute("SELECT value FROM index_meta WHERE key = ?", (ROWID_KEY + alias,)).fetchall()
    return int(rows[0][0]) if rows else None


def inserted_after(conn: apsw.Connection, chunk_ids: Sequence[str], rowid: int) -> set[str]:
    """Those of `chunk_ids` the catalog holds in a row past `rowid`: written after it was read. (A row at or below it
    may be new as well — SQLite gives a deleted last row's rowid again — which a caller must allow for.)"""
    out: set[str] = set()
    for start in range(0, len(chunk_ids), BATCH):
        part = list(chunk_ids[start : start + BATCH])
        rows = conn.execute(
            f"SELECT chunk_id FROM chunks WHERE chunk_id IN ({', '.join('?' for _ in part)}) AND rowid > ?",
            [*part, rowid],
        )
        out.update(chunk_id for (chunk_id,) in rows)
    return out


def outbox_head(conn: apsw.Connection) -> int:
    """The outbox's last number (0: empty)."""
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM chunk_outbox").fetchall()[0][0])


def synced_outbox(conn: apsw.Connection, alias: str) -> int | None:
    """The last outbox number the mirror behind `alias` holds; None: it never synced from the outbox (a full sync
    comes first)."""
    rows = conn.execute("SELECT value FROM index_meta WHERE key = ?", (OUTBOX_KEY + alias,)).fetchall()
    return int(rows[0][0]) if rows else None


def changed_since(conn: apsw.Connection, after: int, upto: int, batch: int) -> Iterator[list[str]]:
    """The chunk ids of the outbox rows numbered in (`after`, `upto`], `batch` at a time, in order."""
    while True:
        rows = conn.execute(
            "SELECT seq, chunk_id FROM chunk_outbox WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (after, upto, batch),
        ).fetchall()
        if not rows:
            return
        yield [chunk_id for _, chunk_id in rows]
        after = rows[-1][0]


def prune_outbox(conn: apsw.Connection) -> int:
    """Drop the outbox rows every mirror of this catalog holds — all of them when none ever synced from it (SQLite
    alone needs none); returns how many."""
    held = [int(v) for (v,) in conn.execute("SELECT value FROM index_meta WHERE key LIKE ?", (OUTBOX_KEY + "%",))]
    mirrors = conn.execute("SELECT count(*) FROM index_meta WHERE key LIKE ?", (MIRROR_KEY + "%",)).fetchall()[0][0]
    if mirrors and len(held) < mirrors:  # a mirror that syncs in full only (an older one): its rows stay for it
        return 0
    upto = min(held) if held else outbox_head(conn)
    conn.execute("DELETE FROM chunk_outbox WHERE seq <= ?", (upto,))
    return conn.changes()


def mirror_lag(conn: apsw.Connection, alias: str, max_seconds: float = 0.0) -> dict[str, Any] | None:
    """None when the mirror has every change the catalog holds, or lacks only changes younger than `max_seconds`
    (a refresh streaming its documents to the cluster: `KORPUS_MIRROR_MAX_LAG_SECONDS`); else the two generations
    and how long the oldest change it lacks has waited (None: unknown — a mirror that never synced from the
    outbox)."""
    return lag_of(
        generation(conn),
        synced_generation(conn, alias),
        synced_outbox(conn, alias),
        lambda held: oldest_change_after(conn, held),
        max_seconds,
    )


def oldest_change_after(conn: apsw.Connection, seq: int) -> float | None:
    """When the oldest outbox row numbered past `seq` was made (epoch seconds); None when there is none."""
    return conn.execute("SELECT min(at) FROM chunk_outbox WHERE seq > ?", (seq,)).fetchall()[0][0]


def lag_of(
    now: int, synced: int | None, held: int | None, oldest_after: Callable[[int], float | None], max_seconds: float
) -> dict[str, Any] | None:
    """`mirror_lag` from its parts, wherever they are kept (this file, or the catalog's serving part on PostgreSQL):
    the catalog's generation, the one the mirror reached, the last change number it holds, and how to read when the
    oldest change past a number was made."""
    if (synced if synced is not None else 0) >= now:  # a catalog never written has nothing to mirror
        return None
    waited = None
    oldest = oldest_after(held if held is not None else 0)  # a mirror never synced lacks every change
    if oldest is None and held is not None:  # generation moved by a write the outbox does not carry
        return None
    if oldest is not None:
        waited = max(0.0, time.time() - oldest)
        if waited <= max_seconds:  # catching up (a refresh streaming its documents), not behind
            return None
    lag = {"catalog_generation": now, "mirror_generation": synced}
    return lag | ({"lag_seconds": round(waited, 1)} if waited is not None else {})


class SqliteCatalog:
    """The check's reads on the SQLite catalog file, one read-only connection a call (the same calls as
    `tasks.index.pg_catalog.PgCatalog`, the catalog's serving part on PostgreSQL)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def served(self, chunk_ids: Sequence[str], scopes: Sequence[str]) -> dict[str, str]:
        with contextlib.closing(read_only(self.path)) as conn:
            return served(conn, chunk_ids, scopes)

    def synced_mark(self, alias: str) -> tuple[int | None, int | None]:
        """What the mirror behind `alias` holds: (catalog generation, outbox number) of its last sync; it moves with
        every sync that landed. (None, None) before the first, or without a catalog file."""
        if not self.path.is_file():
            return None, None
        with contextlib.closing(read_only(self.path)) as conn:
            return synced_generation(conn, alias), synced_outbox(conn, alias)

    def mirror_lag(self, alias: str, max_seconds: float = 0.0) -> dict[str, Any] | None:
        """None also when there is no catalog yet (nothing to lag behind)."""
        if not self.path.is_file():
            return None
        with contextlib.closing(read_only(self.path)) as conn:
            return mirror_lag(conn, alias, max_seconds)

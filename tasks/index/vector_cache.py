"""Exact kNN from memory: the current chunks' vectors as one float32 matrix per process, index file and vector
table, kept in step with the index by a generation counter that SQLite triggers bump on every change to `chunks`.

sqlite-vec's scan costs ~1.3 µs a row (a scalar function per row behind a join): ~130 ms at 100k chunks. One
matrix-vector product over the same vectors is ~8 ms (benchmarks/index_scale.py). The filters stay exact: the
cache holds each current row's access rule, and it is synced inside the caller's read transaction, so the mask it
applies is the snapshot the rest of the query reads. Memory: 4 × dims bytes a current chunk (154 MB at 100k × 384).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import numpy as np

from korpus.core.datamodel import scope_sql

logger = logging.getLogger("korpus.vectors")

GENERATION_SQL = """
INSERT OR IGNORE INTO index_meta VALUES ('generation', '0');
CREATE TRIGGER IF NOT EXISTS chunks_generation_insert AFTER INSERT ON chunks BEGIN
    UPDATE index_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'; END;
CREATE TRIGGER IF NOT EXISTS chunks_generation_delete AFTER DELETE ON chunks BEGIN
    UPDATE index_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'; END;
DROP TRIGGER IF EXISTS chunks_generation_update;
CREATE TRIGGER IF NOT EXISTS chunks_generation_labels AFTER UPDATE OF lifecycle, access, tenant ON chunks BEGIN
    UPDATE index_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'; END;
"""


@dataclass(frozen=True)
class Snapshot:
    """The current rows at one generation: never mutated, so a query may rank on it in any thread."""

    rowids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chunk_ids: tuple[str, ...] = ()
    access: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    codes: dict[str, int] = field(default_factory=dict)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    def top(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """The `depth` rows visible to `scopes` most similar to `vector` (cosine), best first."""
        allowed = [self.codes[s] for s in scopes if s in self.codes]
        if not allowed or not len(self.rowids) or depth <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        scores = self.matrix @ (query / norm if norm else query)
        visible = np.isin(self.access, allowed)
        scores = np.where(visible, scores, -np.inf)
        count = min(depth, int(visible.sum()))
        if count == 0:
            return []
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.lexsort((self.rowids[best], -scores[best]))]
        return [(int(self.rowids[i]), float(scores[i])) for i in best]


class VectorCache:
    """The snapshot of one vector table, replaced whole when the index's generation moves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.generation: str | None = None
        self.snapshot = Snapshot()

    def current(self, conn: apsw.Connection, table: str, generation: str) -> Snapshot:
        """The snapshot for `generation`, synced first if needed (through `conn`, inside the caller's transaction)."""
        with self.lock:
            if self.generation != generation:
                self.snapshot = self._sync(conn, table)
                self.generation = generation
            return self.snapshot

    def _sync(self, conn: apsw.Connection, table: str) -> Snapshot:
        """Vectors are fetched only for rows the old snapshot does not hold (a row is known by rowid and chunk id
        together: SQLite may reuse a deleted rowid)."""
        old = self.snapshot
        rows = conn.execute(
            f"SELECT rowid, chunk_id, {scope_sql('tenant', 'access')} FROM chunks WHERE lifecycle = 'current' "
            "ORDER BY rowid"
        ).fetchall()
        known = {(int(r), c): i for i, (r, c) in enumerate(zip(old.rowids.tolist(), old.chunk_ids, strict=True))}
        keep = [known.get((rowid, chunk_id), -1) for rowid, chunk_id, _ in rows]
        fetch = [rowid for (rowid, _, _), k in zip(rows, keep, strict=True) if k < 0]
        fresh: dict[int, np.ndarray] = {}
        for start in range(0, len(fetch), 5000):
            part = fetch[start : start + 5000]
            marks = ", ".join("?" for _ in part)
            for rowid, blob in conn.execute(f"SELECT rowid, embedding FROM {table} WHERE rowid IN ({marks})", part):
                fresh[rowid] = np.frombuffer(blob, dtype=np.float32)
        dims = next(iter(fresh.values())).shape[0] if fresh else old.matrix.shape[1] if old.matrix.size else 0
        matrix = np.empty((len(rows), dims), dtype=np.float32)
        present = np.ones(len(rows), dtype=bool)
        for i, ((rowid, _, _), k) in enumerate(zip(rows, keep, strict=True)):
            if k >= 0:
                matrix[i] = old.matrix[k]
            elif rowid in fresh:
                vector = fresh[rowid]
                norm = float(np.linalg.norm(vector))
                matrix[i] = vector / norm if norm else vector
            else:  # a current chunk without a vector (should not happen): never ranked
                present[i] = False
                matrix[i] = 0.0
        codes = dict(old.codes)
        for _, _, access in rows:
            codes.setdefault(access, len(codes))
        access = np.fromiter((codes[a] for _, _, a in rows), dtype=np.int32, count=len(rows))
        access[~present] = -1
        if not present.all():
            logger.warning(
                "%d current chunks have no vector in %s and are left out of dense ranking (a reindex restores them)",
                int((~present).sum()),
                table,
            )
        rowids = np.fromiter((r for r, _, _ in rows), dtype=np.int64, count=len(rows))
        return Snapshot(rowids, tuple(c for _, c, _ in rows), access, codes, matrix)


_caches: dict[tuple[str, str], VectorCache] = {}
_caches_lock = threading.Lock()


def cache_for(path: Path, table: str) -> VectorCache:
    key = (str(Path(path).resolve()), table)
    with _caches_lock:
        for other in [k for k in _caches if k[0] == key[0] and k != key]:
            del _caches[other]  # a reindex swapped the table: free the old model's vectors
        return _caches.setdefault(key, VectorCache())

"""BM25 over in-memory postings, for queries whose terms match a large share of the index.

FTS5 finds the rows matching a query quickly (≈2 ms for 60 000 matches at 100k chunks) but its `bm25()` runs once
per matching row through the auxiliary-function interface, which is most of a query of frequent words (≈15-30 ms).
Here the same formula — FTS5's own (fts5_aux.c: k1 1.2, b 0.75, idf = ln((N - n + 0.5) / (n + 0.5)) floored at
1e-6, D the row's tokens over every column, avgdl over the table, term frequency in the `terms` column) — is
computed with numpy over postings read once per term from the `fts5vocab` instance table
(`chunk_terms_instance`, tasks/index/schema.py) and kept for the index's
generation (tasks/index/vector_cache.py: bumped by every write that changes chunks, so a publish, retire, relabel or
review makes the next query load afresh). The ranking equals FTS5's (tests/unit/test_bm25_memory.py compares them),
filters included: only rows whose `chunk_visibility.visible` is among the scopes take a rank.

`SqliteSearch.lexical` uses it when the query's terms together occur in more than `MEMORY_BM25_MIN_MATCHES` rows;
below that FTS5 is as fast and nothing is held in memory.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import numpy as np

K1, B = 1.2, 0.75
MEMORY_BM25_MIN_MATCHES = 5_000
MAX_POSTINGS = 4_000_000
"""Postings a generation keeps, over all its terms (8 bytes each: 32 MB), least recently used terms dropped first."""


def _sizes(blob: bytes) -> int:
    """The total tokens of a row: the sum of the varints (SQLite's: big-endian, 7 bits a byte, the high bit saying
    more follow) in its `chunk_terms_docsize` record, one per column."""
    total, value = 0, 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            total, value = total + value, 0
    return total


@dataclass
class Generation:
    """What one generation of the index holds, loaded on first use: row sizes, visibility, postings per term."""

    tokens: np.ndarray  # rowid → total tokens of the row (0 for no row)
    norm: np.ndarray  # rowid → k1 · (1 - b + b · D / avgdl), the length part of every term's score
    visible: np.ndarray  # rowid → access code of a visible chunk, -1 otherwise
    codes: dict[str, int]
    rows: int
    avgdl: float
    postings: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=OrderedDict)
    held: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, conn: apsw.Connection) -> Generation:
        sizes = conn.execute("SELECT id, sz FROM chunk_terms_docsize").fetchall()
        top = max((rowid for rowid, _ in sizes), default=0)
        tokens = np.zeros(top + 1, dtype=np.float64)
        for rowid, blob in sizes:
            tokens[rowid] = _sizes(blob)
        visible = np.full(top + 1, -1, dtype=np.int32)
        codes: dict[str, int] = {}
        for rowid, access in conn.execute("SELECT rowid, visible FROM chunk_visibility WHERE visible IS NOT NULL"):
            if rowid <= top:
                visible[rowid] = codes.setdefault(access, len(codes))
        rows = len(sizes)
        avgdl = float(tokens.sum()) / rows if rows else 1.0
        return cls(tokens, K1 * (1 - B + B * tokens / avgdl), visible, codes, rows, avgdl)

    def term(self, conn: apsw.Connection, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, term frequency in `terms`) of every row holding the term, read once per generation."""
        with self.lock:
            if term in self.postings:
                self.postings.move_to_end(term)
                return self.postings[term]
        rows = conn.execute(
            "SELECT doc, count(*) FROM chunk_terms_instance WHERE term = ? AND col = 'terms' GROUP BY doc",
            (term,),
        ).fetchall()
        found = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        entry = (found[:, 0].astype(np.int32), found[:, 1].astype(np.float32))
        with self.lock:
            self.postings[term] = entry
            self.held += len(entry[0])
            while self.held > MAX_POSTINGS and len(self.postings) > 1:
                _, (dropped, _) = self.postings.popitem(last=False)
                self.held -= len(dropped)
        return entry

    def ranking(
        self, conn: apsw.Connection, terms: Sequence[str], scopes: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        allowed = [self.codes[s] for s in scopes if s in self.codes]
        if not allowed or depth <= 0:
            return []
        scores = np.zeros(len(self.tokens), dtype=np.float64)
        norm = self.norm
        for term in dict.fromkeys(terms):
            rowids, tf = self.term(conn, term)
            inside = rowids < len(self.tokens)
            rowids, tf = rowids[inside], tf[inside].astype(np.float64)
            idf = math.log((self.rows - len(rowids) + 0.5) / (len(rowids) + 0.5))
            scores[rowids] += max(idf, 1e-6) * (tf * (K1 + 1.0)) / (tf + norm[rowids])
        candidates = np.flatnonzero((scores > 0) & np.isin(self.visible, allowed))
        if not len(candidates):
            return []
        if len(candidates) > depth:
            cut = np.argpartition(-scores[candidates], depth - 1)[:depth]
            # every row tied with the last one kept competes, so the tie order (by rowid) is the full ranking's
            floor = scores[candidates[cut]].min()
            candidates = candidates[scores[candidates] >= floor]
        order = sorted(candidates.tolist(), key=lambda rowid: (-scores[rowid], rowid))[:depth]
        return [(rowid, float(scores[rowid])) for rowid in order]


class MemoryBm25:
    """The process's postings for one index file, at the generation a connection's snapshot sees."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation: tuple[str, Generation] | None = None

    def at(self, conn: apsw.Connection, generation: str) -> Generation:
        with self._lock:
            if self._generation is not None and self._generation[0] == generation:
                return self._generation[1]
        loaded = Generation.load(conn)
        with self._lock:
            self._generation = (generation, loaded)
        return loaded


_caches: dict[str, MemoryBm25] = {}
_caches_lock = threading.Lock()


def memory_bm25_for(path: Path) -> MemoryBm25:
    with _caches_lock:
        return _caches.setdefault(str(Path(path).resolve()), MemoryBm25())

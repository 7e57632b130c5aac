"""The embedded index's search side: the `SearchBackend` primitives over one SQLite file (tasks/index/sqlite.py).

BM25 is FTS5 over the Russian-analysed `terms` column (or the unstemmed `exact` one), joined to the narrow
`chunk_visibility` table; kNN is exact, in numpy, over the process's in-memory snapshot of the vectors
(tasks/index/vector_cache.py), which sqlite-vec's SQL answer (`vector_ranking_sql`) is tested against. Access and
lifecycle filters sit inside every query, before the top-N cut. Keys are chunk rowids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import apsw
import numpy as np

from korpus.core.datamodel import scope_sql
from tasks.index.backend import IndexMismatchError, idf_coverage
from tasks.index.bm25_memory import MEMORY_BM25_MIN_MATCHES, memory_bm25_for
from tasks.index.exact import locate_occurrences, no_occurrences
from tasks.index.schema import row_dicts
from tasks.index.vector_cache import Snapshot, cache_for
from tasks.text.analysis import analyse, words
from tasks.text.regions import unpack
from tasks.text.typos import expand


class IndexFile(Protocol):
    """What the search side reads of the embedded index (tasks/index/sqlite.py `SqliteIndex`, which hands itself
    over as `index.searcher`): its file, its connection, the table its vectors are in. The search side knows this
    shape, not the catalog module, so neither imports the other back."""

    path: Path
    conn: apsw.Connection

    def vector_table(self) -> str: ...


def _fts_query(terms: Iterable[str], column: str = "terms") -> str | None:
    unique = list(dict.fromkeys(t for t in terms if t))
    if not unique:
        return None
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in unique)
    return f"{column} : ({quoted})"


def filter_sql(scopes: Sequence[str]) -> tuple[str, list[Any]]:
    """Current chunks (`chunks c`) whose scope (access rule, `tenant/access` outside the default tenant) is among
    the scopes; no scopes, no rows."""
    if not scopes:
        return "0", []
    marks = ", ".join("?" for _ in scopes)
    return f"c.lifecycle = 'current' AND {scope_sql('c.tenant', 'c.access')} IN ({marks})", list(scopes)


def visible_sql(scopes: Sequence[str]) -> tuple[str, list[Any]]:
    """The same filter on `chunk_visibility v` (current and in scope)."""
    if not scopes:
        return "0", []
    return f"v.visible IN ({', '.join('?' for _ in scopes)})", list(scopes)


class SqliteSearch:
    """`SearchBackend` over an `IndexFile` (a `SqliteIndex`)'s connection.

    >>> Retriever(SqliteSearch(index)).search("договор поставки", vector, scopes=["public"], k=5)
    """

    name = "sqlite"

    def __init__(self, index: IndexFile) -> None:
        self.index = index
        self.conn = index.conn

    def snapshot(self) -> AbstractContextManager[Any]:
        return self.conn  # one read transaction: both sides and the hit lookup see the same version switch

    def prefetch(self, *_asked: object) -> None:
        """Nothing: every primitive reads the file in this process (no round trip to save)."""

    def check_query_vector(self, vector: np.ndarray) -> None:
        dims = self.conn.execute("SELECT value FROM index_meta WHERE key = 'embed_dims'").fetchall()
        if dims and int(dims[0][0]) != len(vector):
            raise IndexMismatchError(
                f"index {self.index.path} holds {dims[0][0]}-dim vectors; the query vector has {len(vector)} dims. "
                "Query with the model the index was built with (korpus sources / /health show it)."
            )

    def lexical(
        self,
        query: str,
        scopes: Sequence[str],
        depth: int,
        stemmed: bool = True,
        variants: dict[str, list[str]] | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 over the Russian-analysed `terms` field (with the typo variants of unknown terms; looked up here
        when the caller has none), or (stemmed=False) over the unstemmed `exact` field."""
        if stemmed:
            terms = analyse(query)
            variants = self.typo_variants(terms, scopes) if variants is None else variants
            searched = list(dict.fromkeys(t for t in [*terms, *(v for f in variants.values() for v in f)] if t))
            if sum(self.term_frequency(t) for t in searched) > MEMORY_BM25_MIN_MATCHES:
                return self._memory_bm25(searched, scopes, depth)  # the same ranking, without bm25() per row
            match = _fts_query(searched)
        else:
            match = _fts_query(words(query), column="exact")
        if match is None:
            return []
        where, params = visible_sql(scopes)
        weights = "1.0, 0.0" if stemmed else "0.0, 1.0"
        rows = self.conn.execute(
            f"SELECT v.rowid, bm25(chunk_terms, {weights}) AS s FROM chunk_terms "
            f"JOIN chunk_visibility v ON v.rowid = chunk_terms.rowid WHERE chunk_terms MATCH ? AND {where} "
            "ORDER BY s LIMIT ?",
            [match, *params, depth],
        )
        return [(rowid, -score) for rowid, score in rows]

    def _memory_bm25(self, terms: list[str], scopes: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """FTS5's BM25 over in-memory postings (tasks/index/bm25_memory.py), at this connection's snapshot."""
        with self.conn:
            postings = memory_bm25_for(self.index.path).at(self.conn, self._generation())
            return postings.ranking(self.conn, terms, scopes, depth)

    def _generation(self) -> str:
        """The index's write generation at this connection's snapshot: the key of every in-memory copy."""
        return self.conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()[0][0]

    def term_frequency(self, term: str) -> int:
        """Chunks whose analysed text holds `term` (an index lookup on fts5vocab; deleted rows may count)."""
        rows = self.conn.execute("SELECT doc FROM chunk_terms_vocab WHERE term = ? AND col = 'terms'", (term,))
        found = rows.fetchall()
        return found[0][0] if found else 0

    def typo_variants(self, terms: Sequence[str], scopes: Sequence[str] | None = None) -> dict[str, list[str]]:
        """Indexed terms a typo away from each query term the index does not know (tasks/text/typos.py); with
        `scopes`, both judged over the chunks those scopes may see."""

        def starting_with_letter_of(term: str) -> list[tuple[str, int]]:
            return self.conn.execute(
                "SELECT term, doc FROM chunk_terms_vocab WHERE term >= ? AND term < ? AND col = 'terms'",
                (term[0], chr(ord(term[0]) + 1)),
            ).fetchall()

        holds = None if scopes is None else (lambda term: self.visible_holds(term, scopes))
        return expand(terms, self.term_frequency, starting_with_letter_of, holds)

    def visible_holds(self, term: str, scopes: Sequence[str]) -> bool:
        """Whether a chunk the scopes may see holds the analysed term."""
        match = _fts_query([term])
        if match is None:
            return False
        where, params = visible_sql(scopes)
        return bool(
            self.conn.execute(
                f"SELECT 1 FROM chunk_terms JOIN chunk_visibility v ON v.rowid = chunk_terms.rowid WHERE chunk_terms "
                f"MATCH ? AND {where} LIMIT 1",
                [match, *params],
            ).fetchall()
        )

    def identifiers(self, identifiers: Sequence[str], scopes: Sequence[str], depth: int) -> list[int]:
        """Chunks holding the query's identifiers exactly, most identifiers matched first."""
        if not identifiers:
            return []
        where, params = visible_sql(scopes)
        marks = ", ".join("?" for _ in identifiers)
        rows = self.conn.execute(
            "SELECT v.rowid, count(DISTINCT i.identifier) AS n FROM chunk_identifiers i "
            f"JOIN chunk_visibility v ON v.rowid = i.rowid WHERE i.identifier IN ({marks}) AND {where} "
            "GROUP BY v.rowid ORDER BY n DESC, v.rowid LIMIT ?",
            [*identifiers, *params, depth],
        )
        return [rowid for rowid, _ in rows]

    def coverage(self, query: str, key: int, variants: dict[str, list[str]] | None = None) -> float:
        """How much of the query the chunk holds: the IDF-weighted share of the query's analysed terms found in it
        (1.0 = every term). Low coverage of BM25's best hit means BM25 ranked on a word or two the question
        happens to share — the mark of a paraphrase — and its ranking deserves less weight in the fusion."""
        terms = list(dict.fromkeys(analyse(query)))
        if not terms:
            return 0.0
        stored = self.conn.execute("SELECT terms FROM chunk_tokens WHERE rowid = ?", (key,)).fetchall()
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

    def vector(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """Exact kNN over the current chunks the scopes may see, from the process's in-memory copy of the vectors
        (tasks/index/vector_cache.py), synced to this connection's snapshot first."""
        if not scopes:
            return []
        return self._vectors().top(vector, scopes, depth)

    def _vectors(self) -> Snapshot:
        """The in-memory vectors at this connection's snapshot (one read transaction for check and sync)."""
        with self.conn:
            table = self.index.vector_table()
            return cache_for(self.index.path, table).current(self.conn, table, self._generation())

    def vector_ranking_sql(self, vector: np.ndarray, scopes: Sequence[str], depth: int) -> list[tuple[int, float]]:
        """The same ranking by sqlite-vec inside SQL (no memory copy): the reference the cache is tested against."""
        where, params = filter_sql(scopes)
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        rows = self.conn.execute(
            "SELECT c.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c "
            f"JOIN {self.index.vector_table()} v ON v.rowid = c.rowid WHERE {where} ORDER BY d LIMIT ?",
            [blob, *params, depth],
        )
        return [(rowid, 1.0 - distance) for rowid, distance in rows]

    def hits(
        self, scored: Sequence[tuple[int, float]], scopes: Sequence[str] = (), regions: bool = True
    ) -> list[tuple[int, dict[str, Any]]]:
        """The ranked chunks' fields (read in the ranking's snapshot, so the filters need not be applied again)."""
        if not scored:
            return []
        marks = ", ".join("?" for _ in scored)
        cursor = self.conn.execute(
            "SELECT rowid, chunk_id, source_id, source_version, page, t_start, t_end, section_path, text, "
            f"lifecycle, access, exception, regions FROM chunks WHERE rowid IN ({marks})",
            [rowid for rowid, _ in scored],
        )
        rows = {row[0]: row[1:] for row in cursor}
        hits = []
        for rowid, score in scored:
            chunk_id, source_id, version, page, t0, t1, section, text, lifecycle, access, exception, boxes = rows[rowid]
            hits.append(
                (
                    rowid,
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
                        "regions": unpack(boxes) if regions else [],
                    },
                )
            )
        return hits

    def cited(self, chunk_id: str, scopes: Sequence[str]) -> dict[str, Any] | None:
        """A current chunk the scopes may see, with its regions and its source version's kind and path; None for
        any other id (unknown, superseded, quarantined or out of scope: the caller cannot tell which)."""
        where, params = filter_sql(scopes)
        rows = row_dicts(
            self.conn.execute(
                "SELECT c.chunk_id, c.source_id, c.source_version, c.page, c.t_start, c.t_end, c.previous_id, "
                "c.next_id, c.regions, c.access, s.kind, s.path, s.size FROM chunks c JOIN sources s "
                f"ON s.source_id = c.source_id AND s.version = c.source_version WHERE c.chunk_id = ? AND {where}",
                [chunk_id, *params],
            )
        )
        if not rows:
            return None
        rows[0]["regions"] = unpack(rows[0]["regions"])
        return rows[0]

    def visible_source(self, source_id: str, scopes: Sequence[str]) -> dict[str, Any] | None:
        """The current version of a file the scopes may see (kind, path, size, access); None otherwise."""
        if not scopes:
            return None
        marks = ", ".join("?" for _ in scopes)
        rows = row_dicts(
            self.conn.execute(
                "SELECT source_id, version, kind, path, size, access FROM sources WHERE source_id = ? AND lifecycle = "
                f"'current' AND kind IS NOT 'meta' AND {scope_sql('tenant', 'access')} IN ({marks})",
                [source_id, *scopes],
            )
        )
        return rows[0] if rows else None

    def health(self) -> dict[str, Any]:
        served = self.conn.execute("SELECT count(*) FROM chunk_visibility WHERE visible IS NOT NULL").fetchall()[0][0]
        return {"backend": self.name, "status": "ok", "chunks_served": served}

    def exact_occurrences(self, text: str, scopes: Sequence[str], limit: int = 500) -> dict[str, Any]:
        """Chunks matching the phrase on the unstemmed field (FTS5 phrase query), then every occurrence located in
        their bodies (tasks/index/exact.py)."""
        tokens = words(text)
        if not tokens:
            return no_occurrences(text)
        where, params = filter_sql(scopes)
        phrase = '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'
        rows = self.conn.execute(
            "SELECT c.source_id, c.page, c.t_start, c.body, c.chunk_id, c.regions FROM chunk_terms "
            f"JOIN chunks c ON c.rowid = chunk_terms.rowid WHERE chunk_terms MATCH ? AND {where} "
            "ORDER BY c.source_id, c.page, c.t_start, c.rowid",
            [f"exact : {phrase}", *params],
        )
        return locate_occurrences(text, rows, limit)

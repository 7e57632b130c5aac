"""The embedded index's vectors: the model binding, the table holding the current model's vectors (the 'alias' a
reindex swaps), a reindex into another model, and the stored chunks with their vectors a mirror reads. A part of
`SqliteIndex` (tasks/index/sqlite.py), apart so each file reads in one sitting."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from korpus.core.datamodel import Chunk, Locator, Region
from tasks.index.backend import IndexMismatchError
from tasks.text.passages import passage_text
from tasks.text.regions import unpack

if TYPE_CHECKING:
    import apsw


_KIND = "LEFT JOIN sources s ON s.source_id = c.source_id AND s.version = c.source_version"
"""A chunk's source version row, for its kind (what its vector is embedded from: `passage_text`)."""
VECTORS_KEY = "vectors"
"""index_meta: 'cluster' when the file keeps a chunk's vector only until a mirror has indexed it (`keep_vectors`)."""


@dataclass(frozen=True)
class StoredChunk:
    chunk: Chunk
    ordinal: int
    vector: np.ndarray | None
    """None once handed to the cluster (`keep_vectors`)."""
    kind: str | None
    exception: bool


class VectorTables:
    conn: apsw.Connection
    path: Path
    chunk_count: Any  # provided by SqliteIndex
    write_transaction: Any  # provided by SqliteIndex

    def bind_embedding(self, model_name: str, dims: int) -> None:
        """Record the embedding model on first use; refuse a different one later."""
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        if "embed_dims" not in meta:
            with self.write_transaction():
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

    def vector_table(self) -> str:
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
        """Embed every current chunk's stored text with another model into a new vector table, then swap it in (a
        meta-document's part by what its refresh embeds of it, `passage_text`).

        No parsing or OCR: the chunk text is in the index. Queries keep using the old table until the swap, a
        single transaction that also embeds any chunk published meanwhile, records the new model and drops the
        old vectors. A refresh still running with the old model is refused at publish (IndexMismatchError).
        """
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        old_table = self.vector_table()
        table = "chunk_vectors_" + re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_") + f"_{dims}"
        if meta.get("embed_model") == model_name and meta.get("embed_dims") == str(dims):
            raise ValueError(f"index {self.path} already holds {dims}-dim vectors from {model_name!r}")
        if table == old_table:
            table += "_new"
        with self.write_transaction():
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")
            self.conn.execute(f"CREATE TABLE {table} (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
        missing_sql = (
            f"SELECT c.rowid, c.text, s.kind FROM chunks c {_KIND} WHERE c.lifecycle = 'current' "
            f"AND NOT EXISTS (SELECT 1 FROM {table} v WHERE v.rowid = c.rowid) ORDER BY c.rowid LIMIT ?"
        )
        total = self.chunk_count()

        def fill(rows: list[tuple[int, str, str | None]]) -> None:
            vectors = np.asarray(embed([passage_text(text, kind) for _, text, kind in rows]), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[1] != dims:
                raise IndexMismatchError(f"{model_name!r} returned vectors of shape {vectors.shape}, not (n, {dims})")
            self.conn.executemany(
                f"INSERT INTO {table} (rowid, embedding) VALUES (?, ?)",
                [(row[0], vector.tobytes()) for row, vector in zip(rows, vectors, strict=True)],
            )

        done = 0
        while rows := self.conn.execute(missing_sql, (batch,)).fetchall():
            with self.write_transaction():
                fill(rows)
            done += len(rows)
            if progress is not None:
                progress(done, max(total, done))
        with self.write_transaction():  # the swap
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

    def current_vectors(self, source_id: str, key: Callable[[str], str] | None = None) -> dict[str, np.ndarray]:
        """Chunk text (or `key(text)`, e.g. a digest, so a large document's texts are not all held) → vector of a
        source's current chunks (to reuse for unchanged text in a new version)."""
        rows = self.conn.execute(
            f"SELECT c.text, v.embedding FROM chunks c INDEXED BY chunks_by_source JOIN {self.vector_table()} v "
            "ON v.rowid = c.rowid WHERE c.source_id = ? AND c.lifecycle = 'current'",
            (source_id,),
        )
        return {(key(text) if key else text): np.frombuffer(blob, dtype=np.float32) for text, blob in rows}

    def embedding_model(self) -> tuple[str, int] | None:
        """(model name, dimension) of the stored vectors; None before the first publish."""
        meta = dict(self.conn.execute("SELECT key, value FROM index_meta"))
        return (meta["embed_model"], int(meta["embed_dims"])) if "embed_model" in meta else None

    def chunk_states(self) -> dict[str, tuple[str, str, str, str, bool]]:
        """chunk id → (lifecycle, access, owner, tenant, exception) of every stored chunk (what a mirror serves)."""
        rows = self.conn.execute("SELECT chunk_id, lifecycle, access, owner, tenant, exception FROM chunks")
        return {row[0]: (row[1], row[2], row[3], row[4], bool(row[5])) for row in rows}

    def chunk_states_in_order(self, page: int = 1000) -> Iterator[tuple[str, tuple[str, str, str, str, bool]]]:
        """(chunk id, `chunk_states`' state) of every stored chunk in chunk id order, `page` rows a statement (keyset
        paging on the unique index: memory stays one page whatever the catalog holds)."""
        after = ""
        while True:
            rows = self.conn.execute(
                "SELECT chunk_id, lifecycle, access, owner, tenant, exception FROM chunks WHERE chunk_id > ? "
                "ORDER BY chunk_id LIMIT ?",
                (after, page),
            ).fetchall()
            for row in rows:
                yield row[0], (row[1], row[2], row[3], row[4], bool(row[5]))
            if len(rows) < page:
                return
            after = rows[-1][0]

    def chunk_states_of(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, str, str, str, bool]]:
        """`chunk_states` of these ids only (those the catalog still holds)."""
        marks = ", ".join("?" for _ in chunk_ids)
        rows = self.conn.execute(
            f"SELECT chunk_id, lifecycle, access, owner, tenant, exception FROM chunks WHERE chunk_id IN ({marks})",
            list(chunk_ids),
        )
        return {row[0]: (row[1], row[2], row[3], row[4], bool(row[5])) for row in rows}

    def keeps_vectors(self) -> bool:
        """Whether the file keeps every chunk's vector. With KORPUS_BACKEND=opensearch it keeps one only until the
        cluster holds it (`keep_vectors`)."""
        rows = self.conn.execute("SELECT value FROM index_meta WHERE key = ?", (VECTORS_KEY,)).fetchall()
        return not rows or rows[0][0] != "cluster"

    def keep_vectors(
        self,
        keep: bool,
        embedder: Callable[[], Any] | None = None,
        batch: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Make the file keep every chunk's vector (`keep`), or each only until a mirror has indexed it; the chunks
        embedded again.

        Off (a cluster answers the searches): the mode is recorded, and nothing is deleted now. Each sync then
        drops the vectors of the chunks it indexed, and a reconcile those the cluster already held
        (`hand_off_vectors`). A chunk the cluster later lacks is embedded again from its stored text
        (tasks/index/opensearch_mirror.py). On again (KORPUS_BACKEND=sqlite after a cluster): every chunk without
        a vector is embedded from its stored text by `embedder()` (an `Embedder` of the catalog's model), `batch`
        chunks a transaction, and the mode switched with the last; `progress(embedded so far)` after each. Each
        transaction moves the generation. Until the last one the embedded search refuses to answer
        (tasks/index/registry.py), so it never reads a half-filled table as whole."""
        if keep == self.keeps_vectors():
            return 0
        if not keep:
            with self.write_transaction():
                self.conn.execute("INSERT OR REPLACE INTO index_meta VALUES (?, 'cluster')", (VECTORS_KEY,))
            return 0
        table = self.vector_table()
        missing_sql = (
            f"SELECT c.rowid, c.text, s.kind FROM chunks c {_KIND} WHERE c.rowid > ? AND NOT EXISTS "
            f"(SELECT 1 FROM {table} v WHERE v.rowid = c.rowid) ORDER BY c.rowid LIMIT ?"
        )
        embedded, after = 0, 0
        model = None
        while True:
            rows = self.conn.execute(missing_sql, (after, batch)).fetchall()
            vectors = np.zeros((0, 0), dtype=np.float32)
            if rows:
                model = model or embedder_of(self, embedder)
                texts = [passage_text(text, kind) for _, text, kind in rows]
                vectors = np.asarray(model.embed_passages(texts), dtype=np.float32)
            with self.write_transaction():
                self.conn.executemany(
                    f"INSERT OR REPLACE INTO {table} (rowid, embedding) VALUES (?, ?)",
                    [(row[0], vector.tobytes()) for row, vector in zip(rows, vectors, strict=True)],
                )
                embedded += len(rows)
                self.conn.execute("UPDATE index_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                if len(rows) < batch:
                    self.conn.execute("DELETE FROM index_meta WHERE key = ?", (VECTORS_KEY,))
                    return embedded
            after = rows[-1][0]
            if progress is not None:
                progress(embedded)

    def hand_off_vectors(self, chunk_ids: Sequence[str]) -> int:
        """Drop these chunks' vectors, which the cluster now holds, unless the file keeps every vector
        (`keep_vectors`); how many were dropped. A meta-document's parts keep theirs: its next build reuses the
        vector of every part whose text did not change (`current_vectors`, tasks/meta/publish.py), and they are few
        beside the documents (a table of contents of 100,000 letters is ~18,000 parts)."""
        if not chunk_ids or self.keeps_vectors():
            return 0
        marks = ", ".join("?" for _ in chunk_ids)
        with self.write_transaction():
            self.conn.execute(
                f"DELETE FROM {self.vector_table()} WHERE rowid IN (SELECT c.rowid FROM chunks c {_KIND} "
                f"WHERE c.chunk_id IN ({marks}) AND s.kind IS NOT 'meta')",
                list(chunk_ids),
            )
            return self.conn.changes()

    def stored_chunks(self, chunk_ids: Sequence[str]) -> Iterator[StoredChunk]:
        """The chunks with these ids as stored — text, locator, labels, vector (None once handed to the cluster),
        the source's kind — to mirror them without re-parsing, and without re-embedding while the file holds
        the vector."""
        marks = ", ".join("?" for _ in chunk_ids)
        cursor = self.conn.execute(
            "SELECT c.chunk_id, c.source_id, c.source_version, c.ordinal, c.page, c.t_start, c.t_end, "
            "c.section_path, c.text, c.body, c.owner, c.access, c.tenant, c.language, c.policy_version, c.exception, "
            f"c.regions, s.kind, v.embedding FROM chunks c LEFT JOIN {self.vector_table()} v ON v.rowid = c.rowid "
            "LEFT JOIN sources s ON s.source_id = c.source_id AND s.version = c.source_version "
            f"WHERE c.chunk_id IN ({marks})",
            list(chunk_ids),
        )
        for row in cursor:
            (
                chunk_id,
                source_id,
                version,
                ordinal,
                page,
                t0,
                t1,
                section,
                text,
                body,
                owner,
                access,
                tenant,
                language,
                policy,
                exception,
                regions,
                kind,
                blob,
            ) = row
            chunk = Chunk(
                chunk_id=chunk_id,
                source_id=source_id,
                source_version=version,
                section_path=json.loads(section),
                locator=Locator(page=page, t_start=t0, t_end=t1),
                text=text,
                body=body,
                owner=owner,
                access_rule=access,
                tenant=tenant,
                policy_version=policy,
                language=language,
                regions=[Region(**r) for r in unpack(regions)],
            )
            vector = None if blob is None else np.frombuffer(blob, dtype=np.float32)
            yield StoredChunk(chunk, ordinal, vector, kind, bool(exception))


def embedder_of(catalog: VectorTables, embedder: Callable[[], Any] | None) -> Any:
    """The embedder that gives a chunk its vector again: `embedder()`, refused unless it is the catalog's model."""
    bound = catalog.embedding_model()
    if embedder is None:
        raise IndexMismatchError(
            f"{catalog.path} keeps no vectors of the chunks the cluster held (KORPUS_BACKEND=opensearch): embedding "
            "them again needs the embedding model, and none was given"
        )
    model = embedder()
    if bound is not None and (model.name, int(model.dims)) != bound:
        raise IndexMismatchError(
            f"{catalog.path} holds {bound[1]}-dim vectors from {bound[0]!r}; the configured model is {model.name!r} "
            f"({model.dims} dims), which cannot give its chunks their vectors again. Configure the catalog's model, "
            "or move the index to the new model: korpus reindex --embed-model PATH."
        )
    return model

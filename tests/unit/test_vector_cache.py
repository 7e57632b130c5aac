"""The in-memory kNN (tasks/index/vector_cache.py) against sqlite-vec's scan in SQL, and the trigger-kept visibility
table against `chunks`, through a random sequence of the index's writes: publish, republish of the same version
(rowids reused), supersede, retire, relabel, a reindex swap, and a second connection writing while the first one
queries."""

import random
from pathlib import Path

import numpy as np
import pytest

from korpus.core.datamodel import Chunk, Locator, Source, SourceKind, chunk_id_for
from tasks.index.sqlite import SqliteIndex

pytestmark = pytest.mark.unit
DIMS = 12
SCOPES = (["public"], ["hr"], ["public", "hr"], ["finance"], [])


def _source(n: int, version: str, access: str) -> tuple[Source, list[Chunk]]:
    source = Source(
        source_id=f"s{n}.txt",
        version=version,
        path="/x",
        kind=SourceKind.text,
        owner="o",
        access=access,
        tenant="default",
    )
    chunks = [
        Chunk(
            chunk_id=chunk_id_for(version, source.source_id, i),
            source_id=source.source_id,
            source_version=version,
            locator=Locator(page=i + 1),
            text=f"текст {n} {i}",
            body=f"текст {n} {i}",
            owner="o",
            access_rule=access,
            policy_version="structure-v2",
        )
        for i in range(3)
    ]
    return source, chunks


def _vectors(rng: np.random.Generator, n: int, dims: int = DIMS) -> np.ndarray:
    return rng.standard_normal((n, dims)).astype(np.float32)


def _agree(index: SqliteIndex, rng: np.random.Generator, dims: int = DIMS) -> None:
    # The trigger-kept visibility table says exactly what `chunks` says.
    drift = index.conn.execute(
        "SELECT count(*) FROM chunks c LEFT JOIN chunk_visibility v ON v.rowid = c.rowid "
        "WHERE v.rowid IS NULL OR v.visible IS NOT (CASE WHEN c.lifecycle = 'current' THEN c.access END)"
    ).fetchall()[0][0]
    extra = index.conn.execute(
        "SELECT count(*) FROM chunk_visibility WHERE rowid NOT IN (SELECT rowid FROM chunks)"
    ).fetchall()[0][0]
    assert drift == 0 and extra == 0
    for scopes in SCOPES:
        query = rng.standard_normal(dims).astype(np.float32)
        cached = index.searcher.vector(query, scopes, 10)
        reference = index.searcher.vector_ranking_sql(query, scopes, 10)
        assert [r for r, _ in cached] == [r for r, _ in reference], scopes
        assert [s for _, s in cached] == pytest.approx([s for _, s in reference], abs=1e-5)


def test_cache_matches_sql_through_every_kind_of_write(tmp_path: Path) -> None:
    rng, pick = np.random.default_rng(5), random.Random(5)
    index = SqliteIndex(tmp_path / "k.db")
    reader = SqliteIndex(tmp_path / "k.db")  # another connection, same process: the same cache
    for n in range(8):
        source, chunks = _source(n, "v1", pick.choice(["public", "hr", "finance"]))
        index.publish_version(source, chunks, _vectors(rng, 3), 3)
    _agree(reader, rng)
    for step in range(30):
        n = pick.randrange(10)
        action = pick.choice(["new-version", "same-version", "retire", "relabel"])
        if action in ("new-version", "same-version"):
            version = f"v{step}" if action == "new-version" else "v1"
            source, chunks = _source(n, version, pick.choice(["public", "hr"]))
            index.publish_version(source, chunks, _vectors(rng, 3), 3)
        elif action == "retire":
            index.retire_source(f"s{n}.txt")
        else:
            current = index.indexed_versions().get(f"s{n}.txt")
            if current:
                source, _ = _source(n, next(iter(current)), pick.choice(["public", "hr", "finance"]))
                index.relabel_source(source)
        _agree(reader, rng)
        _agree(index, rng)
    # A reindex swaps the vector table: the cache follows it (and the new dimension).
    index.reindex_vectors("other", 5, lambda texts: _vectors(rng, len(texts), 5))
    _agree(reader, rng, dims=5)
    index.close()
    reader.close()


def test_no_scopes_and_unknown_scopes_see_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    with SqliteIndex(tmp_path / "k.db") as index:
        source, chunks = _source(1, "v1", "public")
        index.publish_version(source, chunks, _vectors(rng, 3), 3)
        query = rng.standard_normal(DIMS).astype(np.float32)
        assert index.searcher.vector(query, [], 10) == []
        assert index.searcher.vector(query, ["nobody"], 10) == []
        assert len(index.searcher.vector(query, ["public"], 10)) == 3


def test_a_current_chunk_without_a_vector_is_left_out_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(7)
    with SqliteIndex(tmp_path / "k.db") as index:
        source, chunks = _source(1, "v" * 64, "public")
        index.publish_version(source, chunks, _vectors(rng, 3), 3)
        index.conn.execute(f"DELETE FROM {index.vector_table()} WHERE rowid = (SELECT min(rowid) FROM chunks)")
        with caplog.at_level("WARNING", logger="korpus.vectors"):
            ranked = index.searcher.vector(_vectors(rng, 1)[0], ["public"], 10)
    assert len(ranked) == 2
    assert "1 current chunks have no vector" in caplog.text


def test_silent_fallbacks_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import pymupdf

    import tasks.text.structure
    from tasks.retrieval.embedding import token_counter

    with caplog.at_level("WARNING"):
        count = token_counter(str(tmp_path / "no-tokenizer"))
        doc = pymupdf.open()
        page = doc.new_page()
        page.find_tables = lambda: (_ for _ in ()).throw(RuntimeError("broken drawing"))  # type: ignore[method-assign]
        assert tasks.text.structure._find_tables(page) == []
    assert count("абвгдежз") == 2 and "no tokenizer.json" in caplog.text
    assert "table detection failed (RuntimeError: broken drawing)" in caplog.text

"""BM25 over in-memory postings (tasks/index/bm25_memory.py) against FTS5's own bm25(), on a real SQLite index:
the same rows in the same order with the same scores, the filters applied, and a write seen by the next query."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import tasks.index.sqlite_search as search
from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import page_chunks
from tasks.index.sqlite import SqliteIndex

pytestmark = pytest.mark.unit
WORDS = (
    "договор поставка насос кровля ремонт склад приказ премия отпуск сотрудник акт проверка огнетушитель "
    "протокол заседание бюджет смета подрядчик заказчик оплата счёт накладная"
).split()


def _publish(index: SqliteIndex, source_id: str, version: str, text: str, access: str) -> None:
    source = Source(
        source_id=source_id,
        version=version,
        path="/x",
        kind=SourceKind.text,
        owner="o",
        access=access,
        tenant="default",
    )
    page = PageResult(source_id=source_id, source_version=version, page=1, text=text, method="plain-text")
    chunks, _ = page_chunks(source, [page])
    index.publish_version(source, chunks, np.ones((len(chunks), 4), dtype=np.float32), 1, embed_model="m")


def _text(rng: random.Random) -> str:
    # Zipf-like: the first words are in most chunks, the last in few; lengths differ, so the length norm matters
    return " ".join(rng.choice(WORDS[: rng.randint(2, len(WORDS))]) for _ in range(rng.randint(5, 60))) + "."


def _both(index: SqliteIndex, query: str, scopes: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    monkeypatch.setattr(search, "MEMORY_BM25_MIN_MATCHES", -1)  # every query through the postings
    memory = index.searcher.lexical(query, scopes, 50, True, {})
    monkeypatch.setattr(search, "MEMORY_BM25_MIN_MATCHES", 10**12)  # every query through FTS5's bm25()
    fts5 = index.searcher.lexical(query, scopes, 50, True, {})
    return memory, fts5


@pytest.fixture
def index(tmp_path: Path) -> SqliteIndex:
    rng = random.Random(7)
    index = SqliteIndex(tmp_path / "korpus.db")
    for n in range(300):
        _publish(index, f"{n}.txt", "v1", _text(rng), "hr" if n % 5 == 0 else "public")
    for n in range(0, 300, 10):  # a tenth published again: their first versions are superseded, still in FTS5
        _publish(index, f"{n}.txt", "v2", _text(rng), "hr" if n % 5 == 0 else "public")
    return index


def test_the_ranking_equals_fts5s_bm25(index: SqliteIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    for _ in range(60):
        query = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
        for scopes in (["public"], ["public", "hr"], ["hr"]):
            memory, fts5 = _both(index, query, scopes, monkeypatch)
            assert len(memory) == len(fts5) > 0
            assert [s for _, s in memory] == pytest.approx([s for _, s in fts5], rel=1e-9)
            # rows tied on score may come in either order from FTS5; untied rows must be the same
            assert {r: round(s, 9) for r, s in memory} == {r: round(s, 9) for r, s in fts5}


def test_filters_hold_and_a_write_is_seen_by_the_next_query(index: SqliteIndex, monkeypatch) -> None:
    monkeypatch.setattr(search, "MEMORY_BM25_MIN_MATCHES", -1)
    visible = dict(index.conn.execute("SELECT rowid, visible FROM chunk_visibility"))
    hits = index.searcher.lexical("договор поставка", ["public"], 50, True, {})
    assert hits and all(visible[r] == "public" for r, _ in hits)  # current and in scope only
    assert index.searcher.lexical("договор поставка", [], 50, True, {}) == []
    assert index.searcher.lexical("договор поставка", ["nobody"], 50, True, {}) == []
    _publish(index, "новый.txt", "v1", "Уникальнейшее слово: квазиконтракт.", "public")
    found = index.searcher.lexical("квазиконтракт", ["public"], 5, True, {})
    assert [index.searcher.hits(found, ["public"])[0][1]["source_id"]] == ["новый.txt"]
    index.retire_source("новый.txt")
    assert index.searcher.lexical("квазиконтракт", ["public"], 5, True, {}) == []


def test_a_read_only_index_is_served_too(index: SqliteIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    index.conn.execute("PRAGMA query_only = 1")  # a reader that may not write anything, the temp schema included
    memory, fts5 = _both(index, "договор поставка насос", ["public"], monkeypatch)
    assert memory and {r for r, _ in memory} == {r for r, _ in fts5}

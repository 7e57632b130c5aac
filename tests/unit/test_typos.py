"""Typo-tolerant lexical matching (tasks/text/typos.py) and its use by the index's BM25 side."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from korpus.core.datamodel import Chunk, Locator, Source, SourceKind
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve
from tasks.text.analysis import analyse
from tasks.text.typos import expand, near_terms

pytestmark = pytest.mark.unit
VOCAB = [("протокол", 40), ("проток", 3), ("протон", 1), ("прокол", 2), ("огнетушител", 5), ("инн", 9)]


def _starting_with(letter: str) -> list[tuple[str, int]]:
    return [(t, df) for t, df in VOCAB if t.startswith(letter)]


def _frequency(term: str) -> int:
    return dict(VOCAB).get(term, 0)


def test_an_unknown_term_gets_the_indexed_terms_a_typo_away() -> None:
    assert near_terms("протакол", _starting_with("п")) == ["протокол"]  # one letter changed
    assert near_terms("протокл", _starting_with("п")) == ["протокол", "проток"]  # one dropped; frequent first
    assert near_terms("пртоокол", _starting_with("п")) == ["протокол"]  # two neighbours swapped
    assert near_terms("протоколировани", [("протоколирован", 4), ("протоколировн", 1)]) == ["протоколирован"]
    assert near_terms("огнетушитл", _starting_with("о")) == ["огнетушител"]


def test_known_short_and_numeric_terms_are_left_alone() -> None:
    assert expand(["протокол", "прот", "инн7707", "7707083893"], _frequency, lambda term: _starting_with(term[0])) == {}
    assert expand(["протакол"], _frequency, lambda term: _starting_with(term[0])) == {"протакол": ["протокол"]}
    assert expand(["ракета"], _frequency, lambda term: _starting_with(term[0])) == {}  # nothing near it: nothing added


def test_variants_are_bounded_and_most_frequent_first() -> None:
    assert near_terms(
        "проток", [("протока", 1), ("проток", 9), ("протол", 7), ("протоки", 3), ("пролок", 5), ("просток", 2)]
    ) == ["протол", "пролок", "протоки"]


def test_bm25_finds_a_document_through_a_mistyped_word(tmp_path: Path) -> None:
    source = Source(
        source_id="акт.txt", version="v1", path="/dev/null", kind=SourceKind.text, owner="o", access="public"
    )
    body = "Огнетушители с истёкшим сроком поверки заменены на складе номер три."
    chunk = Chunk(
        chunk_id="c1",
        source_id="акт.txt",
        source_version="v1",
        locator=Locator(page=1, end=len(body)),
        text=f"[акт.txt · лист 1] {body}",
        body=body,
        owner="o",
        access_rule="public",
        policy_version="structure-v2",
    )
    with SqliteIndex(tmp_path / "korpus.db") as index:
        index.publish_version(source, [chunk], np.ones((1, 4), dtype=np.float32), [], embed_model="m")
        assert index.searcher.typo_variants(analyse("огнетушитлей")) == {"огнетушитл": ["огнетушител"]}
        hits = retrieve(index.searcher, "огнетушитлей на складе", None, ["public"], k=3, mode="bm25")
        assert [h["chunk_id"] for h in hits] == ["c1"]
        assert (
            index.searcher.coverage(
                "огнетушитлей поверки", hits and index.searcher.lexical("склад", ["public"], 1)[0][0]
            )
            == 1.0
        )
        assert retrieve(index.searcher, "огнетушитлей", None, ["hr"], k=3, mode="bm25") == []  # scopes still hold

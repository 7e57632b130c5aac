"""The Russian analysis pinned on 300 sentences (tests/fixtures/analyzer/: how they were made, how to check them
against a real OpenSearch `_analyze`), plus the UAX#29 cases the fixture exists for, spelled out."""

import json
from pathlib import Path

import pytest

from tasks.text.analysis import analyse, words

pytestmark = pytest.mark.unit
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "analyzer"
GOLDEN = [json.loads(line) for line in (FIXTURE / "golden.jsonl").read_text(encoding="utf-8").splitlines()]


def test_fixture_covers_the_sentences_file() -> None:
    sentences = [s for s in (FIXTURE / "sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    assert [g["text"] for g in GOLDEN] == sentences and len(sentences) == 300


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: c["text"][:40])
def test_analysis_matches_golden(case: dict) -> None:
    assert analyse(case["text"]) == case["tokens"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.03.2023", ["12.03.2023"]),  # MidNumLet between digits (WB11/12)
        ("1 250 000,50", ["1", "250", "000,50"]),  # MidNum between digits; spaces break
        ("10:30", ["10", "30"]),  # ':' is MidLetter: joins letters only
        ("т.е.", ["т.е"]),  # MidNumLet between letters (WB6/7); the trailing dot breaks
        ("a.1", ["a", "1"]),  # a letter and a digit are not joined across '.'
        ("северо-западный", ["северо", "западный"]),  # hyphens break
        ("45-17/2023", ["45", "17", "2023"]),
        ("АИР180 foo_bar", ["аир180", "foo_bar"]),  # letters+digits and ExtendNumLet join
        ("Д'Артаньян", ["д'артаньян"]),
        ("Ёлка", ["ёлка"]),  # lowercase keeps ё (the stemmer folds it)
    ],
)
def test_uax29_word_boundaries(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_stop_words_go_and_stems_fold_inflections() -> None:
    assert analyse("и в договоре, и в договорами") == analyse("договор договора")
    assert analyse("Ёлка") == analyse("елка")

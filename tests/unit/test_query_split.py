"""A message holding several questions: split into its questions, each searched, the hits interleaved."""

from __future__ import annotations

import pytest

from tasks.retrieval.query import interleave, search_message, split_questions

pytestmark = pytest.mark.unit


def test_two_questions_are_split_and_fragments_are_not() -> None:
    assert split_questions("Где акт проверки склада? Кто подписал договор поставки насосов?") == [
        "Где акт проверки склада?",
        "Кто подписал договор поставки насосов?",
    ]
    assert split_questions("Что такое ИНН? 7707083893") == ["Что такое ИНН? 7707083893"]  # a fragment: kept whole
    assert split_questions("Договор № 45-17/2023 от какого числа?") == ["Договор № 45-17/2023 от какого числа?"]
    five = " ".join(f"Вопрос номер {n} про склад?" for n in range(5))
    assert len(split_questions(five)) == 4 and split_questions(five)[-1].count("?") == 2


def test_interleave_gives_each_question_its_best_hit_first_and_keeps_a_chunk_once() -> None:
    first = [{"chunk_id": "a"}, {"chunk_id": "b"}, {"chunk_id": "c"}]
    second = [{"chunk_id": "x"}, {"chunk_id": "a"}]
    merged = interleave([first, second], k=10)
    assert [h["chunk_id"] for h in merged] == ["a", "x", "b", "c"]
    assert [h["question"] for h in merged] == [0, 1, 0, 0]
    assert len(interleave([first, second], k=2)) == 2


def test_search_message_cleans_splits_embeds_once_and_searches_each_question() -> None:
    asked: list[tuple[str, object]] = []
    embedded: list[list[str]] = []

    def search(part: str, vector: object) -> list[dict]:
        asked.append((part, vector))
        return [{"chunk_id": part[:3]}]

    def embed(parts: list[str]) -> list[str]:
        embedded.append(parts)
        return [f"v:{p[:3]}" for p in parts]

    hits = search_message("Здравствуйте! Где акт проверки склада? Кто подписал договор поставки?", search, embed, 5)
    assert embedded == [["Где акт проверки склада?", "Кто подписал договор поставки?"]]
    assert asked == [("Где акт проверки склада?", "v:Где"), ("Кто подписал договор поставки?", "v:Кто")]
    assert [h["chunk_id"] for h in hits] == ["Где", "Кто"]
    assert search_message("акт проверки", search, None, 5) == [{"chunk_id": "акт"}]  # one question: as it is

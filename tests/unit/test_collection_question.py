"""Which questions are about the collection as a whole (tasks/retrieval/collection.py): every collection question of
the archive-style set and a held-out set written apart from it are; no other question of any set korpus has is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpora import archive_eval
from tasks.retrieval.collection import is_collection_question

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]

# Written after the rules, not used to make them: other words for the same asks, as a user types them.
HELD_OUT_COLLECTION = [
    "Какие люди упоминаются в архиве?",
    "Дай список всех документов",
    "Сколько писем хранится в базе?",
    "Сколько человек упомянуто в документах?",
    "Покажи реестр организаций",
    "Что есть в коллекции?",
    "Какие компании фигурируют в договорах?",
    "Назови все организации из документов",
    "События 2019 года по порядку",
    "Какие файлы лежат в папке приказы?",
    "Кого упоминают в протоколах?",
    "Сколько страниц во всех документах?",
    "оглавление архива",
    "Какие события происходили в 2001 году?",
    "Перечень контрагентов с ИНН",
    "хронология по годам",
    "кто фигурирует в приказах",
    "сколько всего файлов",
    "список организаций и их ИНН",
]
# Questions about the world or one document that share words with the rules.
HELD_OUT_ORDINARY = [
    "Сколько стоит электродвигатель АИР 180?",
    "Сколько людей погибло в сражении?",
    "Кто подписал договор поставки?",
    "Какие документы нужны для оформления пропуска",
    "Перечислите некоторые из крупных фармацевтических компаний",
    "какая пеня за просрочку",
    "когда починят крышу",
    "Какую премию получила Смирнова?",
]


def test_collection_questions_are_recognised() -> None:
    asked = [q for q, _ in archive_eval.COLLECTION] + HELD_OUT_COLLECTION
    assert [q for q in asked if not is_collection_question(q)] == []


def test_no_ordinary_question_of_any_set_is_taken_for_one(tmp_path: Path) -> None:
    archive = tmp_path / "archive.jsonl"
    archive_eval.write_questions(archive)
    ordinary = [
        q["question"]
        for q in map(json.loads, archive.read_text(encoding="utf-8").splitlines())
        if q["type"] != "collection"
    ]
    ordinary += [
        json.loads(line)["question"] for line in (ROOT / "eval" / "sample-archive.jsonl").open(encoding="utf-8")
    ]
    xquad = (ROOT / "eval" / "xquad-ru" / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines()
    ordinary += [json.loads(line)["text"] for line in xquad]
    assert len(ordinary) > 700
    assert [q for q in ordinary + HELD_OUT_ORDINARY if is_collection_question(q)] == []

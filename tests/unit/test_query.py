"""Query clean-up for real questions (tasks/retrieval/query.py)."""

from __future__ import annotations

import pytest

from tasks.retrieval.query import clean_query

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Здравствуйте! Подскажите, пожалуйста, как оформить отпуск? Заранее спасибо!", "как оформить отпуск?"),
        ("Добрый день, коллеги.\nГде приказ № 17-к?\nС уважением, Иван Петров", "Где приказ № 17-к?"),
        ("ре\u200bмонт кро\u200dвли\ufeff склада", "ремонт кровли склада"),
        ("см. https://example.ru/a?b=1 и www.site.ru — договор поставки", "см. и — договор поставки"),
        ("пишите на ivanov@mail.ru: ИНН 7707083893 чей?", "пишите на : ИНН 7707083893 чей?"),
        ("> старое письмо\n> ещё цитата\nЧто с ремонтом кровли?", "Что с ремонтом кровли?"),
        ("Договор № 45-17/2023 от 12.03.2023", "Договор № 45-17/2023 от 12.03.2023"),  # identifiers untouched
        ("Здравствуйте!", "Здравствуйте!"),  # nothing but a greeting: kept, never an empty query
        ("спасибоотдел кадров", "спасибоотдел кадров"),  # only whole words are politeness
    ],
)
def test_clean_query(raw: str, clean: str) -> None:
    assert clean_query(raw) == clean

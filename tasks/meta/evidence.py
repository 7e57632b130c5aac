"""What makes a word a person's name and not a capitalised word (issue «Registers a person can trust»).

A real estimate's persons register was led by table words («Имат», «Оповещатель», «Кроссировка», «Адрес Ф. И.»):
words capitalised in table cells taken for surnames. A word is a surname only with linguistic evidence:
- the first name of a patronymic is the word right before it («Татура Остапа Васильевича»: «Остапа», though
  «Татура» reads as the genitive of the first name «Татур» too);
- «Ф. И. О.» is the heading «фамилия, имя, отчество», never a person's initials;
- in a table row, where every cell is capitalised, a word is a surname only when the dictionary knows it as one,
  with a first name the dictionary knows (one pymorphy only guesses, «Имат», is none), or with two initials when the
  dictionary does not know it at all: «Иванов И.», «Чамара Д. П.» and «Петров | Пётр | Петрович» are persons;
  «Адрес Ф. И.», «Монитор А.» (a common noun beside an initial of the next cell), «Апт А.» and a lone «Имат» are not.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.meta.models import known, parse

_FIO = re.compile(r"Ф\.\s*И\.\s*О\.?|(?<![А-ЯЁа-яё])ФИО(?![А-ЯЁа-яё])")
_WORD = re.compile(r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁа-яё][а-яё]+)?")
_LOWER = re.compile(r"(?<![А-ЯЁа-яёA-Za-z])[а-яё]{3,}")
_INITIAL = re.compile(r"(?<![А-ЯЁа-яё])[А-ЯЁ]\.")


def first_and_middle(words: list[str], roles: dict[str, str | None], parses: dict[str, list[Any]]) -> tuple:
    """(first name, patronymic) among a span's words, either None."""
    middle = next((w for w in words if roles[w] == "Patr"), None)
    if middle is not None and (at := words.index(middle)) > 0:
        before = words[at - 1]
        if known(before) and any("Name" in p.tag for p in parses[before]):
            return before, middle
    first = next((w for w in words if roles[w] == "Name" and w != middle), None)
    return first, middle


def fio_heading(text: str, start: int, end: int) -> bool:
    """Some initials of [start, end) belong to a «Ф. И. О.» («Адрес Ф. И. О.», «Ф. И. О. Апт»: a table's heading)."""
    at = max(0, start - 6)
    return any(at + m.start() < end and start < at + m.end() for m in _FIO.finditer(text[at : end + 6]))


def table_rows(page_text: str) -> list[str]:
    """The page's table rows, once per page (`table_row_of` reads them for each person mention)."""
    return [line for line in page_text.splitlines() if "|" in line]


def table_row_of(rows: list[str], mention: str) -> bool:
    """The mention's words all stand in one table row of the page as served (cells joined by « | »), in cells of
    table words: a cell that holds running prose (three lower-case words or more: a calendar's «145 лет со дня
    рождения …») is read as prose."""
    words = mention.split()
    for line in rows:
        if not all(w in line for w in words):
            continue
        cells = [cell for cell in line.split("|") if any(w in cell for w in words)]
        if all(len(_LOWER.findall(cell)) < 3 for cell in cells):
            return True
    return False


def surname_in_table(mention: str, first: str | None) -> bool:
    """A person mention found in a table row has the evidence a table needs (the module's docstring)."""
    if first and known(first) and any("Name" in p.tag for p in parse(first)):
        return True
    surnames = [w for w in _WORD.findall(_INITIAL.sub(" ", mention))]
    if not surnames:
        return False
    word = surnames[0]
    if any("Surn" in p.tag for p in parse(word)) and known(word):
        return True
    return not known(word) and len(_INITIAL.findall(mention)) >= 2

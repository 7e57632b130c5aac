"""Persons as encyclopedias and translated texts name them (docs/meta.md «Persons»): a ruler by name and number
(«Людовика XIV» → «Людовик XIV»), a first name, one initial and a surname («Николаса Э. Головина» → «Головин
Николас Э.») and a foreign surname the dictionary reads as a first name («Готфрид Земпер», «Чарльза Уэсли»).
tasks/meta/names.py asks these before its own reading of a span; each returns a `PersonName`'s fields.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.meta.models import parse
from tasks.meta.surnames import as_written, nominative_form

_WORD = r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁ][а-яё]+)?"
_REGNAL = re.compile(rf"^({_WORD})\s+([IVXL]{{1,6}})$")
_FIRST_INITIAL_LAST = re.compile(rf"^({_WORD})\s+([А-ЯЁ])\.\s*({_WORD})$")
_TWO_WORDS = re.compile(rf"^({_WORD})\s+({_WORD})$")
Fields = tuple[str, str | None, str | None, str | None, str | None, str | None, str, bool]


def _nominative(reading: Any, word: str, gender: str | None) -> str:
    return as_written(word, nominative_form(reading, gender))


def _name_reading(word: str) -> Any | None:
    return next((p for p in parse(word) if "Name" in p.tag), None)


def regnal(span: str) -> Fields | None:
    """«Людовика XIV», «Генрих IV», «Ричард II»: a first name and a Roman number name one person, shown so."""
    match = _REGNAL.match(span.strip())
    reading = _name_reading(match.group(1)) if match else None
    if reading is None:
        return None
    shown = f"{_nominative(reading, match.group(1), None)} {match.group(2)}"
    return shown.lower().replace("ё", "е"), None, None, None, None, reading.tag.gender, shown, False


def first_initial_last(span: str) -> Fields | None:
    """«Николаса Э. Головина», «Раджендры К. Пачаури», «Джон Р. Смит»: a first name, one initial and a surname, the
    surname read in the first name's case («Головина» beside «Николаса» is a man's genitive: «Головин»)."""
    match = _FIRST_INITIAL_LAST.match(span.strip())
    if match is None:
        return None
    first, initial, last = match.groups()
    reading = _name_reading(first)
    if reading is None or any("Patr" in p.tag for p in parse(last)[:1]):
        return None
    gender, case = reading.tag.gender, reading.tag.case
    agreeing = [p for p in parse(last) if "Surn" in p.tag and p.tag.case == case and p.tag.gender in (gender, None)]
    surname = _nominative(agreeing[0], last, gender) if agreeing and case != "nomn" else last
    first_shown = _nominative(reading, first, gender)
    shown = f"{surname} {first_shown} {initial}."
    return surname.lower().replace("ё", "е"), first_shown, None, first_shown[0], initial, gender, shown, False


def first_then_name(span: str) -> Fields | None:
    """«Готфрид Земпер», «Чарльза Уэсли»: two words the dictionary both reads as first names, the second no patronymic
    and no surname it knows — a foreign name in the Western order, so the second is the surname, as written."""
    match = _TWO_WORDS.match(span.strip())
    if match is None:
        return None
    first, last = match.groups()
    reading, lasts = _name_reading(first), parse(last)
    if reading is None or "Name" not in parse(first)[0].tag or "Name" not in lasts[0].tag:
        return None
    if any({"Patr", "Surn", "Geox"} & set(p.tag.grammemes) for p in lasts):
        return None  # «Иван Петрович», «Анна Смирнова» (the reading of a span as Russian names does these)
    gender = reading.tag.gender
    first_shown = _nominative(reading, first, gender)
    return (
        last.lower().replace("ё", "е"),
        first_shown,
        None,
        first_shown[0],
        None,
        gender,
        f"{last} {first_shown}",
        False,
    )

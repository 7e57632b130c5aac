"""Persons as encyclopedias and translated texts name them (docs/meta.md «Persons»): a ruler by name and number
(«Людовика XIV» → «Людовик XIV»), a first name, one initial and a surname («Николаса Э. Головина» → «Головин
Николас Э.»), a foreign name in the Western order («Готфрид Земпер», «Джеймсу Дьюару» → «Дьюар Джеймс») and an
Arabic name («Ибн Сина», «Ар-Рази»).
tasks/meta/names.py asks these before its own reading of a span; each returns a `PersonName`'s fields.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.meta.models import _models, parse
from tasks.meta.surnames import as_written, nominative_form

_WORD = r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁ][а-яё]+)?"
_REGNAL = re.compile(rf"^({_WORD})\s+([IVXL]{{1,6}})$")
_FIRST_INITIAL_LAST = re.compile(rf"^({_WORD})\s+([А-ЯЁ])\.\s*({_WORD})$")
_WESTERN = re.compile(rf"^({_WORD})\s+(?:({_WORD})\s+)?({_WORD})$")
_OBLIQUE_ENDINGS = {"gent": ("а",), "accs": ("а",), "datv": ("у", "ю"), "ablt": ("ом", "ем"), "loct": ("е",)}
_CASE_BY_ENDING = (("ом", "ablt"), ("ем", "ablt"), ("у", "datv"), ("ю", "datv"))
_CONSONANTS = set("бвгджзклмнпрстфхцчшщ")
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
    surname = (
        _nominative(agreeing[0], last, gender)
        if agreeing and case != "nomn"
        else (_foreign_nominative(last, case, gender))
    )  # «Уильяма Э. Саймона» → «Саймон»
    first_shown = _nominative(reading, first, gender)
    shown = f"{surname} {first_shown} {initial}."
    return surname.lower().replace("ё", "е"), first_shown, None, first_shown[0], initial, gender, shown, False


def _foreign_nominative(word: str, case: str | None, gender: str | None) -> str:
    """A foreign man's surname beside a first name in an oblique case declines as a consonant-stem noun: «Джеймсу
    Дьюару» → «Дьюар», «Ференца Деака» → «Деак», «Уолтером Нетшем» → «Нетш». A woman's foreign surname and a soft
    stem («-я», «-ю»: «Гоголя» or «Мария»?) are left as written."""
    if gender != "masc" or case not in _OBLIQUE_ENDINGS:
        return word
    for ending in _OBLIQUE_ENDINGS[case]:
        stem = word[: -len(ending)]
        if word.endswith(ending) and len(stem) >= 3 and stem[-1].lower() in _CONSONANTS:
            soft = ending == "ю" or (ending == "ем" and stem[-1].lower() not in "жшщчц")
            return stem + ("ь" if soft else "")  # «Шёделем» → «Шёдель», «Фарелю» → «Фарель»
    return word


def first_then_name(span: str) -> Fields | None:
    """A foreign name in the Western order — a first name, perhaps a middle name, then the surname: «Готфрид Земпер»,
    «Чарльза Уэсли», «Джеймсу Дьюару», «Эдвард Даррелл Стоун». The first word is one the dictionary reads first as a
    first name (or, before a lone surname, a word it does not know at all: `_unknown_first_name`); no word is a
    patronymic or a place, and the last is no surname the dictionary knows (Russian names, «Анна Смирнова», «Сергей
    Николаевич Лапин», are read by names.py). The surname is put in the nominative by its ending in the first name's
    case («Чарльзом Ричардом» → «Ричард Чарльз»)."""
    match = _WESTERN.match(span.strip())
    if match is None:
        return None
    first, middle, last = match.group(1), match.group(2), match.group(3)
    reading = _name_reading(first)
    if reading is None and middle is None:
        return _unknown_first_name(first, last)
    if reading is None or "Name" not in parse(first)[0].tag:
        return None
    for word in filter(None, (middle, last)):
        if any({"Patr", "Geox"} & set(p.tag.grammemes) for p in parse(word)):
            return None
    gender, case = reading.tag.gender, reading.tag.case
    if any("Surn" in p.tag or ("ADJF" in p.tag and p.tag.case == case) for p in parse(last)):
        return None  # «Иоанны Хмелевской»: an adjective's surname, in the name's case, is read by names.py
    if middle and "Name" not in parse(middle)[0].tag:
        return None
    if case != "nomn" and re.search(r"(?:у|ю|ой|ей)$", last) and _foreign_nominative(last, case, gender) == last:
        return None  # «Александра Паляницу»: a surname in «-а» in the accusative, which names.py reads
    surname = _foreign_nominative(last, case, gender)
    middle_shown = _foreign_nominative(middle, case, gender) if middle else None
    first_shown = _nominative(reading, first, gender)
    shown = " ".join(filter(None, (surname, first_shown, middle_shown)))
    middle_initial = middle_shown[0] if middle_shown else None
    return surname.lower().replace("ё", "е"), first_shown, None, first_shown[0], middle_initial, gender, shown, False


def _unknown_first_name(first: str, last: str) -> Fields | None:
    """«Пейтон Мэннинг», «Гульельмо Маркони»: a first name the dictionary does not know at all (and no Chinese
    surname of two or three letters) before a word it knows as no surname, patronymic or place — foreign, in the
    Western order. The case is read off the first name's ending (a man's «-ом/-ем» instrumental, «-у/-ю» dative;
    anything else as written), and both words are put in the nominative by it."""
    firsts, lasts = parse(first), parse(last)
    if any({"Name", "Surn", "Patr"} & set(p.tag.grammemes) for p in firsts) or "Geox" in firsts[0].tag:
        return None
    if any({"Surn", "Patr", "Geox"} & set(p.tag.grammemes) for p in lasts) or len(first) <= 3:
        return None  # «Лю Бинчжун», «Си Цзиньпин»: a Chinese surname comes first
    if _models()[2].word_is_known(first.lower()):
        return None  # «Эдикт Фонтенбло», «Династия Чан», «Партизана Железняка»: a common word, no first name
    if first[-1] in "аяы":
        return None  # «Джареда Аллена»: a genitive or a woman's name, which names.py reads
    case = next((c for ending, c in _CASE_BY_ENDING if first.endswith(ending)), "nomn")
    first_shown, surname = _foreign_nominative(first, case, "masc"), _foreign_nominative(last, case, "masc")
    return (
        surname.lower().replace("ё", "е"),
        first_shown,
        None,
        first_shown[0],
        None,
        None,
        f"{surname} {first_shown}",
        False,
    )


_ARABIC = re.compile(r"(?:^|\s)(?:(?:[Аа]ль|[Аа][рзсдтншл]|[Ээ]ль)-[А-ЯЁ]|(?:[Ии]бн|бин)\s+(?:аль-)?[А-ЯЁа-яё])")


def arabic_name(span: str) -> Fields | None:
    """«Абу Бакр Мухаммад ибн Закария Ар-Рази (Разес», «Ибн Сина», «Аль-Бируни», «Шапур ибн Саль»: an Arabic name —
    an article joined to a name («Ар-Рази», «аль-Вафида») or «ибн»/«бин» (son of) between names — is one person,
    shown as written (a bracketed other name cut off), its first letter capitalised."""
    shown = span.split("(")[0].strip()
    if not _ARABIC.search(shown) or not re.fullmatch(r"[А-ЯЁа-яё’' -]+", shown):
        return None
    shown = shown[0].upper() + shown[1:]
    return shown.lower().replace("ё", "е"), None, None, None, None, "masc", shown, False

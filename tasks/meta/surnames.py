"""Surnames the dictionary does not know, named alone: «Онопко», «Литманен», «Бергкампу».

pymorphy knows Russian surnames; a foreign one named by itself in running text («Онопко получает мяч», «Литманен имел
трёх защитников») is a word it does not know at all. When the NER tagger marks such a lone word as a person, it is a
surname: shown as the document writes it, and keyed by its stem without a case ending, so «Бабангиду» and «Бабангида»
are one person, shown in the form that is not plainly oblique («Бабангида»). A word the dictionary knows («Пёрлы»,
«Кульков» read as «кульков») or a repeated interjection («Ай-яй-яй») is not taken.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.meta.models import _models, known

# endings only an oblique case has after a consonant stem: dative/accusative «-у/-ю», instrumental «-ом/-ем/-ым/-ой»
_OBLIQUE = re.compile(r"(?<=[бвгджзклмнпрстфхцчшщ])(?:у|ю|ом|ем|ым|им|ой)$")
_CASE_ENDING = re.compile(r"(?<=[бвгджзклмнпрстфхцчшщ])(?:а|я|у|ю|ом|ем|ым|им|ой|е|ы|и)$")
_LONE = re.compile(r"[А-ЯЁ][а-яё]{3,}")
_PLACE_ADJECTIVE = re.compile(r"(?:ская|ское|ские|ских|ской|ского)$")
_LETTERS = "абвгдежзийклмнопрстуфхцчшщъыьэюя"


def unknown_surname(word: str, may_be_cut: bool = True) -> bool:
    """A capitalised word of four letters or more that the dictionary does not know, in either spelling of ё.
    `may_be_cut`: the word stands where a word is cut short (a line's end, a cell's edge); elsewhere beginning a longer
    dictionary word says nothing («Лютера» is no cut «лютеранин»)."""
    if not _LONE.fullmatch(word):
        return False
    morph = _models()[2]
    lowered = word.lower()
    if known(word):
        return False
    if _PLACE_ADJECTIVE.search(lowered):  # «Федоровская ЦРБ»: a place's adjective before a body's name
        return False
    # a word cut short («Распоряже», «Подтв» at a line end or a cell's edge) begins a longer dictionary word
    if may_be_cut and any(len(longer) > len(lowered) + 1 for longer in morph.dictionary.words.keys(lowered)[:20]):
        return False
    # a long word one letter off a dictionary word is misread («Вознаграждениом»), not a name
    return len(lowered) < 9 or not any(
        morph.word_is_known(lowered[:i] + letter + lowered[i + 1 :]) for i in range(len(lowered)) for letter in _LETTERS
    )


def written_in_lower_case(word: str, text: str) -> bool:
    """«Альпаку» at a sentence's start, while the text writes «альпака» elsewhere: a common word, not a name."""
    stem = surname_key(word)
    return re.search(rf"(?<![А-ЯЁа-яё]){re.escape(stem)}", text.replace("ё", "е")) is not None


def surname_key(word: str) -> str:
    """«Бабангиду», «Бабангида» → «бабангид»: the lower-case stem without a case ending."""
    lowered = word.lower().replace("ё", "е")
    return _CASE_ENDING.sub("", lowered) if len(lowered) > 4 else lowered


def plainly_oblique(shown: str) -> bool:
    """«Бергкампу», «Уильямом»: a form that cannot be a nominative of a surname."""
    last = shown.split()[0].lower() if shown.split() else ""
    return bool(_OBLIQUE.search(last))


def as_written(word: str, form: str) -> str:
    """The document's own spelling kept: «Федорова» is never shown as «Фёдорова»; a form no longer than the word
    when pymorphy's guess invents one («Монтегю» → «Монтегющий»)."""
    if "ё" not in word.lower():
        form = form.replace("ё", "е").replace("Ё", "Е")
    return form if len(form) <= len(word) + 1 else word


def nominative_form(reading: Any, gender: str | None) -> str:
    """A pymorphy reading put in the singular nominative (and `gender`, where the reading has one), capitalised; the
    word itself when pymorphy cannot inflect it."""
    wanted = {"nomn", "sing"} | ({gender} if gender and reading.tag.gender else set())
    form = reading.inflect(wanted) or reading.inflect({"nomn"})
    return (form.word if form else reading.word).capitalize()

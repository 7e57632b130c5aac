"""Names as scans and tables write them (docs/meta.md «Persons», «Organisations»): OCR's Latin look-alikes in legal
forms and initials («OOO «Тройка»», «A.C. Глебова»), a full name spread over a table row's cells («Петров | Пётр |
Петрович») and a street named after someone («ул. Коптева»). tasks/meta/names.py reads the page through these.
"""

from __future__ import annotations

import re
import unicodedata

from tasks.meta.models import parse

_LOOKALIKE = str.maketrans("ABCEHKMOPTX0", "АВСЕНКМОРТХО")
# «OOO "Про-ток"», «000 «Алней»», «MOO «Общество …»», «AO "…"»: a legal form OCR read in Latin letters or zeros (every
# letter one that looks Cyrillic, at least one not), before a quote
_LATIN_FORM = re.compile(r"(?<![A-Za-zА-ЯЁа-яё\d])(?=[А-ЯЁ]*[A-Z0])[ABCEHKMOPTX0АВСЕНКМОРТХ]{2,5}(?=[ \t]*[«\"„“])")
# «A.C. Глебова», «B.C.Петров»: initials OCR read in Latin capitals, before a surname in Cyrillic
_LATIN_INITIALS = re.compile(
    r"(?<![A-Za-zА-ЯЁа-яё.])[ABCEHKMOPTX]\.[ \t]?(?:[ABCEHKMOPTX]\.[ \t]?)?(?=[А-ЯЁ][а-яё]{2,})"
)


def composed(text: str) -> str:
    """«окружающеи\u0306» → «окружающей»: a letter and its combining mark as one (NFC), as the dictionary spells it."""
    return unicodedata.normalize("NFC", text)


def cyrillic_lookalikes(text: str) -> str:
    """The text with OCR's Latin look-alikes in legal forms and initials read as the Cyrillic letters they are. Every
    replacement keeps the length, so places found in the result are places in `text`."""
    text = _LATIN_FORM.sub(lambda m: m.group(0).translate(_LOOKALIKE), text)
    return _LATIN_INITIALS.sub(lambda m: m.group(0).translate(_LOOKALIKE), text)


_CAP = r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁ][а-яё]+)?"
_PATRONYMIC = r"[А-ЯЁ][а-яё]+(?:вич|вн|ичн|ьич)[а-яё]{0,3}"
_SURNAME_NAME_PATRONYMIC = re.compile(rf"(?<![А-ЯЁа-яё])({_CAP})[ \t]+({_CAP})[ \t]+({_PATRONYMIC})(?![А-ЯЁа-яё])")
_NPS = rf"({_CAP})[ \t]+({_PATRONYMIC})[ \t]+({_CAP})"  # a first name, a patronymic, a surname
_NAME_PATRONYMIC_SURNAME = re.compile(rf"(?<![А-ЯЁа-яё]){_NPS}(?![А-ЯЁа-яё.])")
_NAME_PATRONYMIC_SURNAME_AT_END = re.compile(rf"{_NPS}(?![А-ЯЁа-яё])")  # a sentence's end may follow
_NOT_SURNAME = {"VERB", "INFN", "PRTF", "PRTS", "GRND", "ADVB", "CONJ", "PREP", "PRCL", "NPRO", "Geox"}


def _is(word: str, role: str) -> bool:
    return any(role in p.tag for p in parse(word))


def _surname_like(word: str) -> bool:
    """Not a verb, a place or a patronymic; nor a calling the dictionary knows as no surname («Экономист Бранко
    Миланович», «Архитектор …»: an animate common noun before a name)."""
    top = parse(word)[0]
    calling = {"NOUN", "anim"} <= set(top.tag.grammemes) and not any(
        {"Surn", "Name"} & set(p.tag.grammemes) for p in parse(word)
    )
    return not (_NOT_SURNAME & set(top.tag.grammemes)) and not _is(word, "Patr") and not calling


def full_names(text: str) -> list[tuple[int, int]]:
    """Where a person is written out in full — surname, first name and patronymic in either order on one line
    («Иванов Иван Иванович», a table row «Петров | Пётр | Петрович» once its cells are joined, «Сергей Николаевич
    Лапин»): the first name is one the dictionary knows as a first name, the patronymic one it knows as a patronymic."""
    found = []
    for m in _SURNAME_NAME_PATRONYMIC.finditer(text):
        if _is(m.group(2), "Name") and _is(m.group(3), "Patr") and _surname_like(m.group(1)):
            after = _NAME_PATRONYMIC_SURNAME_AT_END.match(text, m.start(2))
            if after is None or _is(m.group(1), "Surn") or not _surname_like(after.group(3)):
                found.append((m.start(), m.end()))  # not «Председателя Правительства | Марат Шикирзянович Хуснуллин»
    for m in _NAME_PATRONYMIC_SURNAME.finditer(text):
        if _is(m.group(1), "Name") and _is(m.group(2), "Patr") and _surname_like(m.group(3)):
            found.append((m.start(), m.end()))
    return found


_STREET = re.compile(
    r"(?:(?<![А-ЯЁа-яё])(?:ул|пр|пр-т|просп|пер|пл|наб|б-р|ш)\.?|улиц[аеыу]|проспект[аеу]?|переул\w+|площад[ьи]"
    r"|набережн\w+|бульвар[аеу]?)[ \t]*(?:(?:им\.|имени)[ \t]*)?"
    r"(?:(?:Профессора|Академика|Маршала|Генерала|Адмирала|Героя|Космонавта|Летчика|Лётчика|Писателя|Поэта)[ \t]+)?$",
    re.IGNORECASE,
)  # «ул. Профессора Попова», «пр. им. И. Зязикова»: a street named after someone


def after_street(text: str, start: int) -> bool:
    """«ул. Коптева», «проспекте Вернадского»: the name at `start` is a street's, not a person's."""
    return _STREET.search(text[max(0, start - 16) : start]) is not None

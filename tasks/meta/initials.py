"""Persons by their initials: «С.А.Тырцев», «Абрамов Г. С.», «В.СЕЛИН» (docs/meta.md «Persons»). tasks/meta/names.py
takes every surname `initialled` finds beside initials as a person's mention.
"""

from __future__ import annotations

import re

from tasks.meta.models import _models, parse

WORD = re.compile(r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁа-яё][а-яё]+)?")
_SURNAME = r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁа-яё][а-яё]+)?|[А-ЯЁ]{3,}(?:-[А-ЯЁ]{2,})?"
_INITIALS_FIRST = re.compile(rf"(?<![А-ЯЁа-яё.])[А-ЯЁ]\.\s?(?:[А-ЯЁ]\.\s?)?(?:{_SURNAME})(?![а-яёА-ЯЁ])")
_INITIALS_AFTER = re.compile(rf"(?<![А-ЯЁа-яё])(?:{_SURNAME})\s[А-ЯЁ]\.\s?[А-ЯЁ]\.(?![а-яё])")


def initialled(text: str) -> list[tuple[int, int]]:
    """Where surnames stand beside initials, the initials after first. Two signatures side by side («О.В. Пургина И.И.
    Сидоров») pair each surname with the initials before it; a numbered heading is no person («Ш. Применение …», «Б.
    Общие положения»: one letter at a line's start, then a word the dictionary knows and not as a name); a first name
    before one initial belongs to the person («Николаса Э. Головина»); a function word after an initial is no
    surname."""
    first = list(_INITIALS_FIRST.finditer(text))
    starts, ends = {m.start() for m in first}, {m.end() for m in first}
    after = [
        (m.start(), m.end())
        for m in _INITIALS_AFTER.finditer(text)
        if not (_surname_end(m) + 1 in starts and _surname_end(m) in ends)
    ]
    return after + [
        (_with_first_name(text, m), m.end())
        for m in first
        if not _numbered_heading(text, m)
        and not _title_after(text, m)
        and not _function_word(WORD.findall(m.group(0))[-1:])
    ]


def _function_word(words: list[str]) -> bool:
    """«Алексей Ю. По его мнению»: a preposition, conjunction, particle or pronoun after an initial opens the next
    sentence; it is no surname."""
    return bool(words) and bool({"PREP", "CONJ", "PRCL", "NPRO"} & set(parse(words[0])[0].tag.grammemes))


def _title_after(text: str, m: re.Match) -> bool:
    """«Пэйтон Р. Менеджмент»: one initial after a capitalised word, then a word the dictionary knows and not as a
    name — the initial is the word before's, a title follows (a reference list), no «Р. Менеджмент»."""
    words = WORD.findall(m.group(0))
    before = re.search(r"[А-ЯЁ][а-яё]+[ \t]$", text[max(0, m.start() - 30) : m.start()])
    title = text[m.end() : m.end() + 1] in (".", ",", ":")  # «Менеджмент. - С-Пб.», not «Апт А. | Монитор Орион»
    return title and before is not None and _one_initial(m) and bool(words) and _common_word(words[-1])


_FIRST_NAME_BEFORE = re.compile(r"(?<![А-ЯЁа-яё])([А-ЯЁ][а-яё]+)[ \t]+$")


def _with_first_name(text: str, m: re.Match) -> int:
    """Where the person starts: at a first name right before a single initial, else at the initial."""
    before = _FIRST_NAME_BEFORE.search(text, max(0, m.start() - 30), m.start())
    if before is None or not _one_initial(m) or not any("Name" in p.tag for p in parse(before.group(1))):
        return m.start()
    return before.start()


def _one_initial(m: re.Match) -> bool:
    return len(re.findall(r"[А-ЯЁ]\.", m.group(0))) == 1


def _surname_end(m: re.Match) -> int:
    return m.start() + re.match(_SURNAME, m.group(0)).end()


def _common_word(word: str) -> bool:
    """The dictionary knows the word, and not as a surname, first name or patronymic."""
    known = bool(word) and _models()[2].word_is_known(word.lower())
    return known and not any({"Surn", "Name", "Patr"} & set(p.tag.grammemes) for p in parse(word))


def _numbered_heading(text: str, m: re.Match) -> bool:
    at_line_start = not text[text.rfind("\n", 0, m.start()) + 1 : m.start()].strip()
    words = WORD.findall(m.group(0))
    if not at_line_start or not _one_initial(m) or not words:
        return False
    return _common_word(words[-1])

"""Page furniture a reader can recognise by its words: the labels of a drawing's stamp frame (ГОСТ 2.104 and
Р 21.101 — «Подп. и дата», «Взам. инв. №», «Инв. № подл.», «Изм. Кол.уч. Лист № док.») however they are spaced.

Letter-spaced and rotated service text comes out of a PDF layer or OCR as «По дп ись и дат а»: the words are
compared with spaces and dots removed. A line is furniture when it consists of stamp labels only (and numbers) and
holds at least one label that only a stamp frame writes — «Лист» or «Дата» alone is a word of a document.
"""

from __future__ import annotations

import re

_NUMBER_SIGNS = ("№", "n", "no", "ne", "")  # OCR reads «№» as N, No, Ne


def _forms(*stems: str) -> set[str]:
    """Every label written with each reading of «№» in place of «#»."""
    return {stem.replace("#", sign) for stem in stems for sign in _NUMBER_SIGNS}


_ONLY_A_STAMP = frozenset(
    _forms(
        "подписьидата",
        "подпидата",
        "подпдата",
        "взаминв#",
        "взамининв#",
        "инв#подл",
        "инв#подлинника",
        "инв#дубл",
        "нконтр",
        "нконтролер",
        "нконтроль",
        "тконтр",
        "разраб",
        "разработал",
        "копировал",
        "колуч",
        "#док",
        "#докум",
        "первпримен",
        "справ#",
    )
)
_ALSO_IN_A_STAMP = frozenset(
    (
        "изм",
        "кол",
        "лист",
        "листов",
        "подп",
        "подпись",
        "дата",
        "пров",
        "проверил",
        "утв",
        "утвердил",
        "лит",
        "масса",
        "масштаб",
        "стадия",
        "формат",
        "гип",
        "нач",
        "начотд",
        "составил",
        "согласовано",
        "инв",
        "№",
    )
)
_LABELS = _ONLY_A_STAMP | _ALSO_IN_A_STAMP
_DISTINCT_INSIDE = tuple(label for label in _ONLY_A_STAMP if len(label) >= 4)
_LONGEST = max(len(label) for label in _LABELS)
_IGNORED = re.compile(r"[\s.,:;·_|/\\()\-–—]+")


def _labels_only(squeezed: str) -> bool:
    """Whether the text splits into stamp labels and digits, one of them a label only a stamp writes (a word break
    over positions: linear in the text, whatever it holds)."""
    reach: list[bool | None] = [None] * (
        len(squeezed) + 1
    )  # reach[i]: text[:i] splits; True when a distinct label is among them
    reach[0] = False
    for i in range(len(squeezed)):
        if reach[i] is None:
            continue
        if squeezed[i].isdigit():
            reach[i + 1] = bool(reach[i + 1]) or reach[i]
        for j in range(i + 1, min(len(squeezed), i + _LONGEST) + 1):
            if squeezed[i:j] in _LABELS:
                reach[j] = bool(reach[j]) or reach[i] or squeezed[i:j] in _ONLY_A_STAMP
    return bool(reach[-1])


def is_stamp_text(text: str) -> bool:
    """A line (or a table row) made of a stamp frame's labels only, letter-spaced or not: «Подп. и дата»,
    «По дп ись и дат а», «Изм. Кол. Лист №док Подпись Дата»; not «Дата» alone, not a sentence that names them."""
    lowered = text.lower().replace("ё", "е")
    squeezed = _IGNORED.sub("", lowered)
    if not 0 < len(squeezed) <= 80:
        return False
    if _labels_only(squeezed):
        return True
    # OCR garbles a label or two («Изм. № Лит № докиум. Maan. Дата»): most words labels, a distinct one among them
    words = [w for w in _IGNORED.split(lowered) if w]
    known = sum(1 for w in words if w in _LABELS or w.isdigit())
    return len(words) >= 3 and known >= 0.7 * len(words) and any(label in squeezed for label in _DISTINCT_INSIDE)

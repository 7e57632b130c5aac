"""Bodies named by an abbreviation (issue «Registers a person can trust»; docs/meta.md «Organisations»).

- **Defined in the document.** «Государственной аттестационной комиссии (далее ГАК)», «Федеральная служба
  безопасности (ФСБ)»: an abbreviation in brackets right after a body's name, its first letter the name's, is that
  body's in the whole document — «Заседание ГАК считается правомочным» on a later page is a mention of the commission,
  counted under its full name, not an entry «ГАК» of its own.
- **Known institutions.** An abbreviation alone is a body only when korpus knows it: pymorphy's dictionary knows НКВД
  and МХАТ (`bodies.dictionary_bodies`); `KNOWN_INSTITUTIONS` adds institutions of science, libraries, universities,
  academies, news and polling agencies, parties and state companies an archive's prose names by their abbreviation
  alone («сборники литературы (ИНИОН, ГПБ, ВИНИТИ и др.)»). Capitals only, a whole word: «Бан» and «мифи» are not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

KNOWN_INSTITUTIONS = frozenset(
    # information institutes, libraries, museums, science funds and academies
    "ИНИОН ВИНИТИ ГПНТБ РГБ РНБ ГПБ БАН ГИМ ГМИИ ГРМ ГТГ РГАЛИ ГАРФ РГАСПИ РГАЭ РФФИ РНФ ВАК РАМН РАСХН РАО РАХ "
    # universities and institutes
    "МГИМО МИФИ МФТИ МГТУ МАИ МЭИ МИСиС ВШЭ РЭУ РГГУ РУДН МПГУ ЛГУ ЛЭТИ ИТМО СПбПУ УрФУ НГУ ТГУ КФУ ДВФУ СФУ ЮФУ "
    "БФУ МГЮА МГЛУ РГПУ МИИТ МАДИ МГСУ МИЭТ РХТУ "
    # news and polling agencies, broadcasters, parties of the Soviet and Russian record
    "ТАСС ИТАР-ТАСС ВГТРК РБК НТВ ОРТ ВЦИОМ ФОМ ЛДПР КПРФ КПСС ВЛКСМ ВЦСПС "
    # state bodies, funds and companies of the Soviet and Russian record
    "ПФР ФСС ФОМС ФФОМС ФССП ФМБА ЦИК ВЦИК ОГПУ ВЧК КГБ МГБ ГУЛАГ ГКЧП ВСНХ СНК РЖД ВЭБ ВТБ АСВ ОАК ОСК ФСК "
    # international bodies
    "ОЭСР МБРР ЮНИДО ФАО ПАСЕ ЕСПЧ ВОИС МСЭ "
    # exchanges, named in a ticker «(NYSE: MCO)»
    "ММВБ NYSE NASDAQ".split()
)
_WORD_CHAR = r"[\wА-ЯЁа-яё-]"
_ALTERNATIVES = "|".join(sorted(KNOWN_INSTITUTIONS, key=len, reverse=True))
_KNOWN = re.compile(rf"(?<!{_WORD_CHAR})(?:{_ALTERNATIVES})(?!{_WORD_CHAR})")
_DEFINITION = re.compile(
    r"[ \t]*\n?[ \t]*\((?:далее[ \t]*(?:[-–—:][ \t]*)?(?:по[ \t]+тексту[ \t]*[-–—:]?[ \t]*)?)?[«\"]?"
    r"([А-ЯЁA-Z][А-ЯЁA-Zа-яё]{0,2}[А-ЯЁA-Z][А-ЯЁA-Zа-яё]{0,8})[»\"]?\)"
)


def known_institutions(text: str) -> list[tuple[int, int]]:
    """Where `text` names a body by an abbreviation korpus knows (`KNOWN_INSTITUTIONS`)."""
    return [(m.start(), m.end()) for m in _KNOWN.finditer(text)]


def defined_after(text: str, name: str, end: int) -> str | None:
    """The abbreviation a document gives the body `name` that ends at `end` («… комиссии (далее ГАК)»), when it is
    written in capitals and opens with the name's first letter; else None."""
    match = _DEFINITION.match(text, end)
    if match is None:
        return None
    abbreviation = match.group(1)
    if sum(c.isupper() for c in abbreviation) < 2 or abbreviation[0] != name.lstrip('«"')[:1].upper():
        return None
    return abbreviation


def uses_of(text: str, abbreviation: str) -> list[tuple[int, int]]:
    """Where `text` writes `abbreviation` as a word of its own, not inside brackets that define it."""
    pattern = re.compile(rf"(?<!{_WORD_CHAR}){re.escape(abbreviation)}(?!{_WORD_CHAR})")
    return [(m.start(), m.end()) for m in pattern.finditer(text) if not _DEFINITION.match(text, _bracket(text, m))]


def _bracket(text: str, match: re.Match[str]) -> int:
    """The position of the opening bracket (with «далее») a use of an abbreviation stands in, or past the text."""
    opening = text.rfind("(", max(0, match.start() - 20), match.start())
    return opening if opening >= 0 and ")" not in text[opening : match.start()] else len(text)


class _Named(Protocol):  # tasks.meta.names.Mention
    type: str
    end: int
    text: str


def defined_bodies(
    texts: Sequence[str], found: Sequence[Sequence[_Named]], key: Callable[[str], str]
) -> dict[str, str]:
    """abbreviation → the body's name, for every abbreviation a document (its pages' `texts` and the mentions `found`
    in each) defines after a body's name; one defined for two bodies (by their `key`) is neither's."""
    defined: dict[str, dict[str, str]] = {}  # abbreviation → {the body's key: its name as first written}
    for text, mentions in zip(texts, found, strict=True):
        for mention in mentions:
            if mention.type == "ORG" and (abbreviation := defined_after(text, mention.text, mention.end)):
                name = " ".join(mention.text.split())
                defined.setdefault(abbreviation, {}).setdefault(key(name), name)
    return {abbreviation: next(iter(bodies.values())) for abbreviation, bodies in defined.items() if len(bodies) == 1}


def defined_uses(text: str, defined: dict[str, str], taken: Sequence[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """(start, end, abbreviation) of every use of a defined abbreviation in `text` that no span `taken` covers."""
    return [
        (a, b, abbreviation)
        for abbreviation in defined
        for a, b in uses_of(text, abbreviation)
        if not any(a < end and start < b for start, end in taken)
    ]

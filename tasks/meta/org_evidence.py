"""Evidence that a span NER marks ORG names an organisation (docs/meta.md «Organisations»): a legal form and its quoted
name, a quoted name after an organisation word, a Latin company suffix, a valid ИНН or ОГРН after it, a state body's
or institution's name, a known agency's abbreviation; and whether one word may be a name at all."""

from __future__ import annotations

import re

from tasks.meta.bodies import (
    _AGENCY_OF_RUSSIA,
    _KNOWN_ACRONYMS,
    _LATIN_COMPANY,
    _ORG_WORD_QUOTED,
    OKOPF,
    QUOTED_NAME,
    body_end,
    named_institution,
    names_a_thing,
    organisation_ids,
    quoted_body,
)
from tasks.meta.latin import latin_body
from tasks.meta.models import _models

LEGAL_FORMS = {
    "общество с ограниченной ответственностью": "ООО",
    "публичное акционерное общество": "ПАО",
    "закрытое акционерное общество": "ЗАО",
    "открытое акционерное общество": "ОАО",
    "непубличное акционерное общество": "АО",
    "акционерное общество": "АО",
    "индивидуальный предприниматель": "ИП",
    "федеральное государственное унитарное предприятие": "ФГУП",
    "государственное унитарное предприятие": "ГУП",
    "муниципальное унитарное предприятие": "МУП",
    "автономная некоммерческая организация": "АНО",
}
_FORM_WORDS = "|".join(
    [*sorted(LEGAL_FORMS, key=len, reverse=True), "ООО", "ПАО", "ЗАО", "ОАО", "АО", "ФГУП", "ГУП", "МУП", "АНО", OKOPF]
)
LEGAL_NAME = re.compile(rf"(?<![А-ЯЁа-яё\d])(?:{_FORM_WORDS}|000(?=\s*[«\"„“]))\s*{QUOTED_NAME}", re.IGNORECASE)
"""A legal form and its quoted name; «000» is how OCR reads «ООО» before a quote."""
SHORT_FORMS = {"ООО", "ПАО", "ЗАО", "ОАО", "АО", "ИП", "ФГУП", "ГУП", "МУП", "АНО", "НКО", "ГБУ", "МБУ", "ФГБУ"}


def has_organisation_evidence(text: str, start: int, stop: int) -> bool:
    """What makes an NER ORG span an organisation (docs/meta.md): a legal form, a quoted name, a valid ИНН or ОГРН
    right after it, a known agency's abbreviation, a state body's or institution's name, a Latin company suffix."""
    name = text[start:stop]
    covers = lambda m: m is not None and m.end() - m.start() >= len(name.rstrip()) - 2  # noqa: E731
    thing = names_a_thing(text, start)  # a Latin name after «проекте», «продукта»: «в проекте Smart Urban Services»
    latin = _LATIN_COMPANY.search(name) if not thing else None
    if any(covers(m) for m in (LEGAL_NAME.search(name), _ORG_WORD_QUOTED.search(name), latin)):
        return True
    if any(organisation_ids(text, stop)) or named_institution(text, start, stop):
        return True
    if not thing and latin_body(text, start, stop):
        return True
    if quoted_body(text, start, stop):
        return True  # «"Спартак"», «"Лацио"»: a quoted name NER reads as an organisation; not «№ 7 "Копканский"»
    words = re.findall(r"[А-ЯЁа-яёA-Za-z]+", name)
    if (words and words[0] in _KNOWN_ACRONYMS) or _AGENCY_OF_RUSSIA.search(name):
        return True
    end = body_end(name, 0)
    return end is not None and end >= len(name.rstrip()) - 2


def closing_quote(text: str, start: int, stop: int) -> int:
    """NER often stops before the closing quote («АО «Уральские машины»): take it in when it is near."""
    span = text[start:stop]
    if span.count("«") > span.count("»"):
        close = text.find("»", stop, stop + 60)
        if close >= 0 and "\n" not in text[stop:close]:
            return close + 1
    return stop


def is_organisation_name(span: str) -> bool:
    """Multi-word names, legal forms and quoted names pass; one word passes only when the dictionary does not know it
    as a common word («Сбербанк», «Росреестр», an abbreviation) — «ПРОТОКОЛ», «Поставщик» and «ПРИКАЗЫВАЮ» do not."""
    words = re.findall(r"[А-ЯЁа-яёA-Za-z]+", span)
    if len(words) != 1 or "«" in span or '"' in span:
        return bool(words)
    word = words[0]
    if word.upper() in SHORT_FORMS:
        return False
    morph = _models()[2]
    top = morph.parse(word)[0]
    return not morph.word_is_known(word.lower()) or bool({"Orgn", "Abbr"} & set(top.tag.grammemes))

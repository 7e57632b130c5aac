"""Persons and organisations in Russian text: found by a model, normalised and merged by code.

Finding: a legal form followed by a quoted name («ООО «Ромашка»», «Акционерное общество "Волга"») is an organisation
by rule; elsewhere natasha's slovnet NER (`NewsNERTagger`, news embeddings; both ship inside the `natasha` wheel,
nothing is downloaded) marks PER and ORG spans. Normalising a person (pymorphy3 with its Russian dictionary):
- each word of the span is read as a surname, a first name or a patronymic (pymorphy's `Surn`/`Name`/`Patr`
  tags); initials («Е. В.», «А.А.») are read as the first name's and patronymic's first letters;
- the key is the surname's dictionary form (pymorphy's lemma, «смирнов» for «Смирновой», «Смирновым» and
  «Смирнова») with the two initials, so «Смирновой Е. В.», «Е. В. Смирнова» and «Елена Викторовна Смирнова» are one
  person; the name shown is the fullest form seen, put in the nominative in the person's gender;
- a mention of a surname alone joins the one person with that surname and is left out when several share it
  (ambiguous); a first name alone is not a register entry; a lone word the dictionary does not know is a surname
  as written (tasks/meta/surnames.py).
Organisations: an ORG span followed within its sentence by a valid ИНН (checksum) takes that ИНН, and ИНН is the
merge key; without one, the key is the legal form (long forms as their abbreviations) with the quoted name.
Limits: a man and a woman with the same surname and initials are one entry; a surname pymorphy does not know is
put in the nominative by its guesser; organisations named without quotes or ИНН keep the case they were found in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tasks.meta.abbreviations import known_institutions
from tasks.meta.bodies import (
    _ADJ_BODY,
    _AGENCY_OF_RUSSIA,
    _BODY_HEAD,
    _CAPS_BODY,
    _KNOWN_BODY_WORD,
    _LOWER_HEAD,
    _ORG_WORD_ABBREVIATION,
    _ORG_WORD_QUOTED,
    body_end,
    dictionary_bodies,
    genitive_tail,
    latin_companies,
    names_a_thing,
    ooo_as_read,
    with_place,
)
from tasks.meta.evidence import fio_heading, first_and_middle
from tasks.meta.foreign import arabic_name, first_initial_last, first_then_name, regnal
from tasks.meta.initials import WORD as _WORD
from tasks.meta.initials import initialled
from tasks.meta.latin import latin_person_like, latin_person_span
from tasks.meta.models import _models
from tasks.meta.models import parse as parse_word  # `parse` names a reading below
from tasks.meta.ner import NerSpan, ner_spans
from tasks.meta.org_evidence import (
    LEGAL_FORMS,
    LEGAL_NAME,
    SHORT_FORMS,
    closing_quote,
    has_organisation_evidence,
    is_organisation_name,
)
from tasks.meta.scanned import after_street, composed, cyrillic_lookalikes, full_names
from tasks.meta.surnames import as_written as _as_written
from tasks.meta.surnames import nominative_form, surname_key, unknown_surname

_INITIALS = re.compile(r"([А-ЯЁ])\.\s*(?:([А-ЯЁ])(?:\.|(?![а-яё])))?")
_QUOTED = re.compile(r"[«\"“„']([^»\"”“']+)[»\"”“']")
_ABBREVIATION_AFTER = re.compile(r"\s*\([A-ZА-ЯЁ]{2,8}\)$")
_NUMERAL = re.compile(r"[ \t]+[IVXL]{1,6}(?![A-Za-zА-ЯЁа-яё])")
_NOT_NAME_PARTS = {"VERB", "INFN", "PRTF", "PRTS", "GRND", "ADJS", "ADVB", "CONJ", "PREP", "PRCL", "NPRO", "COMP"}
_NOT_SURNAMES = {"Москва", "Россия", "Российской", "Федерации", "Статья", "Глава", "Приложение", "Раздел", "Пункт"}


@dataclass(frozen=True)
class Mention:
    """A PER or ORG span at [start, end) of a text."""

    type: str
    start: int
    end: int
    text: str
    ruled: bool = False
    """Found by a rule (a legal form, initials beside a surname), not by the NER model."""


@dataclass(frozen=True)
class PersonName:
    """A person as one mention names them. `key` merges mentions; `shown` is the nominative form to print."""

    surname: str
    first: str | None
    middle: str | None
    first_initial: str | None
    middle_initial: str | None
    gender: str | None
    shown: str
    certain: bool = False
    """The gender is known: from a first name or patronymic, or a surname form only one gender has."""

    @property
    def key(self) -> str:
        return "|".join([self.surname, self.first_initial or "", self.middle_initial or ""])

    @property
    def fullness(self) -> int:
        return 2 * bool(self.first) + 2 * bool(self.middle) + bool(self.first_initial) + bool(self.middle_initial)


def readable_for_names(text: str) -> str:
    """The page as the name rules read it: a word broken at a line end joined again («Гарина-\nМихайловского»,
    «Алексе- ева»), table cells one sentence («Иванов | Иван | Иванович»)."""
    text = re.sub(r"(?<=[а-яё])-(?:[ \t]*\n[ \t]*|[ \t]+)(?=[а-яё])", "", composed(text))  # «кафе-кондитерская» stays
    text = re.sub(r"(?<=[А-ЯЁа-яё])-[ \t]*\n[ \t]*(?=[А-ЯЁ])|(?<=[а-яё])- (?=[А-ЯЁ])", "-", text)
    return cyrillic_lookalikes(re.sub(r"[ \t]*\|[ \t]*", " ", text))  # «OOO «Тройка»», «A.C. Глебова»


def find_mentions(text: str, spans: list[NerSpan] | None = None) -> list[Mention]:
    """PER and ORG spans in `text`, in order: organisations with evidence and persons written with their initials
    by rule, then what natasha's slovnet NER marks (`spans`, when the caller tagged texts in a batch), where no rule
    has spoken and (for ORG) with evidence."""
    if spans is None:
        spans = ner_spans([text])[0]
    ruled_mentions = _ruled(text)
    ruled = [(m.start, m.end) for m in ruled_mentions]
    mentions: list[Mention] = []  # NER's, in order
    for start, stop, kind in spans:
        if kind not in ("PER", "ORG") or any(start < b and a < stop for a, b in ruled):
            continue
        if kind == "PER" and after_street(text, start):
            continue  # «ул. Коптева»
        span_text = text[start:stop]
        if kind == "ORG" and latin_person_span(span_text):
            kind = "PER"  # «Alex Graves», «Bob Marley»: NER calls Latin-script names organisations
        if kind == "ORG":
            stop = closing_quote(text, start, start + len(_ABBREVIATION_AFTER.sub("", text[start:stop])))  # «(АЛП)»
            name = text[start:stop]
            if not (is_organisation_name(name) and has_organisation_evidence(text, start, stop)):
                continue
            stop = with_place(text, stop)  # «Либеральная партия | Австралии», «Верховного суда | США»
            name = text[start:stop]
            mentions.append(Mention("ORG", start, stop, name))
            continue
        if kind == "PER" and (numeral := _NUMERAL.match(text, stop)):
            stop, span_text = numeral.end(), text[start : numeral.end()]  # «Людовика XIV»
        last = mentions[-1] if mentions else None
        if last and last.type == kind == "PER" and not text[last.end : start].strip():
            mentions[-1] = Mention("PER", last.start, stop, text[last.start : stop])  # «Петрову | Ивану»
        else:
            mentions.append(Mention(kind, start, stop, span_text))
    return sorted(mentions + ruled_mentions, key=lambda m: m.start)


def _ruled(text: str) -> list[Mention]:
    """Mentions the rules find, longest first, never two overlapping."""
    found: list[Mention] = []

    def add(kind: str, start: int, end: int) -> None:
        name = text[start:end].rstrip(" ,.;:")
        end = start + len(name)
        if end - start > 1 and not any(start < m.end and m.start < end for m in found):
            found.append(Mention(kind, start, end, name, ruled=True))

    candidates: list[tuple[str, int, int]] = []  # (kind, start, end)
    for pattern in (LEGAL_NAME, _AGENCY_OF_RUSSIA, _KNOWN_BODY_WORD):
        candidates += [("ORG", m.start(), m.end()) for m in pattern.finditer(text)]
    candidates += [
        ("ORG", start, end) for start, end in dictionary_bodies(text) + latin_companies(text) + known_institutions(text)
    ]
    candidates += [
        ("ORG", m.start(), with_place(text, genitive_tail(text, m.end())))
        for m in _ADJ_BODY.finditer(text)
        if not names_a_thing(text, m.start())
    ]  # not «проекта «Московская электронная школа»»
    candidates += [("ORG", m.start(1), m.end(1)) for m in _ORG_WORD_ABBREVIATION.finditer(text)]
    for match in _ORG_WORD_QUOTED.finditer(text):  # «компании "Евразийское водное партнерство"»: the name only
        generic = match.group(0)[0].islower() or match.group(0)[:3].lower() in ("ком", "агент", "бан", "фон", "орг")
        name_at = match.start(1) if match.start(1) >= 0 else match.start(2)
        candidates.append(("ORG", name_at - 1 if generic else match.start(), match.end()))
    candidates += [("ORG", m.start(), m.end()) for m in _CAPS_BODY.finditer(text) if len(m.group(0).split()) > 1]
    for head in _BODY_HEAD.finditer(text):
        end = body_end(text, head.start())
        if end is not None:
            candidates.append(("ORG", head.start(), end))
    for head in _LOWER_HEAD.finditer(text):  # «в администрации Пушкинского муниципального района»
        window = text[head.start() : head.start() + 600]  # a body's name is shorter; no copy of the whole text
        if (end := body_end(window[0].upper() + window[1:], 0)) is not None:
            candidates.append(("ORG", head.start(), head.start() + end))
    candidates.sort(key=lambda c: (c[1] - c[2], c[1]))
    # persons after organisations; «Федорова А. И.» before «А. И. Решили»; a place is no surname («Москвы Ю.М.»)
    candidates += [("PER", start, end) for start, end in full_names(text)]  # «Петров | Пётр | Петрович»
    candidates += [
        ("PER", a, b)
        for a, b in initialled(text)
        if not (after_street(text, a) or fio_heading(text, a, b))
        and not any(w in _NOT_SURNAMES or _is_place(w) for w in _WORD.findall(text[a:b]))
    ]
    for kind, start, end in candidates:
        add(kind, start, closing_quote(text, start, end) if kind == "ORG" else end)
    return found


def _is_place(word: str) -> bool:
    return "Geox" in parse_word(word)[0].tag


def _ranked(parses: list[Any]) -> list[Any]:
    """pymorphy's readings, most likely first, indeclinable readings («Анне» the foreign name) after the rest."""
    return sorted(parses, key=lambda p: ("Fixd" in p.tag, -p.score))


def _role(parses: list[Any]) -> str | None:
    """Surn, Name or Patr: the most likely reading that is any of them."""
    return next((t for p in _ranked(parses) for t in ("Surn", "Name", "Patr") if t in p.tag), None)


def _best(parses: list[Any], tag: str, gender: str | None) -> Any | None:
    fitting = [p for p in _ranked(parses) if tag in p.tag and (gender is None or p.tag.gender in (gender, None))]
    return fitting[0] if fitting else None


@lru_cache(maxsize=65536)
def _nominative(parse: Any, gender: str | None) -> str:
    """Cached by the reading and gender: a register reads the same names again and again."""
    if "-" in parse.word:  # «Гарина-Михайловского» → «Гарин-Михайловский»: each part declines
        return "-".join(
            _nominative(_best(readings := parse_word(part), "Surn", gender) or readings[0], gender)
            for part in parse.word.split("-")
        )
    return nominative_form(parse, gender)


def _latin_person(span: str) -> PersonName | None:
    """«Alf Karlsson», «Bob Marley», «John R. Smith»: the last word is the surname, shown as written."""
    words = re.findall(r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?|[A-Z]\.", span)
    if len(words) < 2 or words[-1].endswith(".") or not latin_person_like(span):  # «Goldman Sachs»: no person
        return None
    first = words[0] if not words[0].endswith(".") else None
    middle = next((w for w in words[1:-1]), None)
    return PersonName(
        words[-1].lower(),
        first,
        middle,
        words[0][0],
        middle[0] if middle else None,
        None,
        " ".join(words),
        certain=False,
    )


def person_name(span: str, ruled: bool = False, at_edge: bool = True) -> PersonName | None:
    """Read a PER span as a person's name; None when it holds no surname (a first name alone). `ruled`: the span is
    a surname beside initials (a rule found it), so its word is the surname even if the dictionary knows it as
    something else («Буренин В.А.», «В.СЕЛИН»)."""
    if re.search(r"[A-Za-z]", span) and not re.search(r"[А-ЯЁа-яё]", span):
        return _latin_person(span)
    if fixed := regnal(span) or first_initial_last(span) or arabic_name(span):  # «Людовика XIV», «Ибн Сина»
        return PersonName(*fixed)
    span = re.sub(r"(?<![А-ЯЁ])[А-ЯЁ]{3,}(?:-[А-ЯЁ]{2,})?(?![А-ЯЁа-яё])", lambda m: m.group(0).capitalize(), span)
    if fixed := first_then_name(span):  # «Джеймсу Дьюару», «Жана Батиста МОЛЬЕРА»
        return PersonName(*fixed)
    morph = _models()[2]
    initials = _INITIALS.search(span)
    first_initial = initials.group(1) if initials else None
    middle_initial = initials.group(2) if initials else None
    words = [w for w in _WORD.findall(_INITIALS.sub(" ", span))]
    parses = {w: parse_word(w) for w in words}  # cached: a register reads the same names again and again
    roles = {w: _role(parses[w]) for w in words}
    # «Буренин В.А.»: with initials the words are the surname («Буренин» is also a woman's name in the plural)
    first, middle = (None, None) if initials else first_and_middle(words, roles, parses)
    gender = None
    for word, tag in ((middle, "Patr"), (first, "Name")):
        if word and gender is None:
            gender = _best(parses[word], tag, None).tag.gender
    certain = gender is not None
    # A surname is read as one, or is a word the dictionary does not know; «Ответственным В. О.» holds none.
    rest = [w for w in words if w not in (first, middle)]
    rest = [
        w
        for w in rest
        if (ruled and not _NOT_NAME_PARTS & set(parses[w][0].tag.grammemes))
        or _best(parses[w], "Surn", None)
        or not morph.word_is_known(w.lower())
    ]
    surname_word = next((w for w in rest if roles[w] == "Surn"), None) or next(
        (w for w in rest if _best(parses[w], "Surn", gender)), rest[0] if rest else None
    )
    if surname_word is None and first and middle:  # «Дук Евгений Иванович»: the word beside the full name
        at, end = words.index(first), words.index(middle)
        beside = [w for w in (words[at - 1] if at > 0 else None, words[end + 1] if end + 1 < len(words) else None) if w]
        surname_word = beside[0] if beside else None
    if surname_word is None:
        return None
    if not (first or middle or first_initial) and not _best(parses[surname_word], "Surn", None):
        # a lone word: a surname the dictionary does not know («Онопко») as written, else none («Смявший», misheard)
        return (
            PersonName(surname_key(surname_word), None, None, None, None, None, surname_word)
            if (unknown_surname(surname_word, may_be_cut=at_edge))
            else None
        )
    # a person's surname is singular: «Тырцев» read as the plural of «Тырец» is left as written
    parses[surname_word] = [p for p in parses[surname_word] if "plur" not in p.tag] or parses[surname_word]
    nominative = [p for p in _ranked(parses[surname_word]) if "Surn" in p.tag and "nomn" in p.tag]
    if gender is not None:
        nominative = [p for p in nominative if p.tag.gender in (gender, None)]
    surname_parse = (nominative[0] if nominative else None) or _best(parses[surname_word], "Surn", gender)
    surname_parse = surname_parse or parses[surname_word][0]
    if gender is None and first_initial:  # initials only: the surname's own form tells the gender, if anything
        gender = surname_parse.tag.gender if "Surn" in surname_parse.tag else None
        certain = len({p.tag.gender for p in parses[surname_word] if "Surn" in p.tag}) == 1  # not «Соловьёва»
    # the name's case, among its readings one the surname can share («Александра Паляницу»: accusative, not genitive)
    named = (
        [p.tag.case for p in _ranked(parses[middle or first]) if ("Patr" if middle else "Name") in p.tag]
        if (middle or first)
        else []
    )
    case = next((c for c in named if any(p.tag.case == c for p in parses[surname_word])), named[0] if named else None)
    if "Surn" not in surname_parse.tag or "plur" in surname_parse.tag:
        # not a surname the dictionary knows: as written, or in the nominative when the name beside it is not
        # («Игоря Давыдовича Шаферана» → «Шаферан»)
        agreeing = [p for p in parses[surname_word] if case and case != "nomn" and p.tag.case == case]
        surname = (
            _as_written(surname_word, _nominative(agreeing[0], gender))
            if agreeing
            else re.sub(r"(?<=[оеё]в|[иы]н)(?:у|ым|е)$", "", surname_word)
        )  # «Лапину С. Н.» → «Лапин»
        lemma = surname.lower().replace("ё", "е")
    else:
        lemma, surname = (
            surname_parse.normal_form.replace("ё", "е"),
            _as_written(surname_word, _nominative(surname_parse, gender)),
        )
    # A name whose gender disagrees with the patronymic's («Саша Петровна») is read in its own gender.
    first_nom = (
        _as_written(
            first, _nominative(_best(parses[first], "Name", gender) or _best(parses[first], "Name", None), gender)
        )
        if first
        else None
    )
    middle_nom = (
        _as_written(
            middle, _nominative(_best(parses[middle], "Patr", gender) or _best(parses[middle], "Patr", None), gender)
        )
        if middle
        else None
    )
    first_initial = first_initial or (first_nom[0] if first_nom else None)
    middle_initial = middle_initial or (middle_nom[0] if middle_nom else None)
    if first_nom:
        shown = " ".join(filter(None, [surname, first_nom, middle_nom]))
    else:
        shown = " ".join(
            filter(
                None,
                [
                    surname,
                    f"{first_initial}." if first_initial else None,
                    f"{middle_initial}." if middle_initial else None,
                ],
            )
        )
    return PersonName(lemma, first_nom, middle_nom, first_initial, middle_initial, gender, shown, certain)


@lru_cache(maxsize=65536)  # bounded: one entry per organisation name a refresh shows
def is_nominative_name(name: str) -> bool:
    """An organisation's name as written in the nominative: its first word reads as a singular nominative
    («Правительство Российской Федерации», «ФСТЭК России»; not «Минюстом России», «Правительства …»)."""
    words = re.findall(r"[А-ЯЁа-яё]+", name)
    if not words or words[0].isupper():
        return bool(words)
    return any("nomn" in p.tag and "plur" not in p.tag for p in _models()[2].parse(words[0]))


def legal_form(name: str) -> str:
    """Long legal forms as abbreviations: «Общество с ограниченной ответственностью «Ромашка»» → «ООО «Ромашка»»."""
    name = ooo_as_read(name.strip())
    lowered = name.lower()
    for long, short in LEGAL_FORMS.items():
        at = lowered.find(long)
        if at >= 0:
            return (name[:at] + short + name[at + len(long) :]).strip()
    return name.strip()


def organisation_key(name: str) -> str:
    """Legal form and quoted name, case and quotes folded: «ООО "Ромашка"» and «ООО «ромашка»» meet."""
    name = legal_form(name)
    quoted = _QUOTED.search(name)
    form = next((w for w in re.findall(r"[А-ЯЁA-Z]{2,5}", name.split("«")[0]) if w in SHORT_FORMS), "")
    core = quoted.group(1) if quoted else name
    folded = re.sub(r"\W+", " ", core).strip().lower()
    if not quoted:  # «Правительства Российской Федерации» and «Правительство Российской Федерации» meet
        from tasks.text.analysis import analyse

        folded = " ".join(analyse(core)) or folded
    return f"{form} {folded}".strip()

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
  (ambiguous); a first name alone is not a register entry.
Organisations: an ORG span followed within its sentence by a valid ИНН (checksum) takes that ИНН, and ИНН is the
merge key; without one, the key is the legal form (long forms as their abbreviations) with the quoted name.
Limits: a man and a woman with the same surname and initials are one entry; a surname pymorphy does not know is
put in the nominative by its guesser; organisations named without quotes or ИНН keep the case they were found in.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

from tasks.text.identifiers import valid_inn, valid_ogrn

_LOCK = threading.Lock()
_INITIALS = re.compile(r"([А-ЯЁ])\.\s*(?:([А-ЯЁ])(?:\.|(?![а-яё])))?")
_WORD = re.compile(r"[А-ЯЁ][а-яё]+(?:-[А-ЯЁ][а-яё]+)?")
_INN = re.compile(r"ИНН\s*:?\s*(\d{10}|\d{12})(?!\d)")
_OGRN = re.compile(r"ОГРНИП?\s*:?\s*(\d{13}|\d{15})(?!\d)")
_QUOTED = re.compile(r"[«\"“„']([^»\"”“']+)[»\"”“']")
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
_FORM_WORDS = "|".join([*sorted(LEGAL_FORMS, key=len, reverse=True), "ООО", "ПАО", "ЗАО", "ОАО", "АО", "ФГУП", "ГУП",
                         "МУП", "АНО"])  # fmt: skip
_LEGAL_NAME = re.compile(
    rf"(?<![А-ЯЁа-яё])(?:{_FORM_WORDS})"
    r"\s*[«\"„“]([^»\"”“\n]{1,80})[»\"”“]",
    re.IGNORECASE,
)
_SHORT_FORMS = {"ООО", "ПАО", "ЗАО", "ОАО", "АО", "ИП", "ФГУП", "ГУП", "МУП", "АНО", "НКО", "ГБУ", "МБУ", "ФГБУ"}


@dataclass(frozen=True)
class Mention:
    """A PER or ORG span at [start, end) of a text."""

    type: str
    start: int
    end: int
    text: str


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


@cache
def _models() -> tuple[Any, Any, Any]:
    from natasha import NewsEmbedding, NewsNERTagger, Segmenter
    from pymorphy3 import MorphAnalyzer

    return Segmenter(), NewsNERTagger(NewsEmbedding()), MorphAnalyzer()


def warm_up() -> None:
    """Load the NER model and the morphological dictionary (~0.7 s) now rather than at the first text."""
    _models()


def find_mentions(text: str) -> list[Mention]:
    """PER and ORG spans in `text`, in order (natasha's slovnet NER)."""
    from natasha import Doc

    segmenter, tagger, _ = _models()
    with _LOCK:  # the tagger keeps state while it runs
        doc = Doc(text)
        doc.segment(segmenter)
        doc.tag_ner(tagger)
    mentions = [Mention("ORG", m.start(), m.end(), m.group(0)) for m in _LEGAL_NAME.finditer(text)]
    ruled = [(m.start, m.end) for m in mentions]
    for span in doc.spans:
        if span.type not in ("PER", "ORG") or any(span.start < b and a < span.stop for a, b in ruled):
            continue
        if span.type == "ORG":
            stop = _closing_quote(text, span.start, span.stop)
            if not is_organisation_name(text[span.start : stop]):
                continue
            mentions.append(Mention("ORG", span.start, stop, text[span.start : stop]))
            continue
        last = mentions[-1] if mentions else None
        if last and last.type == span.type == "PER" and not text[last.end : span.start].strip():
            mentions[-1] = Mention("PER", last.start, span.stop, text[last.start : span.stop])  # «Петрову | Ивану»
        else:
            mentions.append(Mention(span.type, span.start, span.stop, span.text))
    return sorted(mentions, key=lambda m: m.start)


def _closing_quote(text: str, start: int, stop: int) -> int:
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
    if word.upper() in _SHORT_FORMS:
        return False
    morph = _models()[2]
    top = morph.parse(word)[0]
    return not morph.word_is_known(word.lower()) or bool({"Orgn", "Abbr"} & set(top.tag.grammemes))


def _ranked(parses: list[Any]) -> list[Any]:
    """pymorphy's readings, most likely first, indeclinable readings («Анне» the foreign name) after the rest."""
    return sorted(parses, key=lambda p: ("Fixd" in p.tag, -p.score))


def _role(parses: list[Any]) -> str | None:
    """Surn, Name or Patr: the most likely reading that is any of them."""
    return next((t for p in _ranked(parses) for t in ("Surn", "Name", "Patr") if t in p.tag), None)


def _best(parses: list[Any], tag: str, gender: str | None) -> Any | None:
    fitting = [p for p in _ranked(parses) if tag in p.tag and (gender is None or p.tag.gender in (gender, None))]
    return fitting[0] if fitting else None


def _nominative(parse: Any, gender: str | None) -> str:
    wanted = {"nomn", "sing"} | ({gender} if gender and parse.tag.gender else set())
    form = parse.inflect(wanted) or parse.inflect({"nomn"})
    return (form.word if form else parse.word).capitalize() if "-" not in parse.word else "-".join(
        w.capitalize() for w in (form.word if form else parse.word).split("-"))  # fmt: skip


def person_name(span: str) -> PersonName | None:
    """Read a PER span as a person's name; None when it holds no surname (a first name alone)."""
    morph = _models()[2]
    initials = _INITIALS.search(span)
    first_initial = initials.group(1) if initials else None
    middle_initial = initials.group(2) if initials else None
    words = [w for w in _WORD.findall(_INITIALS.sub(" ", span))]
    parses = {w: morph.parse(w) for w in words}
    roles = {w: _role(parses[w]) for w in words}
    first = next((w for w in words if roles[w] == "Name"), None)
    middle = next((w for w in words if roles[w] == "Patr"), None)
    gender = None
    for word, tag in ((middle, "Patr"), (first, "Name")):
        if word and gender is None:
            gender = _best(parses[word], tag, None).tag.gender
    certain = gender is not None
    # A surname is read as one, or is a word the dictionary does not know; «Ответственным В. О.» holds none.
    rest = [w for w in words if w not in (first, middle)]
    rest = [w for w in rest if _best(parses[w], "Surn", None) or not morph.word_is_known(w.lower())]
    surname_word = next((w for w in rest if roles[w] == "Surn"), None) or next(
        (w for w in rest if _best(parses[w], "Surn", gender)), rest[0] if rest else None
    )
    if surname_word is None:
        return None
    if not (first or middle or first_initial) and not _best(parses[surname_word], "Surn", None):
        return None  # a lone capitalised word that is not a surname («Смявший» from a misheard recording)
    nominative = [p for p in _ranked(parses[surname_word]) if "Surn" in p.tag and "nomn" in p.tag]
    if gender is not None:
        nominative = [p for p in nominative if p.tag.gender in (gender, None)]
    surname_parse = (nominative[0] if nominative else None) or _best(parses[surname_word], "Surn", gender)
    surname_parse = surname_parse or parses[surname_word][0]
    if gender is None and first_initial:  # initials only: the surname's own form tells the gender, if anything
        gender = surname_parse.tag.gender if "Surn" in surname_parse.tag else None
        certain = len({p.tag.gender for p in parses[surname_word] if "Surn" in p.tag}) == 1  # not «Соловьёва»
    lemma = surname_parse.normal_form
    surname = _nominative(surname_parse, gender)
    # A name whose gender disagrees with the patronymic's («Саша Петровна») is read in its own gender.
    first_nom = _nominative(_best(parses[first], "Name", gender) or _best(parses[first], "Name", None), gender) if (
        first) else None  # fmt: skip
    middle_nom = _nominative(_best(parses[middle], "Patr", gender) or _best(parses[middle], "Patr", None), gender) if (
        middle) else None  # fmt: skip
    first_initial = first_initial or (first_nom[0] if first_nom else None)
    middle_initial = middle_initial or (middle_nom[0] if middle_nom else None)
    if first_nom:
        shown = " ".join(filter(None, [surname, first_nom, middle_nom]))
    else:
        shown = " ".join(filter(None, [surname, f"{first_initial}." if first_initial else None,
                                        f"{middle_initial}." if middle_initial else None]))  # fmt: skip
    return PersonName(lemma, first_nom, middle_nom, first_initial, middle_initial, gender, shown, certain)


def legal_form(name: str) -> str:
    """Long legal forms as abbreviations: «Общество с ограниченной ответственностью «Ромашка»» → «ООО «Ромашка»»."""
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
    form = next((w for w in re.findall(r"[А-ЯЁA-Z]{2,5}", name.split("«")[0]) if w in _SHORT_FORMS), "")
    core = quoted.group(1) if quoted else name
    folded = re.sub(r"\W+", " ", core).strip().lower()
    return f"{form} {folded}".strip()


def organisation_ids(text: str, end: int, limit: int = 120) -> tuple[str | None, str | None]:
    """A valid ИНН and ОГРН written right after an organisation (within `limit` characters, same sentence)."""
    tail = re.split(r"(?<=[.!?])\s+[А-ЯЁ]", text[end : end + limit], maxsplit=1)[0]
    inn = next((m.group(1) for m in _INN.finditer(tail) if valid_inn(m.group(1))), None)
    ogrn = next((m.group(1) for m in _OGRN.finditer(tail) if valid_ogrn(m.group(1))), None)
    return inn, ogrn

"""What one source version, as its current chunks serve it, contributes to the meta-documents: its title, size and
dates, the dated sentences it holds, and every person and organisation it mentions, each with its place (file ·
лист / timecode). Only served text counts: what the gate refused or a reviewer withdrew is not read.

Facts are extracted once per source version and set of served chunks and kept as JSON under `<data>/cache/meta/`, so
regenerating the meta-documents after one document changed re-reads that document only; merging is code over the
cached facts. The facts are slotted dataclasses, not pydantic models, and a cached source's repeated strings and places
are shared (`compact`): `refresh_meta` holds every source of a scope at once, and as pydantic objects 100,000 letters'
facts took ~740 MB (7.4 KB a source against 0.91 KB of JSON; #32).
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import TypeAdapter
from razdel import sentenize

from korpus.core.datamodel import PageResult, Source, SourceKind, timecode
from tasks.meta.abbreviations import defined_bodies, defined_uses
from tasks.meta.bodies import is_placeholder, organisation_ids
from tasks.meta.dates import find_dates
from tasks.meta.evidence import surname_in_table, table_row_of, table_rows
from tasks.meta.latin import latin_people
from tasks.meta.llm import LlmEvents
from tasks.meta.names import Mention, find_mentions, person_name, readable_for_names
from tasks.meta.one_name import ONE_WORD, in_table_row, one_name_key, one_name_people
from tasks.meta.org_names import org_key, ungrammatical
from tasks.meta.surnames import written_in_lower_case

logger = logging.getLogger("korpus.meta")

# Bump when extraction changes: every cached fact is read again.
EXTRACTOR_VERSION = "meta-18"  # bump on every extraction change (meta-4 did not: cached facts of older rules stayed)
_STAMP = re.compile(r"\[(\d\d):(\d\d):(\d\d)\]\s*")
_SENTENCE_CHARS = 300
# A reference list's heading: what follows it on the page, and the pages after, are not read for names.
_REFERENCES = re.compile(
    r"(?im)^[ \t#]*(?:references|bibliography|список\s+(?:использованн\w+\s+)?(?:литературы|источников)"
    r"|литература|библиография|библиографический\s+список)[ \t]*:?[ \t]*$"
)


@dataclass(slots=True, kw_only=True)
class Place:
    """Where a fact stands: the source, and its page or the time in a recording."""

    source_id: str
    page: int | None = None
    t_start: float | None = None

    @property
    def label(self) -> str:
        if self.t_start is not None:
            return f"{self.source_id} · {timecode(self.t_start)}"
        return f"{self.source_id} · лист {self.page}" if self.page else self.source_id


@dataclass(slots=True, kw_only=True)
class DatedSentence:
    first: str
    last: str
    sentence: str
    place: Place


@dataclass(slots=True, kw_only=True)
class PersonMention:
    surname: str
    first_initial: str | None
    middle_initial: str | None
    shown: str
    fullness: int
    certain: bool = False
    place: Place


@dataclass(slots=True, kw_only=True)
class OrganisationMention:
    key: str
    name: str
    inn: str | None
    ogrn: str | None
    place: Place


@dataclass(slots=True, kw_only=True)
class SourceFacts:
    source_id: str
    version: str
    kind: str | None
    title: str
    pages: int
    seconds: float | None = None
    owner: str | None
    access: str | None
    tenant: str | None
    switched_at: str | None = None
    events: list[DatedSentence] = field(default_factory=list)
    persons: list[PersonMention] = field(default_factory=list)
    organisations: list[OrganisationMention] = field(default_factory=list)
    llm_records: int = 0
    """Valid event records the LLM returned (KORPUS_LLM_URL), `llm_added` of them new to the chronology."""
    llm_added: int = 0
    llm_refused: int = 0
    extraction_error: str | None = None
    """Why this source's dates and names could not be read (the source is still listed, without them)."""

    @property
    def folder(self) -> str:
        return self.source_id.rsplit("/", 1)[0] if "/" in self.source_id else ""

    @property
    def file_name(self) -> str:
        return self.source_id.rsplit("/", 1)[-1]


_FACTS = TypeAdapter(SourceFacts)
_GENITIVE_BEFORE = re.compile(
    r"(?<![а-яё])(?:по\s+мнению|под\s+ред(?:\.|акцией)|со\s+слов|у|от|для|без|кроме|вместо|против|около"
    r"|при\s+участии|с\s+участием)\s*$",
    re.IGNORECASE,
)
_INITIALLED = re.compile(r"(?<![А-ЯЁа-яё])[А-ЯЁ]\.")


def _as_genitive(text: str, mention: Mention) -> str:
    """«по мнению В. Н. Иванова», «под ред. Л. П. Брагина»: after a word that governs the genitive, a surname in «-ова»,
    «-ева», «-ина» beside initials is a man's (a woman's would be «Ивановой»), read as «Иванов»."""
    if not _INITIALLED.search(mention.text) or not _GENITIVE_BEFORE.search(
        text, max(0, mention.start - 30), mention.start
    ):
        return mention.text
    return re.sub(r"(?<=[оеё]в|[иы]н)а(?![А-ЯЁа-яё])", "", mention.text)


def _shared(text: str | None) -> str | None:
    return None if text is None else sys.intern(text)


def compact(facts: SourceFacts) -> SourceFacts:
    """The same facts, held in less memory: names, keys and labels interned (a register's people recur in letter after
    letter), and one Place object for each place the source's mentions share."""
    places: dict[tuple[str, int | None, float | None], Place] = {}

    def place(at: Place) -> Place:
        key = (at.source_id, at.page, at.t_start)
        if key not in places:
            at.source_id = facts.source_id if at.source_id == facts.source_id else at.source_id
            places[key] = at
        return places[key]

    facts.kind, facts.owner = _shared(facts.kind), _shared(facts.owner)
    facts.access, facts.tenant = _shared(facts.access), _shared(facts.tenant)
    for event in facts.events:
        event.first, event.last, event.place = sys.intern(event.first), sys.intern(event.last), place(event.place)
    for person in facts.persons:
        person.surname, person.shown, person.place = (
            sys.intern(person.surname),
            sys.intern(person.shown),
            place(person.place),
        )
        person.first_initial, person.middle_initial = _shared(person.first_initial), _shared(person.middle_initial)
    for body in facts.organisations:
        body.key, body.name, body.place = sys.intern(body.key), sys.intern(body.name), place(body.place)
    return facts


def title_of(pages: list[PageResult]) -> str:
    """The first line of text (at most 120 characters, timecodes left out)."""
    for page in pages:
        for line in page.text.splitlines():
            line = " ".join(_STAMP.sub("", line).split())
            if len(line) > 2:
                return line[:120]
    return ""


def _sentence(text: str, start: int, end: int, sentences: list[tuple[int, int]]) -> str:
    a, b = next(((s, e) for s, e in sentences if s <= start < e), (start, end))
    b = max(b, end)
    if b - a > _SENTENCE_CHARS:  # a run-on "sentence" (a table, a list): the words around the date
        a, b = max(a, start - _SENTENCE_CHARS // 2), min(b, end + _SENTENCE_CHARS // 2)
    return " ".join(_STAMP.sub("", text[a:b]).split())


def _place(source: Source, page: PageResult, text: str, at: int) -> Place:
    if page.t_start is None:
        return Place(source_id=source.source_id, page=page.page)
    stamps = [int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) for m in _STAMP.finditer(text[: at + 1])]
    return Place(source_id=source.source_id, t_start=float(stamps[-1]) if stamps else page.t_start)


def name_texts(pages: list[PageResult]) -> list[str]:
    """Each page's text as the name rules read it: not from a reference list on (its authors are not people the
    archive is about), a word broken at a line end joined again."""
    out, in_references = [], False
    for page in pages:
        heading = None if in_references else _REFERENCES.search(page.text)
        out.append("" if in_references else readable_for_names(page.text[: heading.start()] if heading else page.text))
        in_references = in_references or heading is not None
    return out


def _people(mentions: list[Mention]) -> list[Mention]:
    """Latin-script PER spans split person by person (a reference list runs its authors together, `latin_people`)."""
    out: list[Mention] = []
    for m in mentions:
        if m.type == "PER" and re.search(r"[A-Za-z]", m.text) and not re.search(r"[А-ЯЁа-яё]", m.text):
            out += [replace(m, start=m.start + a, end=m.start + b, text=m.text[a:b]) for a, b in latin_people(m.text)]
        else:
            out.append(m)
    return out


def extract_facts(
    source: Source, pages: list[PageResult], llm: LlmEvents | None = None, ner: dict[str, list] | None = None
) -> SourceFacts:
    """Dates, persons and organisations of one source version, each with its place; with `llm`, also the dated
    events a model finds that the date rules did not (tasks/meta/llm.py). `ner`: the NER spans of `name_texts`,
    when the caller tagged many sources' texts in one batch."""
    seconds = max((p.t_end or 0.0 for p in pages), default=0.0) if source.kind is SourceKind.audio else None
    facts = SourceFacts(
        source_id=source.source_id,
        version=source.version,
        kind=source.kind.value if source.kind else None,
        title=title_of(pages),
        pages=0 if seconds is not None else len(pages),
        seconds=seconds,
        owner=source.owner,
        access=source.access,
        tenant=source.tenant or "default",
    )
    one_word: list[tuple[str, Place]] = []
    first_names: set[str] = set()
    texts = name_texts(pages)
    found = [_people(find_mentions(t, (ner or {}).get(t))) if t.strip() else [] for t in texts]
    defined = defined_bodies(texts, found, org_key)  # «… комиссии (далее ГАК)»: «ГАК» on any page is that commission
    for page, names_text, mentions in zip(pages, texts, found, strict=True):
        text = page.text
        dates = find_dates(text)
        sentences = [(s.start, s.stop) for s in sentenize(text)] if dates else []
        for date in dates:
            facts.events.append(
                DatedSentence(
                    first=date.first,
                    last=date.last,
                    sentence=_sentence(text, date.start, date.end, sentences),
                    place=_place(source, page, text, date.start),
                )
            )
        if llm is not None and text.strip():
            _add_model_events(facts, llm, source, page, {(d.first, d.last) for d in dates})
        text, rows = names_text, table_rows(page.text)
        if defined:  # each use of a defined abbreviation no mention covers is one of its body
            uses = defined_uses(text, defined, [(m.start, m.end) for m in mentions])
            mentions = sorted(
                [*mentions, *(Mention("ORG", a, b, name, ruled=True) for a, b, name in uses)], key=lambda m: m.start
            )
        for mention in mentions:
            place = _place(source, page, text, mention.start)
            if mention.type == "PER":
                at_edge = text[mention.end : mention.end + 1] in ("", "\n", "-", "|", ".")  # cut short or abbreviated
                name = person_name(_as_genitive(text, mention), ruled=mention.ruled, at_edge=at_edge)
                if name and table_row_of(rows, mention.text) and not surname_in_table(mention.text, name.first):
                    name = None  # «Адрес Ф. И.», «Монитор А.», «Имат»: a capitalised cell is no surname
                if name is None and ONE_WORD.fullmatch(mention.text) and not in_table_row(page.text, mention.text):
                    one_word.append((mention.text, place))  # «Аристотель»: a person by one name, if named again
                first_names.update([name.first] if name is not None and name.first else [])
                lone = name is not None and name.shown == mention.text.split()[-1] and not name.fullness
                if name is not None and not (lone and written_in_lower_case(name.shown, text)):
                    facts.persons.append(
                        PersonMention(
                            surname=name.surname,
                            first_initial=name.first_initial,
                            middle_initial=name.middle_initial,
                            shown=name.shown,
                            fullness=name.fullness,
                            certain=name.certain,
                            place=place,
                        )
                    )
            elif not is_placeholder(mention.text) and not ungrammatical(mention.text):
                inn, ogrn = organisation_ids(text, mention.end)
                name = defined.get(mention.text) or " ".join(mention.text.split())
                facts.organisations.append(
                    OrganisationMention(
                        key=org_key(name),
                        name=name,
                        inn=inn,
                        ogrn=ogrn,
                        place=place,
                    )
                )
    named = one_name_people([w for w, _ in one_word], first_names, "\n".join(texts))
    facts.persons += [
        PersonMention(
            surname=one_name_key(named[word]),
            first_initial=None,
            middle_initial=None,
            shown=named[word],
            fullness=0,
            place=place,
        )
        for word, place in one_word
        if word in named
    ]
    return facts


def _add_model_events(
    facts: SourceFacts, llm: LlmEvents, source: Source, page: PageResult, known: set[tuple[str, str]]
) -> None:
    events, refused = llm.page_events(page.text)
    facts.llm_records += len(events)
    facts.llm_refused += refused
    for event in events:
        if (event.first, event.last) in known:
            continue  # the rules found this date on this page: their sentence stands
        known.add((event.first, event.last))
        place = Place(source_id=source.source_id, page=page.page, t_start=page.t_start)
        facts.events.append(DatedSentence(first=event.first, last=event.last, sentence=event.event, place=place))
        facts.llm_added += 1


class FactCache:
    """Facts per (source id, version, extractor version, variant) as JSON files; a broken file is read again.
    `variant` names the model extraction used, if any (`llm:<model>`), so switching it on reads sources again."""

    def __init__(self, root: Path, variant: str = "") -> None:
        self.root = root
        self.variant = variant

    def _path(self, source: Source, served: str) -> Path:
        key = f"{source.source_id}\0{source.version}\0{served}\0{EXTRACTOR_VERSION}\0{self.variant}"
        key = hashlib.sha256(key.encode()).hexdigest()
        return self.root / key[:2] / f"{key}.json"

    def get(self, source: Source, served: str = "") -> SourceFacts | None:
        """`served` names the chunks the facts were read from (a review decision changes them)."""
        path = self._path(source, served)
        try:
            return compact(_FACTS.validate_json(path.read_bytes()))
        except FileNotFoundError:
            return None
        except ValueError as exc:
            logger.warning("meta facts of %s unreadable (%s): extracted again", source.source_id, exc)
            return None

    def put(self, facts: SourceFacts, source: Source, served: str = "") -> None:
        path = self._path(source, served)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        partial.write_bytes(_FACTS.dump_json(facts))
        partial.replace(path)

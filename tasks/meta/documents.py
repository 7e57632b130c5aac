"""The four meta-documents, merged by code from the facts of the sources one access scope may see.

- «Оглавление коллекции»: totals (documents, by file kind, by document type — the title's first word when it
  names one: приказ, договор, акт …), then folder by folder each document: title, kind, pages or duration, the
  dates found in it, owner, and when its version was switched in.
- «Хронология событий»: every dated sentence, sorted by date; the same date and sentence found in two versions or
  copies is one entry with both places.
- «Реестр лиц»: persons merged by surname and initials (tasks/meta/names.py), each with its count of mentions and
  every place; a mention that names a surname or a first initial only joins the one person it fits, or is left out
  when several fit.
- «Реестр организаций»: merged by ИНН where one is written beside the name, otherwise by legal form and name; a
  name without ИНН joins the one ИНН entry of the same name.

Each document is cut into parts (`_parts`): its totals first, then whole entries, one part a page, so every chunk is
one part and its address line says what it is: `[Хронология событий · часть 7]`.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from korpus.core.datamodel import NO_ENTRIES, timecode
from tasks.meta.bodies import ooo_as_read
from tasks.meta.dates import spoken
from tasks.meta.facts import OrganisationMention, PersonMention, Place, SourceFacts
from tasks.meta.names import is_nominative_name
from tasks.meta.org_names import body_shown, core_lemmas, formal, nominative_org
from tasks.meta.surnames import plainly_oblique, surname_key

TITLES = {
    "toc": "Оглавление коллекции",
    "chronology": "Хронология событий",
    "persons": "Реестр лиц",
    "organisations": "Реестр организаций",
}
PART_CHARS = 1200
# Bump when the documents' layout or wording changes: every scope is rebuilt at the next refresh.
LAYOUT_VERSION = "layout-2"
MAX_PLACES = 12
DOCUMENT_TYPES = (
    "приказ",
    "распоряжение",
    "договор",
    "соглашение",
    "акт",
    "протокол",
    "письмо",
    "справка",
    "отчёт",
    "отчет",
    "служебная записка",
    "докладная записка",
    "заявление",
    "решение",
    "постановление",
    "положение",
    "инструкция",
    "доверенность",
    "счёт",
    "счет",
    "накладная",
    "стенограмма",
    "интервью",
)
KIND_NAMES = {
    "pdf": "PDF",
    "image": "изображение",
    "djvu": "DjVu",
    "office": "офисный документ",
    "text": "текст",
    "audio": "запись",
}


def _plural(n: int, one: str, few: str, many: str) -> str:
    if n % 10 == 1 and n % 100 != 11:
        return f"{n} {one}"
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return f"{n} {few}"
    return f"{n} {many}"


def _places(places: Sequence[Place]) -> str:
    labels = list(dict.fromkeys(p.label for p in places))
    more = len(labels) - MAX_PLACES
    return "; ".join(labels[:MAX_PLACES]) + (f"; и ещё {more}" if more > 0 else "")


def document_type(title: str) -> str | None:
    lowered = title.lower().lstrip("«\"' ")
    return next((t for t in DOCUMENT_TYPES if lowered.startswith(t)), None)


# --- merging ------------------------------------------------------------------------------------------------


@dataclass
class Event:
    first: str
    last: str
    sentence: str
    places: list[Place] = field(default_factory=list)


def chronology(facts: Iterable[SourceFacts]) -> list[Event]:
    """Dated sentences sorted by date; one entry per (date, sentence) however many places hold it."""
    merged: dict[tuple[str, str, str], Event] = {}
    for fact in facts:
        for item in fact.events:
            key = (item.first, item.last, _fold(item.sentence))
            merged.setdefault(key, Event(item.first, item.last, item.sentence)).places.append(item.place)
    return [merged[k] for k in sorted(merged)]


def _fold(text: str) -> str:
    return " ".join(text.lower().replace("ё", "е").split())


@dataclass
class Person:
    surname: str
    first_initial: str | None
    middle_initial: str | None
    mentions: list[PersonMention] = field(default_factory=list)

    @property
    def shown(self) -> str:
        """The fullest form; among equals, one that can be a nominative («Бабангида», not «Бабангиду») and the
        dictionary's own form («Тихонов» beside «Тихонова»: only a man is written both ways), then the most frequent."""
        forms = Counter(m.shown for m in self.mentions)
        own = lambda m: m.shown.lower().replace("ё", "е").split()[:1] == [self.surname]  # noqa: E731
        best = max(
            self.mentions,
            key=lambda m: (m.fullness, m.certain, not plainly_oblique(m.shown), own(m), forms[m.shown], m.shown),
        )
        return best.shown

    @property
    def variants(self) -> list[str]:
        return sorted({m.shown for m in self.mentions} - {self.shown})


def _fits(mention: PersonMention, key: tuple[str | None, str | None]) -> bool:
    return mention.first_initial in (None, key[0]) and mention.middle_initial in (None, key[1])


def _one_surname(mentions: list[PersonMention]) -> list[PersonMention]:
    """One person written with two surname forms that are case forms of one stem and the same two initials — «Татура
    О. В.» (a genitive, or a nominative of «Татура») and «Татура Остапа Васильевича» (read «Татур Остап Васильевич»),
    «Чамары Д. П.» and «Чамара Денис Петрович» — takes the surname of its fullest mention, so it is one entry."""
    groups: dict[tuple, list[PersonMention]] = defaultdict(list)
    for m in mentions:
        if m.first_initial and m.middle_initial:
            groups[(surname_key(m.surname), m.first_initial, m.middle_initial)].append(m)
    rename: dict[tuple, str] = {}
    alone: dict[str, set[str]] = defaultdict(set)  # a surname form → the surnames its initialled mentions took
    for group in groups.values():
        if len(forms := {m.surname for m in group}) > 1:
            best = max(group, key=lambda m: (m.fullness, m.certain, not plainly_oblique(m.shown), m.surname)).surname
            rename.update(((form, group[0].first_initial, group[0].middle_initial), best) for form in forms)
            for form in forms:
                alone[form].add(best)
    # «Татура» named alone joins «Татур Остап Васильевич» when that is the one person its form was merged into and
    # no other person keeps that form
    kept = {
        m.surname for m in mentions if m.first_initial and (m.surname, m.first_initial, m.middle_initial) not in rename
    }
    rename.update(
        ((form, None, None), next(iter(bests))) for form, bests in alone.items() if len(bests) == 1 and form not in kept
    )
    return [
        replace(m, surname=rename.get((m.surname, m.first_initial, m.middle_initial), m.surname)) if rename else m
        for m in mentions
    ]


def persons(facts: Iterable[SourceFacts]) -> tuple[list[Person], int]:
    """The register, sorted by name, and how many mentions were left out as ambiguous."""
    mentions = _one_surname([m for fact in facts for m in fact.persons])
    by_surname: dict[str, list[PersonMention]] = defaultdict(list)
    for mention in mentions:
        by_surname[mention.surname].append(mention)
    register: list[Person] = []
    ambiguous = 0
    for surname, group in by_surname.items():
        full = {(m.first_initial, m.middle_initial) for m in group if m.first_initial and m.middle_initial}
        people = {key: Person(surname, *key) for key in full}
        for mention in group:
            key = (mention.first_initial, mention.middle_initial)
            if key in people:
                people[key].mentions.append(mention)
                continue
            fits = [k for k in people if _fits(mention, k)]
            if len(fits) == 1:
                people[fits[0]].mentions.append(mention)
            elif not fits and not people and mention.first_initial and not mention.middle_initial:
                people[key] = Person(surname, *key, mentions=[mention])  # «Смирнова А.» alone: an entry of its own
            elif not fits and not people and len({(m.first_initial, m.middle_initial) for m in group}) == 1:
                people[key] = Person(surname, *key, mentions=[mention])  # a surname only, never with initials
            else:
                ambiguous += 1
        register += people.values()
    return sorted(register, key=lambda p: p.shown), ambiguous


@dataclass
class Organisation:
    key: str
    inn: str | None
    ogrn: str | None = None
    mentions: list[OrganisationMention] = field(default_factory=list)

    @property
    def shown(self) -> str:
        """A federal body's full name and abbreviation (tasks/meta/org_names.py); else the most frequent form the
        documents write in the nominative; with none, the most frequent form as written with its head put in the
        nominative where it reads as one (`nominative_org`; OCR's «000» before a quoted name is read «ООО»). An
        all-capitals heading counts after a form in normal case."""
        if federal := body_shown(self.key):
            return federal
        forms = Counter(ooo_as_read(m.name) for m in self.mentions)
        best = max(
            forms, key=lambda name: (is_nominative_name(name), not name.isupper(), forms[name], "«" in name, len(name))
        )
        return best if is_nominative_name(best) else nominative_org(best) or best


def _core(key: str) -> str:
    return key.split(" ", 1)[1] if " " in key and key.split(" ", 1)[0].isupper() else key


def organisations(facts: Iterable[SourceFacts]) -> list[Organisation]:
    mentions = [m for fact in facts for m in fact.organisations]
    by_inn: dict[str, Organisation] = {}
    by_key: dict[str, Organisation] = {}
    for mention in mentions:
        if mention.inn:
            entry = by_inn.setdefault(mention.inn, Organisation(mention.key, mention.inn))
            entry.ogrn = entry.ogrn or mention.ogrn
            entry.mentions.append(mention)
    for mention in mentions:
        if mention.inn:
            continue
        same = [o for o in by_inn.values() if o.key == mention.key] or [
            o for o in by_inn.values() if _core(o.key) == _core(mention.key)
        ]
        if len(same) == 1:  # the one ИНН entry of this name (with its legal form, or by name alone)
            same[0].mentions.append(mention)
        else:
            by_key.setdefault(mention.key, Organisation(mention.key, None)).mentions.append(mention)
    return sorted(_one_body([*by_inn.values(), *by_key.values()]), key=lambda o: o.shown.lower())


def _one_body(entries: list[Organisation]) -> list[Organisation]:
    """Entries of one name written with and without its legal form or quotes, in any case («АО "Омскводоканал"»,
    «"ОмскВодоканал"», «Омскводоканалом»), are one body — unless two legal forms or two ИНН say they are two."""
    groups: dict[tuple[str, ...], list[Organisation]] = defaultdict(list)
    for entry in entries:
        groups[core_lemmas(entry.mentions[0].name) or (entry.key,)].append(entry)
    out: list[Organisation] = []
    for group in groups.values():
        forms = [e for e in group if e.inn or formal(e.mentions[0].name)]
        if len(group) == 1 or len(forms) > 1 or any(e.key.startswith("federal:") for e in group):
            out += group
            continue
        target = forms[0] if forms else group[0]
        target.mentions += [m for e in group if e is not target for m in e.mentions]
        out.append(target)
    return out


# --- rendering ------------------------------------------------------------------------------------------------


def _cut_after(entry: str) -> bool:
    """A content-defined boundary: about one entry in four ends a part, decided by the entry's own text."""
    return hashlib.blake2b(entry.encode(), digest_size=2).digest()[0] % 4 == 0


def _parts(title: str, entries: Sequence[tuple[str, str]], head: str = "") -> list[str]:
    """The head (totals) as part 1, then whole entries packed into parts of at most about PART_CHARS; each part
    opens with what it covers. `entries` are (sort label, text).

    Parts end where an entry's own text says so (`_cut_after`, once a part holds a third of PART_CHARS) or when the
    next entry would overflow it — so an entry added or changed moves the boundaries of its own part only, and a
    rebuild re-embeds the parts that changed, not every part after it."""
    parts: list[list[tuple[str, str]]] = [[]]
    size = 0
    for entry in entries:
        if parts[-1] and size + len(entry[1]) > PART_CHARS:
            parts.append([])
            size = 0
        parts[-1].append(entry)
        size += len(entry[1]) + 1
        if size >= PART_CHARS // 3 and _cut_after(entry[1]):
            parts.append([])
            size = 0
    parts = [part for part in parts if part]
    out = [f"{title}: сводка.\n{head}" if head else f"{title}: сводка."]
    for part in parts:
        span = f"{part[0][0]} — {part[-1][0]}"
        out.append("\n".join([f"{title}: {span.rstrip('.')}.", *(text for _, text in part)]))
    if not parts:
        out[0] += f"\n{NO_ENTRIES}"
    return out


def toc_text(facts: Sequence[SourceFacts], events: Sequence[Event]) -> list[str]:
    kinds = Counter(KIND_NAMES.get(f.kind or "", f.kind or "?") for f in facts)
    types = Counter(t for t in (document_type(f.title) for f in facts) if t)
    pages = sum(f.pages for f in facts)
    seconds = sum(f.seconds or 0 for f in facts)
    head = [
        "Документы коллекции по папкам: названия, виды, даты, владельцы.",
        f"Всего документов в коллекции: {len(facts)} ("
        + ", ".join(f"{k} — {n}" for k, n in sorted(kinds.items()))
        + f"); страниц: {pages}"
        + (f"; записей общей длительностью {timecode(seconds)}" if seconds else "")
        + ".",
    ]
    if types:
        head.append("По видам документов: " + ", ".join(f"{t} — {n}" for t, n in sorted(types.items())) + ".")
    folders: dict[str, list[SourceFacts]] = defaultdict(list)
    for fact in facts:
        folders[fact.folder].append(fact)
    head.append(
        "Папок: "
        + str(len(folders))
        + ": "
        + ", ".join(f"«{folder or 'корень'}» — {len(items)}" for folder, items in sorted(folders.items()))
        + "."
    )
    dates: dict[str, list[str]] = defaultdict(list)
    for event in events:
        for place in event.places:
            dates[place.source_id] += [event.first, event.last]
    entries = []
    for folder, items in sorted(folders.items()):
        label = f"«{folder or 'корень'}»"
        count = _plural(len(items), "документ", "документа", "документов")
        for number, fact in enumerate(sorted(items, key=lambda f: f.source_id)):
            line = _toc_line(fact, sorted(dates.get(fact.source_id, [])))
            entries.append((label, f"Папка «{folder or 'корень'}» — {count}:\n{line}" if number == 0 else line))
    return _parts(TITLES["toc"], entries, head="\n".join(head))


def _toc_line(fact: SourceFacts, dates: list[str]) -> str:
    size = timecode(fact.seconds) if fact.seconds is not None else f"{fact.pages} стр."
    fields = [f"{KIND_NAMES.get(fact.kind or '', fact.kind)}, {size}"]
    if dates:
        fields.append(f"даты: {dates[0]} – {dates[-1]}" if dates[0] != dates[-1] else f"дата: {dates[0]}")
    fields.append(f"владелец: {fact.owner}")
    if fact.switched_at:
        fields.append(f"в корпусе с {fact.switched_at[:10]}")
    return f"- {fact.source_id} — «{fact.title or fact.file_name}»; " + "; ".join(fields) + "."


def chronology_text(events: Sequence[Event]) -> list[str]:
    entries = []
    for event in events:
        single = event.first == event.last
        when = spoken(event.first) if single else f"{spoken(event.first)} – {spoken(event.last)}"
        iso = event.first if single else f"{event.first} – {event.last}"
        entries.append((event.first, f"- {when} ({iso}): {event.sentence} [{_places(event.places)}]"))
    head = f"События из документов коллекции по датам, от ранних к поздним. Датированных событий: {len(events)}."
    return _parts(TITLES["chronology"], entries, head=head)


def persons_text(register: Sequence[Person], ambiguous: int) -> list[str]:
    entries = []
    for person in register:
        also = f" (также: {', '.join(person.variants)})" if person.variants else ""
        count = _plural(len(person.mentions), "упоминание", "упоминания", "упоминаний")
        entries.append(
            (person.shown, f"- {person.shown}{also} — {count}: {_places([m.place for m in person.mentions])}.")
        )
    head = f"Люди (лица), упомянутые в документах коллекции, и где о них сказано. Лиц в реестре: {len(register)}." + (
        f" Упоминаний, не отнесённых ни к кому (неоднозначно): {ambiguous}." if ambiguous else ""
    )
    return _parts(TITLES["persons"], entries, head=head)


def organisations_text(register: Sequence[Organisation]) -> list[str]:
    entries = []
    for org in register:
        ids = "".join([f", ИНН {org.inn}" if org.inn else "", f", ОГРН {org.ogrn}" if org.ogrn else ""])
        names = sorted({m.name for m in org.mentions} - {org.shown})
        also = f" (также: {', '.join(names)})" if names else ""
        count = _plural(len(org.mentions), "упоминание", "упоминания", "упоминаний")
        entries.append((org.shown, f"- {org.shown}{ids}{also} — {count}: {_places([m.place for m in org.mentions])}."))
    head = (
        f"Организации (компании, контрагенты, учреждения), упомянутые в документах коллекции, с ИНН и ОГРН, где "
        f"они указаны. Организаций в реестре: {len(register)}."
    )
    return _parts(TITLES["organisations"], entries, head=head)


def meta_texts(facts: Sequence[SourceFacts]) -> dict[str, list[str]]:
    """kind → the parts of that meta-document, from the facts of one scope's sources."""
    events = chronology(facts)
    register, ambiguous = persons(facts)
    return {
        "toc": toc_text(facts, events),
        "chronology": chronology_text(events),
        "persons": persons_text(register, ambiguous),
        "organisations": organisations_text(organisations(facts)),
    }

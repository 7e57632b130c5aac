"""Meta-documents: date rules, and the code that merges, sorts and renders (no NER model here)."""

from __future__ import annotations

import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import address_line
from tasks.meta.dates import find_dates, spoken
from tasks.meta.documents import PART_CHARS, _parts, chronology, document_type, organisations, persons
from tasks.meta.facts import DatedSentence, OrganisationMention, PersonMention, Place, SourceFacts
from tasks.meta.publish import meta_kind, meta_source_id

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Приказ от 12 марта 2023 г. № 5", [("2023-03-12", "2023-03-12")]),
        ("с 1 по 5 марта 2001 г. шла проверка", [("2001-03-01", "2001-03-05")]),
        ("1–5 мая 2001 года", [("2001-05-01", "2001-05-05")]),
        ("срок с 12.03.2023 по 15.03.2023", [("2023-03-12", "2023-03-15")]),
        ("в марте 1998 года", [("1998-03", "1998-03")]),
        ("в мае 2005 г. и 3 мая 2005 года", [("2005-05", "2005-05"), ("2005-05-03", "2005-05-03")]),
        ("в 1998 году, затем в 2001–2003 гг.", [("1998", "1998"), ("2001", "2003")]),
        ("дата 2023-03-12", [("2023-03-12", "2023-03-12")]),
        ("31.02.2020 и 1998 штук и 5000 г. груза", []),  # no such day; a bare number; no such year
        ("Договор № 45-17/2023 г. от 1 апреля 2023 г.", [("2023-04-01", "2023-04-01")]),
    ],
)
def test_dates_are_found_and_normalised(text: str, found: list[tuple[str, str]]) -> None:
    assert [(m.first, m.last) for m in find_dates(text)] == found


def test_dates_read_aloud() -> None:
    assert [spoken(d) for d in ("2023-03-12", "1998-03", "2001")] == ["12 марта 2023", "март 1998", "2001"]


def _facts(source_id: str, **lists: list) -> SourceFacts:
    return SourceFacts(
        source_id=source_id,
        version="v",
        kind="text",
        title="Приказ № 1",
        pages=1,
        owner="o",
        access="public",
        tenant="default",
        **lists,
    )


def _person(surname: str, first: str | None, middle: str | None, shown: str, fullness: int, page: int = 1):
    return PersonMention(
        surname=surname,
        first_initial=first,
        middle_initial=middle,
        shown=shown,
        fullness=fullness,
        certain=fullness > 2,
        place=Place(source_id="a.txt", page=page),
    )


def test_persons_merge_by_surname_and_initials_and_ambiguous_mentions_are_counted() -> None:
    mentions = [
        _person("смирнов", "Е", "В", "Смирнова Е. В.", 2),
        _person("смирнов", "Е", "В", "Смирнова Елена Викторовна", 6, page=2),
        _person("смирнов", "Е", None, "Смирнова Е.", 1),  # fits the one Е. В.
        _person("иванов", "П", "С", "Иванов П. С.", 2),
        _person("иванов", "А", "Н", "Иванов А. Н.", 2),
        _person("иванов", None, None, "Иванов", 0),  # two Ивановы: ambiguous
        _person("петров", None, None, "Петров", 0),  # the only Петров, never with initials
    ]
    register, ambiguous = persons([_facts("a.txt", persons=mentions)])
    assert [p.shown for p in register] == ["Иванов А. Н.", "Иванов П. С.", "Петров", "Смирнова Елена Викторовна"]
    smirnova = register[-1]
    assert len(smirnova.mentions) == 3 and smirnova.variants == ["Смирнова Е.", "Смирнова Е. В."]
    assert ambiguous == 1


def test_organisations_merge_by_inn_and_a_name_without_inn_joins_its_entry() -> None:
    def org(key: str, name: str, inn: str | None) -> OrganisationMention:
        return OrganisationMention(key=key, name=name, inn=inn, ogrn=None, place=Place(source_id="a.txt", page=1))

    merged = organisations(
        [
            _facts(
                "a.txt",
                organisations=[
                    org("ООО ромашка", "ООО «Ромашка»", "7707083893"),
                    org("ООО ромашка", "Общество с ограниченной ответственностью «Ромашка»", "7707083893"),
                    org("ООО ромашка", "ООО «Ромашка»", None),
                    org("АО ромашка", "АО «Ромашка»", "5330445293"),  # another company of the same name: its own ИНН
                    org("АО волга", "АО «Волга»", None),
                ],
            )
        ]
    )
    assert [(o.shown, o.inn, len(o.mentions)) for o in merged] == [
        ("АО «Волга»", None, 1),
        ("АО «Ромашка»", "5330445293", 1),
        ("ООО «Ромашка»", "7707083893", 3),
    ]


def test_chronology_merges_the_same_event_from_two_places_and_sorts_by_date() -> None:
    def dated(first: str, sentence: str, source: str) -> DatedSentence:
        return DatedSentence(first=first, last=first, sentence=sentence, place=Place(source_id=source, page=1))

    events = chronology(
        [
            _facts(
                "a.txt", events=[dated("2001-03-12", "Проверка  склада.", "a.txt"), dated("1998", "Ремонт.", "a.txt")]
            ),
            _facts("b.txt", events=[dated("2001-03-12", "проверка склада.", "b.txt")]),
        ]
    )
    assert [(e.first, len(e.places)) for e in events] == [("1998", 1), ("2001-03-12", 2)]


def test_parts_hold_whole_entries_and_say_what_they_cover() -> None:
    entries = [(f"2001-01-{n:02d}", f"- событие {n} " + "слово " * 40) for n in range(1, 29)]
    parts = _parts("Хронология событий", entries, head="Датированных событий: 28.")
    assert parts[0] == "Хронология событий: сводка.\nДатированных событий: 28."
    assert len(parts) > 2 and parts[1].startswith("Хронология событий: 2001-01-01 — ")
    assert all(len(p) <= PART_CHARS + 80 for p in parts)
    assert sum(p.count("- событие ") for p in parts) == 28


def test_an_added_entry_changes_only_the_parts_around_it() -> None:
    entries = [(f"{n:03d}", f"- запись {n}: " + "текст " * 25) for n in range(200)]
    before = _parts("Реестр лиц", entries, head="Лиц в реестре: 200.")
    after = _parts(
        "Реестр лиц",
        [*entries[:100], ("100a", "- новая запись " + "текст " * 25), *entries[100:]],
        head="Лиц в реестре: 201.",
    )
    changed = set(after) - set(before)
    assert len(before) > 15 and len(changed) <= 4  # the totals, its part, up to two more until a boundary re-aligns


def test_meta_ids_and_address_lines() -> None:
    source_id = meta_source_id("default", "hr", "persons")
    assert source_id == "korpus://meta/hr/Реестр лиц" and meta_kind(source_id) == "persons"
    assert meta_source_id("acme", "public", "toc") == "korpus://meta/acme/public/Оглавление коллекции"
    assert meta_kind("приказы/приказ_01.txt") is None
    source = Source(source_id=source_id, version="v", path=source_id, kind=SourceKind.meta, owner="korpus", access="hr")
    page = PageResult(source_id=source_id, source_version="v", page=7, text="…", method="meta")
    assert address_line(source, page, None) == "[Реестр лиц · часть 7]"


def test_document_types_from_titles() -> None:
    assert [document_type(t) for t in ("Приказ № 5", "«Договор поставки»", "Служебная записка", "Итоги")] == [
        "приказ",
        "договор",
        "служебная записка",
        None,
    ]

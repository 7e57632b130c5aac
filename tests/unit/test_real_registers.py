"""The registers on real documents (eval/registers: the served text of 35 real third-party files and hand labels of
the persons and organisations each names): measured, and the failures seen on real folders held as rules."""

from __future__ import annotations

import pytest

from corpora.real_registers import (
    HELD_OUT_LABELS,
    HELD_OUT_TEXTS,
    load_labels,
    load_texts,
    org_matches,
    person_matches,
    registers_of,
    score,
)
from korpus.core.datamodel import PageResult, Source
from tasks.meta.documents import organisations, persons
from tasks.meta.facts import extract_facts

pytestmark = pytest.mark.unit


def _registers(*texts: str) -> tuple[list[str], list[str]]:
    facts = []
    for number, text in enumerate(texts):
        source = Source(source_id=f"протоколы/{number}.txt", version="0" * 64, path="-", kind="text", owner="a",
                        access="public")  # fmt: skip
        page = PageResult(source_id=source.source_id, source_version="0" * 64, page=1, text=text, method="chunks")
        facts.append(extract_facts(source, [page]))
    return [p.shown for p in persons(facts)[0]], [o.shown for o in organisations(facts)]


def test_the_real_labels_are_measured_and_hold_the_figures_reached() -> None:
    """A floor at what this version reaches (docs/meta.md gives the figures and the issue's goal): a change that
    makes the registers worse on real documents fails here."""
    texts, labels = load_texts(), load_labels()
    assert len(texts) == len(labels) >= 30
    result = score(registers_of(texts), labels)
    assert result["persons"]["labelled"] >= 100 and result["organisations"]["labelled"] >= 70
    assert result["persons"]["precision"] >= 0.9 and result["persons"]["recall"] >= 0.8, result["persons"]
    assert result["organisations"]["precision"] >= 0.9 and result["organisations"]["recall"] >= 0.8, result[
        "organisations"
    ]


def test_the_held_out_labels_are_measured_and_hold_their_first_score() -> None:
    """eval/registers/held-out: 9 real documents labelled after the meta-3 rules were written; the floor is the score
    they got the first time (docs/meta.md), so a change that loses ground on text nobody tuned for fails here."""
    texts, labels = load_texts(HELD_OUT_TEXTS), load_labels(HELD_OUT_LABELS)
    assert len(texts) == len(labels) == 9
    result = score(registers_of(texts), labels)
    assert result["persons"]["precision"] >= 0.86 and result["persons"]["recall"] >= 0.43, result["persons"]
    assert result["organisations"]["precision"] >= 0.85 and result["organisations"]["recall"] >= 0.47, result[
        "organisations"
    ]


def test_the_scorer_itself() -> None:
    assert person_matches("С.А. Тырцев", "Тырцев С. А.") and person_matches("Тырцев Сергей", "Тырцев С. А.")
    assert not person_matches("Фёдорова А. И.", "Федорова А. И.")  # a spelling no document uses is wrong
    assert not person_matches("Тырцев Б.", "Тырцев С. А.")
    assert org_matches("Минюстом России", "Минюст России") and not org_matches("Минюст", "Минюст России")


def test_a_person_written_in_full_is_never_lost_and_is_shown_as_written() -> None:
    shown, _ = _registers(
        "Присутствовали: Сергей Николаевич Лапин, Федорова А. И. Решили: поручить Лапину С. Н. подготовить отчёт.",
        "С. Н. Лапину направить письмо. Ответственная — Федорова А. И.",
    )
    assert "Лапин Сергей Николаевич" in shown and not any(s.startswith("Лапину") for s in shown)
    assert "Федорова А. И." in shown and not any("Фёдоров" in s for s in shown)


def test_organisations_need_evidence_and_latin_names_are_persons() -> None:
    shown, orgs = _registers(
        "Запрос уходит через API POST в runtimeArgs. ООО ООО ООО ООАЫ. ТОВАРНАЯ НАКЛАДНАЯ Но- Единица Товар.\n"
        "Сумма торгового сбора. Модель обучена на NVIDIA. Письмо от Alf Karlsson получено.\n"
        "Договор с ООО «Ромашка» (ИНН 7707083893) согласован Минюстом России и Правительством Российской Федерации.",
    )
    assert "Karlsson Alf" in shown or "Alf Karlsson" in shown
    assert sorted(orgs) == ["Минюстом России", "ООО «Ромашка»", "Правительством Российской Федерации"], orgs


def test_a_reference_list_is_not_mined_for_names() -> None:
    shown, _ = _registers("Отчёт подготовил Петров И. И.\nСписок литературы\n1. Graves A., Collobert R. Speech, 2013.\n"
                          "2. Иванов С. С. Распознавание речи. М., 2019.")  # fmt: skip
    assert shown == ["Петров И. И."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Продавец 000 "Торговый дом "Комплексный"\nСчет-оферта № 5', 'ООО "Торговый дом "Комплексный"'),
        ("Покупатель ООО «Кафе-кондитерская «Зефир»», ИНН 7707083893.", "ООО «Кафе-кондитерская «Зефир»»"),
        ("заявил гендиректор ЗАО “Управляющая компания “Кузбассразрезуголь” Серго Курбанов.",
         "ЗАО “Управляющая компания “Кузбассразрезуголь”"),
        ("Контроль осуществляется Федеральной службой по надзору в сфере связи, информационных технологий и "
         "массовых коммуникаций и ее территориальными органами.",
         "Федеральной службой по надзору в сфере связи, информационных технологий и массовых коммуникаций"),
        ("84. | Территориальный орган Федеральной службы государственной статистики по Чеченской Республике | "
         "г. Грозный", "Территориальный орган Федеральной службы государственной статистики по Чеченской Республике"),
        ("Принят Государственной Думой 8 июля 2006 года. Одобрен Советом Федерации 14 июля 2006 года.",
         "Государственной Думой"),
        ("с Европейским банком реконструкции и развития (ЕБРР)", "Европейским банком реконструкции и развития"),
        ("сказал представитель компании РКС Михаил Матыцин.", "РКС"),
    ],
)  # fmt: skip
def test_organisation_names_as_real_documents_write_them(text: str, expected: str) -> None:
    """Nested and OCR'd quotes, «000» for «ООО», a body inside a territorial body, a name with a comma in it, a
    chamber named by its head alone, an adjective in the instrumental, an abbreviation after «компании»."""
    _, orgs = _registers(text)
    assert expected in orgs, orgs


def test_what_ends_an_organisations_name() -> None:
    """A person's first name after the body, a quote that closes the name it follows, a list of other things."""
    _, orgs = _registers(
        "Участники – член правления ЕВП, президент Национального центра по развитию частно-государственных "
        'партнерств Александр Баженов. Глава компании "Евразийское водное партнерство" Сергей Яшечкин заявил '
        'вчера, что, по сути, "рейтинг получило партнерство". Уведомить Министерство Российской Федерации по '
        "развитию Дальнего Востока, иных субъектов персональных данных.",
    )
    assert "Национального центра по развитию частно-государственных партнерств" in orgs, orgs
    assert not any("Яшечкин" in o or "Александр" in o or "иных" in o for o in orgs), orgs


def test_a_double_surname_declines_in_both_parts() -> None:
    shown, _ = _registers("150 лет со дня рождения писателя Николая Георгиевича Гарина- Михайловского (1852-1906).")
    assert "Гарин-Михайловский Николай Георгиевич" in shown, shown

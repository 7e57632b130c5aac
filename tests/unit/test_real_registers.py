"""The registers on real documents (eval/registers: the served text of 35 real third-party files and hand labels of
the persons and organisations each names): measured, and the failures seen on real folders held as rules."""

from __future__ import annotations

import pytest

from corpora.real_registers import (
    HELD_OUT_LABELS,
    HELD_OUT_TEXTS,
    held_out,
    load_labels,
    load_texts,
    org_matches,
    person_matches,
    registers_of,
    score,
)
from korpus.core.datamodel import PageResult, Source
from tasks.meta.bodies import _LATIN_PERSON, genitive_tail, named_institution, quoted_alone
from tasks.meta.documents import organisations, persons
from tasks.meta.facts import extract_facts
from tasks.meta.foreign import first_then_name
from tasks.meta.names import person_name
from tasks.meta.one_name import in_table_row, may_be_a_name
from tasks.meta.surnames import unknown_surname

pytestmark = pytest.mark.unit


def _registers(*texts: str) -> tuple[list[str], list[str]]:
    facts = []
    for number, text in enumerate(texts):
        source = Source(
            source_id=f"протоколы/{number}.txt", version="0" * 64, path="-", kind="text", owner="a", access="public"
        )
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


def test_the_held_out_labels_are_measured_and_hold_their_score() -> None:
    """eval/registers/held-out: 9 real documents labelled after the meta-3 rules were written. Session 15 read their
    misses to write the lone-surname rule (tasks/meta/surnames.py), so they are development data now; the floor is
    what this version reaches on them (0.867 / 0.591 persons, 1.0 / 0.474 organisations)."""
    texts, labels = load_texts(HELD_OUT_TEXTS), load_labels(HELD_OUT_LABELS)
    assert len(texts) == len(labels) == 9
    result = score(registers_of(texts), labels)
    assert result["persons"]["precision"] >= 0.86 and result["persons"]["recall"] >= 0.59, result["persons"]
    assert result["organisations"]["precision"] >= 0.85 and result["organisations"]["recall"] >= 0.47, result[
        "organisations"
    ]


# (texts, labels, documents, persons and organisations labelled, floors: persons precision / recall, organisations
# precision / recall) of each later held-out set, and where its floor comes from:
# - held-out-2: 33 real files (mostly OCR'd scans) labelled before session 15 changed any rule; first score 0.655 /
#   0.655 persons, 0.935 / 0.543 organisations. Session 16 read its misses to write the scan and table rules
#   (tasks/meta/scanned.py, initials.py, ОКОПФ forms): development data now, the floor is what this version reaches.
# - held-out-3: 17 real files no set used and 24 XQuAD-ru passages, labelled before session 16 changed any rule; scored
#   once after the scan rules (0.610 / 0.615, 0.200 / 0.071), then its misses were read to write the encyclopedia rules
#   (tasks/meta/foreign.py, bodies' «Центр», «совет», «общество»): development data now, the floor is this version's.
# - held-out-4: 24 XQuAD-ru passages labelled before the rules written from the third set's misses; first score 0.474
#   / 0.429 persons, 0.889 / 0.333 organisations. Session 17 read its misses to write the one-name, institution and
#   Western-order rules (tasks/meta/one_name.py, bodies.named_institution, foreign.first_then_name): development data
#   now, the floor is this version's.
# - held-out-5: 48 XQuAD-ru passages labelled before those rules; first score 0.508 / 0.462, 0.750 / 0.229 (meta-7).
#   Its misses were then read to write meta-8 (Western names in oblique cases, Arabic names, a body's genitive tail):
#   development data now, the floor is this version's.
# - held-out-6: 48 XQuAD-ru passages labelled before meta-8; first score 0.519 / 0.549, 0.821 / 0.306 (meta-8). Its
#   misses were read to write meta-9 (unknown first names, Chinese order, a Latin name after «компания»):
#   development data now, the floor is this version's.
# - held-out-7: 48 XQuAD-ru passages labelled before meta-9; first score 0.545 / 0.562, 0.842 / 0.232 (meta-9). Its
#   misses were read to write meta-10 (Latin names: a person only with a first name or an initial, else a firm;
#   known international abbreviations; Latin legal forms after a comma): development data now, the floor is this
#   version's. Session 18 lowered the fifth set's organisation precision floor from 0.89 to 0.88: meta-10 took
#   «ABC Circle» there beside six more true bodies (recall 0.354 → 0.479).
# - held-out-8: 48 XQuAD-ru passages labelled before meta-10 and scored once after: the floor is that first score
#   (docs/meta.md; 0.722 / 0.664, 0.778 / 0.377 with meta-9).
# - held-out-9: the unseen middles of 12 real documents (session 28), labelled before korpus's registers of them were
#   looked at and scored once — persons 1.0 / 1.0, organisations 0.833 / 0.464 — then its misses were read to write
#   meta-12 (a ministry's departments, «Госкомстат России», «университет технологии и дизайна»): development data
#   now, the floor is this version's (0.909 / 0.643).
# - held-out-10: one more unseen window of 15 of those documents (session 29), labelled before korpus's registers of
#   them were looked at and scored once with meta-12 — persons 0.667 / 0.667 (3 people), organisations 0.857 / 0.706 —
#   then its misses were read to write meta-13 (a newspaper, «ИА Regnum», pymorphy's Orgn words and «Рос…» agencies,
#   «управления делами», a portal's quoted name, an initial before a title): development data now, this version's
#   floor (1.0 / 1.0, 1.0 / 0.941).
# - held-out-11: the windows at a sixth and five sixths of the same middles (session 29), labelled before korpus's
#   registers of them were looked at and scored once with meta-13 — persons 0.900 / 0.818, organisations
#   0.867 / 0.676 — then read to write meta-14: development data now, this version's floor (0.9 / 0.81, 0.96 / 0.78).
# - held-out-12: the windows at 1/12, 5/12, 7/12 and 11/12 of ten of those middles (session 29), labelled before
#   korpus's registers of them were looked at and scored once with meta-14 — persons 1.0 / 1.0 (2 people),
#   organisations 0.857 / 0.708 — then read to write meta-15 and meta-16 (session 30: abbreviations korpus knows,
#   «(далее ГАК)» defined, «агентство Moody’s»): development data now, this version's floor.
# - held-out-13: the windows at a quarter and three quarters of those middles (session 30), labelled before korpus's
#   registers of them were looked at and scored once with meta-16 — persons 0.714 / 0.750 (8 people), organisations
#   0.950 / 0.679 — then read to write meta-17: development data now, this version's floor.
# - held-out-14: the windows at 1/8, 3/8, 5/8 and 7/8 of the five longest middles (session 30), labelled before
#   korpus's registers of them were looked at and scored once with meta-17 — persons 0.333 / 0.500 (2 people),
#   organisations 0.714 / 0.625 — then read to write meta-18: development data now, this version's floor.
# Session 27 (meta-11, one entry per body) lowered the second set's organisation precision floor from 0.93 to 0.92:
# the same 3 wrong entries among 40, where 43 held three right bodies twice («"ОмскВодоканал"» beside
# «Омскводоканал»); precision is counted over entries, so merging right duplicates lowers it.
HELD_OUT_FLOORS = {
    "held-out-2": (*held_out(2), 33, 29, 46, (0.83, 0.86, 0.92, 0.76)),
    "held-out-3": (*held_out(3), 41, 39, 14, (0.70, 0.76, 0.64, 0.64)),
    "held-out-4": (*held_out(4), 24, 21, 24, (0.60, 0.66, 0.94, 0.66)),
    "held-out-5": (*held_out(5), 48, 65, 48, (0.66, 0.61, 0.88, 0.47)),
    "held-out-6": (*held_out(6), 48, 71, 72, (0.59, 0.59, 0.88, 0.52)),
    "held-out-7": (*held_out(7), 48, 64, 69, (0.58, 0.56, 0.90, 0.56)),
    "held-out-8": (*held_out(8), 48, 125, 53, (0.72, 0.66, 0.82, 0.52)),
    "held-out-9": (*held_out(9), 24, 5, 28, (1.0, 1.0, 0.90, 0.64)),
    "held-out-10": (*held_out(10), 15, 3, 17, (1.0, 1.0, 1.0, 0.94)),
    "held-out-11": (*held_out(11), 30, 11, 37, (0.9, 0.81, 0.96, 0.78)),
    "held-out-12": (*held_out(12), 40, 2, 48, (1.0, 1.0, 0.93, 0.87)),
    "held-out-13": (*held_out(13), 20, 8, 28, (1.0, 0.87, 0.96, 0.85)),
    "held-out-14": (*held_out(14), 20, 2, 16, (1.0, 1.0, 1.0, 1.0)),
}


@pytest.mark.parametrize("name", sorted(HELD_OUT_FLOORS))
def test_each_later_held_out_set_is_measured_and_holds_its_floor(name: str) -> None:
    texts_path, labels_path, documents, persons_labelled, organisations_labelled, floors = HELD_OUT_FLOORS[name]
    texts, labels = load_texts(texts_path), load_labels(labels_path)
    assert len(texts) == len(labels) == documents
    result = score(registers_of(texts), labels)
    assert result["persons"]["labelled"] == persons_labelled
    assert result["organisations"]["labelled"] == organisations_labelled
    person_precision, person_recall, organisation_precision, organisation_recall = floors
    assert result["persons"]["precision"] >= person_precision, result["persons"]
    assert result["persons"]["recall"] >= person_recall, result["persons"]
    assert result["organisations"]["precision"] >= organisation_precision, result["organisations"]
    assert result["organisations"]["recall"] >= organisation_recall, result["organisations"]


def test_names_as_encyclopedias_write_them() -> None:
    """Session 16's rules from the third held-out set: a ruler's number, a first name before one initial, a word at a
    sentence's middle that only begins a dictionary word is no cut word, a place after a body, a quoted title."""
    shown, orgs = _registers(
        "Положения эдикта оставались в силе до начала правления Людовика XIV. После отставки Раджендры К. Пачаури "
        "председателем стал Николас Э. Головин. Комитет под руководством Николаса Э. Головина работал год.",
        "Королевское географическое общество Лондона спонсировало исследователей. Он опубликовал "
        "комментарий к «Посланию Галатам». Члены Центра пилотируемых космических полетов выступили в поддержку.",
    )
    for person in ("Людовик XIV", "Пачаури Раджендра К.", "Головин Николас Э."):
        assert person in shown, (person, shown)
    assert not any(s.startswith(("Головина", "Раджендр")) for s in shown), shown
    assert "Королевское географическое общество Лондона" in orgs, orgs
    assert any(o.startswith("Центр пилотируемых") for o in orgs) and not any("Галатам" in o for o in orgs), orgs
    assert unknown_surname("Лютера", may_be_cut=False) and not unknown_surname("Распоряже")


def test_people_by_one_name_institutions_and_western_names() -> None:
    """Session 17's rules, from the fourth held-out set's misses: a person the tagger names twice by one name, an
    institution NER marks by an adjective and its head or by its head and genitives, a foreign surname the dictionary
    reads as a first name, a calling before a name; and what they must not take."""
    shown, orgs = _registers(
        "Когда Тэмуджин вернулся, Джамуха уже ушёл. Позже Тэмуджина избрали ханом. Бортэ ждала его, и Бортэ дождалась.",
        "Архитектор Готфрид Земпер предложил проект. Экономист Бранко Миланович писал о неравенстве.",
        "Он вырос в семье, близкой к Англиканской церкви, и выступал в Большом театре. Основными партиями штата "
        "являются Либеральная партия Австралии и Национальная партия. Запрет подтверждён решением Верховного суда "
        "США. В Европе для Североамериканского театра Семилетней войны есть другое название.",
        "Исполнитель обязан передать товар. Исполнитель отвечает за качество. Первая партия товара принята.",
        "Наименование | Исполнитель\nАкт | Исполнитель\nСчёт | Исполнитель",
        "Анна Петрова пришла рано. Позже Анна ушла, и Анна вернулась.",
    )
    for person in ("Тэмуджин", "Бортэ", "Земпер Готфрид"):
        assert person in shown, (person, shown)
    assert not any(s.startswith(("Тэмуджина", "Исполнител", "Анна", "Экономист", "Архитектор")) for s in shown), shown
    for org in ("Англиканская церковь", "Либеральная партия Австралии", "Верховный суд США"):
        assert org in orgs, (org, orgs)
    assert not any("Североамерикан" in o or o.startswith("Первая партия") for o in orgs), orgs
    # the parts: a defined term, a place's adjective and a table cell are no one-name person; a theatre of war and a
    # quoted style are no institution
    assert may_be_a_name("Тэмуджин") and may_be_a_name("Аристотеля") and may_be_a_name("Мэннинга")
    assert not any(map(may_be_a_name, ("Исполнителя", "Быстринского", "Доктор", "Твери")))
    assert in_table_row("Акт | Исполнитель\nИтого", "Исполнитель") and not in_table_row(
        "Акт, Исполнитель", "Исполнитель"
    )
    war = "для Североамериканского театра Семилетней войны"
    assert not named_institution(war, 4, war.index(" Семилетней"))
    quoted = 'примером "Польского монументального театра".'
    assert not named_institution(quoted, 10, quoted.index('".'))
    museum = "в Музей Виктории и Альберта пришли"
    assert named_institution(museum, 2, museum.index(" пришли"))


def test_western_and_arabic_names_schools_and_bodies_by_their_tail() -> None:
    """Session 17's rules from the fifth held-out set's misses: a foreign man's surname in the first name's case put in
    the nominative by its ending; an Arabic name as written; a Latin street or service is no person; a body's lower-case
    genitives and «по …» phrase are part of its name, «по адресу» is not."""
    cases = {
        "Джеймсу Дьюару": "Дьюар Джеймс",
        "Ференца Деака": "Деак Ференц",
        "Уолтером Нетшем": "Нетш Уолтер",
        "Райнером Шёделем": "Шёдель Райнер",
        "Эдвард Даррелл Стоун": "Стоун Эдвард Даррелл",
        "Марии Кюри": "Кюри Мария",
        "Александра Паляницу": "Паляница Александр",
        "Ибн Сина": "Ибн Сина",
        "аль-Маридини": "Аль-Маридини",
        "Абу Бакр Мухаммад ибн Закария Ар-Рази (Разес": "Абу Бакр Мухаммад ибн Закария Ар-Рази",
    }
    for span, shown in cases.items():
        name = person_name(span)
        assert name is not None and name.shown == shown, (span, name)
    assert person_name("Иван Петрович") is None and person_name("Сергей Николаевич Лапин").shown.startswith("Лапин")
    assert person_name("Жана Батиста МОЛЬЕРА").shown.startswith("Мольер")  # the capitals read, not «Батист Жан»
    assert first_then_name("Иоанны Хмелевской") is None  # an adjective's surname in the name's case: names.py reads it
    assert not _LATIN_PERSON.match("Konwiktorska Street") and _LATIN_PERSON.match("Alex Graves")
    text = "Гарвардская школа общественного здравоохранения и Центральный совет по вопросам среднего образования."
    assert genitive_tail(text, len("Гарвардская школа")) == text.index(" и Центральный")
    at = text.index("Центральный совет") + len("Центральный совет")
    assert genitive_tail(text, at) == len(text) - 1
    address = "Городская больница по адресу: ул. Ленина"
    assert genitive_tail(address, len("Городская больница")) == len("Городская больница")
    party = "за Партии национального единства, а"
    assert named_institution(party, 3, party.index(","))


def test_unknown_first_names_chinese_order_and_companies_after_their_word() -> None:
    """Session 17's rules from the sixth held-out set's misses: a first name the dictionary does not know before a
    foreign surname; a Chinese surname first; a surname beside one initial put in the nominative by its ending; a
    Latin name after «компания», «фирма»; «Издательство …» as a body's head."""
    cases = {
        "Пейтон Мэннинг": "Мэннинг Пейтон",
        "Гульельмо Маркони": "Маркони Гульельмо",
        "Лю Бинчжун": "Лю Бинчжун",
        "Уильяма Э. Саймона": "Саймон Уильям Э.",
        "Гийом Фарель": "Фарель Гийом",
    }
    for span, shown in cases.items():
        name = person_name(span)
        assert name is not None and name.shown == shown, (span, name)
    for span in ("Эдикт Фонтенбло", "Джареда Аллена"):  # a common word; a genitive the Russian reading takes
        assert first_then_name(span) is None, span
    _, orgs = _registers(
        "В 2004 году компания Marconi спроектировала систему. Проект вела фирма Skidmore, Owings & Merrill. "
        "Книгу выпустило Издательство Чикагского университета, а компании Microsoft, Google и Apple отказались."
    )
    for org in ("Marconi", "Skidmore, Owings & Merrill", "Издательство Чикагского университета", "Microsoft"):
        assert org in orgs, (org, orgs)
    assert not any(o.startswith("Microsoft,") for o in orgs), orgs


def test_names_as_scans_and_tables_write_them() -> None:
    """Session 16's rules, from the second held-out set's misses: a full name over a table row's cells, OCR's Latin
    look-alikes in legal forms and initials, ОКОПФ abbreviations, two signatures side by side, a street, a numbered
    heading, a body in lower case, a quoted club."""
    shown, orgs = _registers(
        "Фамилия | Имя | Отчество\nИванов | Иван | Иванович\nПетров | Пётр | Петрович",
        "OOO «Тройка» № 5\nMOO «Общество охотников»\nв АКБ «Надежный»\nКГАУ «КРИТБИ» и МКП «УКС»\nA.C. Глебова",
        "О.В. Пургина И.И. Сидоров\nПроживает: ул. Коптева, д. 1\nШ. Применение корректирующих поправок\n"
        "Письмо направлено в администрации Пушкинского муниципального района Московской области.",
    )
    for person in ("Иванов Иван Иванович", "Петров Пётр Петрович", "Глебова А. С.", "Пургина О. В.", "Сидоров И. И."):
        assert person in shown, (person, shown)
    assert not any(s.startswith(("Коптев", "Применение", "Пургина И")) for s in shown), shown
    for org in ("ООО «Тройка»", "МОО «Общество охотников»", "АКБ «Надежный»", "КГАУ «КРИТБИ»", "МКП «УКС»"):
        assert org in orgs, (org, orgs)
    assert "администрация Пушкинского муниципального района Московской области" in orgs, orgs
    # a quoted name NER marks as an organisation is one («"Спартак"»), a quoted adjective naming a plot is not
    assert quoted_alone('"Спартак"') and quoted_alone("«Лацио»") and not quoted_alone('"Копканский"')


def test_a_surname_the_dictionary_does_not_know_named_alone_is_a_person() -> None:
    shown, orgs = _registers(
        "Мяч получает Онопко в центре поля. Сбивают Александра Паляницу. Вот Тихонов бежит за мячом.\n"
        "Партнеры использовали Тихонова не по назначению. Бабангиду сегодня играет в белых бутсах, а потом "
        "Бабангида ушёл с поля.",
        "Альпаку стригут весной. Шерсть альпака даёт тонкую. 2. Распоряже\nние директора. ОАО «ХХХХХХХХ» и "
        "ООО «Название» — образцы. Договор с ООО «Ромашка».",
    )
    assert "Онопко" in shown and "Тихонов" in shown and "Тихонова" not in shown, shown
    assert "Паляница Александр" in shown and "Бабангида" in shown and "Бабангиду" not in shown, shown
    assert not any(s.startswith(("Альпак", "Распоряже")) for s in shown), shown
    assert orgs == ["ООО «Ромашка»"], orgs


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
    assert sorted(orgs) == [
        "Министерство юстиции Российской Федерации (Минюст России)",
        "ООО «Ромашка»",
        "Правительство Российской Федерации",
    ], orgs


def test_a_reference_list_is_not_mined_for_names() -> None:
    shown, _ = _registers(
        "Отчёт подготовил Петров И. И.\nСписок литературы\n1. Graves A., Collobert R. Speech, 2013.\n"
        "2. Иванов С. С. Распознавание речи. М., 2019."
    )
    assert shown == ["Петров И. И."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Продавец 000 "Торговый дом "Комплексный"\nСчет-оферта № 5', 'ООО "Торговый дом "Комплексный"'),
        ("Покупатель ООО «Кафе-кондитерская «Зефир»», ИНН 7707083893.", "ООО «Кафе-кондитерская «Зефир»»"),
        (
            "заявил гендиректор ЗАО “Управляющая компания “Кузбассразрезуголь” Серго Курбанов.",
            "ЗАО “Управляющая компания “Кузбассразрезуголь”",
        ),
        (
            "Контроль осуществляется Федеральной службой по надзору в сфере связи, информационных технологий и "
            "массовых коммуникаций и ее территориальными органами.",
            "Федеральная служба по надзору в сфере связи, информационных технологий и массовых коммуникаций "
            "(Роскомнадзор)",
        ),
        (
            "84. | Территориальный орган Федеральной службы государственной статистики по Чеченской Республике | "
            "г. Грозный",
            "Территориальный орган Федеральной службы государственной статистики по Чеченской Республике",
        ),
        (
            "Принят Государственной Думой 8 июля 2006 года. Одобрен Советом Федерации 14 июля 2006 года.",
            "Государственная Дума",
        ),
        ("с Европейским банком реконструкции и развития (ЕБРР)", "Европейский банк реконструкции и развития"),
        ("сказал представитель компании РКС Михаил Матыцин.", "РКС"),
    ],
)
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
    assert "Национальный центр по развитию частно-государственных партнерств" in orgs, orgs
    assert not any("Яшечкин" in o or "Александр" in o or "иных" in o for o in orgs), orgs


def test_a_double_surname_declines_in_both_parts() -> None:
    shown, _ = _registers("150 лет со дня рождения писателя Николая Георгиевича Гарина- Михайловского (1852-1906).")
    assert "Гарин-Михайловский Николай Георгиевич" in shown, shown


def test_latin_names_firms_and_known_abbreviations() -> None:
    """Session 18's rules from the seventh held-out set's misses: Latin words in Russian prose are a person only with a
    first name or an initial, else a firm, a paper or a team; a Latin legal form after a comma; abbreviations of
    well-known international bodies; and what they must not take (a street, a service, Latin-script text, API)."""
    from tasks.meta.latin import latin_body, latin_person_like

    assert latin_person_like("Bob Dylan") and latin_person_like("Arley D. Cathey")
    assert not any(map(latin_person_like, ("Goldman Sachs", "Boston Celtics", "The Guardian", "Duran Duran")))
    prose = "Акции банка Deutsche Bank и фонда Lehman Brothers упали, сообщила The Guardian в понедельник."
    for name in ("Deutsche Bank", "Lehman Brothers", "The Guardian"):
        at = prose.index(name)
        assert latin_body(prose, at, at + len(name)), name
    for text, name in (
        ("Офис на Konwiktorska Street в Варшаве закрыт.", "Konwiktorska Street"),
        ("Канал Sky Digital вещает в Британии и Ирландии.", "Sky Digital"),
        ("Install Visual Studio and the Machine Learning Toolkit first.", "Visual Studio"),
        ("Певец Bob Dylan выступил в Москве вчера вечером.", "Bob Dylan"),
    ):
        at = text.index(name)
        assert not latin_body(text, at, at + len(name)), name
    shown, orgs = _registers(
        "Отчёт подготовила компания Acme Widgets, Inc. по заказу Carlyle Group L.P. в 2019 году.",
        "Решение МВФ поддержали эксперты ЮНЕСКО и НАТО. Метод POST отправляет запрос к API сервиса.",
        "Певец Bob Dylan выступил в Москве, а банк Goldman Sachs оплатил концерт.",
    )
    for org in ("Acme Widgets, Inc", "Carlyle Group L.P", "МВФ", "Goldman Sachs"):  # a sentence's full stop is cut
        assert org in orgs, (org, orgs)
    assert not {"POST", "API"} & set(orgs), orgs
    assert "Dylan Bob" in shown or "Bob Dylan" in shown, shown
    assert not any("Goldman" in s for s in shown), shown

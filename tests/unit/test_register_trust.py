"""Registers a person can trust (issue 49): no table word taken for a surname, one entry per person and body, in the
nominative, surname first — read as an archivist reads them, on the real files' registers and on the failures a real
estimate and manual showed."""

from __future__ import annotations

import pytest

from corpora.real_registers import (
    HELD_OUT_TEXTS,
    held_out,
    load_texts,
    org_matches,
    register_defects,
    registers_of,
)
from korpus.core.datamodel import PageResult, Source
from tasks.meta.abbreviations import defined_after
from tasks.meta.documents import Organisation, organisations, persons
from tasks.meta.facts import PersonMention, Place, SourceFacts, extract_facts
from tasks.meta.latin import latin_people
from tasks.meta.org_names import FEDERAL_BODIES, federal_body, nominative_org, org_key

pytestmark = pytest.mark.unit


def _registers(text: str) -> dict[str, list[str]]:
    return registers_of(
        [{"source_id": "смета.txt", "kind": "text", "pages": [{"page": 1, "t_start": None, "text": text}]}]
    )


def _real_files() -> list[dict]:
    """The served text of every real file the register sets hold (not the encyclopedia passages)."""
    texts = load_texts() + load_texts(HELD_OUT_TEXTS) + load_texts(held_out(2)[0]) + load_texts(held_out(3)[0])
    return [t for t in texts if not t["source_id"].startswith("xquad")]


def test_the_real_files_registers_hold_no_junk_and_no_entry_twice() -> None:
    texts = _real_files()
    assert len(texts) == 94
    register = registers_of(texts)
    assert len(register["persons"]) > 100 and len(register["organisations"]) > 80
    assert register_defects(register) == []


def test_the_archivists_check_finds_what_a_real_folder_showed() -> None:
    """The check above can fail: each defect the issue quotes from a real estimate and manual is reported."""
    register = {
        "persons": [
            "Адрес Ф. И.",
            "Монитор А.",
            "Остап Татур Васильевич",
            "Татура О. В.",
            "Иванов И. И.",
            "Matteo Frigo Steven G. Johnson",
        ],
        "organisations": [
            "МВД России",
            "МВД РФ",
            "Межгосударственным советом по стандартизации",
            "POST",
            "Министерство финансов Российской Федерации",
        ],
    }
    defects = "\n".join(register_defects(register))
    for expected in (
        "Адрес Ф. И. — a common word",
        "Монитор А. — a common word",
        "Остап Татур Васильевич — a first name shown first",
        "Остап Татур Васильевич = Татура О. В. — one person twice",
        "Matteo Frigo Steven G. Johnson — two people",
        "МВД России = МВД РФ — one body twice",
        "Межгосударственным советом по стандартизации — not in the nominative",
        "POST — a code word",
    ):
        assert expected in defects
    assert "Иванов" not in defects and "Министерство финансов" not in defects


ESTIMATE = """ЛОКАЛЬНЫЙ СМЕТНЫЙ РАСЧЕТ № 02-01-01
Составил: Чамара Д. П.
Проверил: Татура О. В.
| № п/п | Наименование | Ед. изм. | Кол. | Имат | Всего |
| 1 | Оповещатель охранно-пожарный звуковой | шт | 4 | 120 | 480 |
| 2 | Кроссировка линий связи | шт | 12 | 15 | 180 |
| 3 | Имат | Оповещатель | 3 | 12 | 15 |
| Адрес Ф. И. О. | Апт А. | Монитор Орион Про |
| Иванов И. И. | Петров | Пётр | Петрович |
Согласовано: Татура Остапа Васильевича
Работы выполнил Чамары Дениса Петровича.
"""


def test_table_words_are_no_surnames_and_one_person_is_one_entry_surname_first() -> None:
    persons = _registers(ESTIMATE)["persons"]
    assert persons == ["Иванов И. И.", "Петров Пётр Петрович", "Татур Остап Васильевич", "Чамара Денис Петрович"]


def test_a_reference_lists_authors_are_separated_person_by_person() -> None:
    def split(span: str) -> list[str]:
        return [span[a:b] for a, b in latin_people(span)]

    assert split("Matteo Frigo Steven G. Johnson") == ["Matteo Frigo", "Steven G. Johnson"]
    assert split("Ye Jia Rif A. Saurous") == ["Ye Jia", "Rif A. Saurous"]
    assert split("Matteo Frigo\nSteven G. Johnson") == ["Matteo Frigo", "Steven G. Johnson"]
    assert split("John R. Smith") == ["John R. Smith"] and split("Jean-Pierre Serre") == ["Jean-Pierre Serre"]


ORGS = """Решение Арбитражного суда города Санкт-Петербурга. Межгосударственным советом по стандартизации принят ГОСТ.
Письмо МВД России от 12.03.2020. Согласовано с МВД РФ и Министерством внутренних дел Российской Федерации.
Сведения Минтруда России и Министерства труда и социальной защиты Российской Федерации. Центральным банком Российской
Федерации установлено. Для отправки данных используйте метод "POST". Поставщик — АО "Омскводоканал"; договор с
"ОмскВодоканал" и переписка с Омскводоканалом.
"""


def test_organisations_in_the_nominative_one_entry_each_with_abbreviation_and_full_name() -> None:
    organisations = _registers(ORGS)["organisations"]
    assert organisations == [
        'АО "Омскводоканал"',
        "Арбитражный суд города Санкт-Петербурга",
        "Межгосударственный совет по стандартизации",
        "Министерство внутренних дел Российской Федерации (МВД России)",
        "Министерство труда и социальной защиты Российской Федерации (Минтруд России)",
        "Центральный банк Российской Федерации (Банк России)",
    ]


def test_every_federal_bodys_forms_meet_and_no_two_bodies_share_a_form() -> None:
    for number, (full, abbreviation, others) in enumerate(FEDERAL_BODIES):
        for form in (full, abbreviation, *others):
            assert federal_body(form) == number, form
        assert org_key(full) == org_key(abbreviation)
    assert federal_body("Министерство финансов Омской области") is None
    assert federal_body("Министерством юстиции Российской Федерации") == federal_body("Минюст РФ")


@pytest.mark.parametrize(
    ("written", "nominative"),
    [
        ("Арбитражного суда города Санкт-Петербурга", "Арбитражный суд города Санкт-Петербурга"),
        ("Межгосударственным советом по стандартизации", "Межгосударственный совет по стандартизации"),
        ("Правительства Российской Федерации", "Правительство Российской Федерации"),
        ("Государственной Думой", "Государственная Дума"),
        ("Лучшим новым университетом", None),  # a superlative: left as written
        ("Центральной и Восточной Африке", None),
        ("ООО «Ромашка»", None),
    ],
)
def test_a_bodys_head_is_put_in_the_nominative(written: str, nominative: str | None) -> None:
    assert nominative_org(written) == nominative


def test_an_entry_shown_with_its_abbreviation_fits_a_label_of_either() -> None:
    shown = "Министерство юстиции Российской Федерации (Минюст России)"
    assert org_matches(shown, "Минюст России") and org_matches(shown, "Министерство юстиции Российской Федерации")
    assert not org_matches(shown, "ФСБ России")


def _mention(
    surname: str, shown: str, first: str | None = None, middle: str | None = None, full: int = 0
) -> PersonMention:
    return PersonMention(
        surname=surname,
        first_initial=first,
        middle_initial=middle,
        shown=shown,
        fullness=full,
        place=Place(source_id="смета.txt", page=1),
    )


def test_one_persons_surname_forms_and_lone_mentions_are_one_entry_unless_another_person_keeps_the_form() -> None:
    facts = SourceFacts(
        source_id="смета.txt",
        version="0" * 64,
        kind="text",
        title="",
        pages=1,
        owner="a",
        access="public",
        tenant="default",
        persons=[
            _mention("татура", "Татура О. В.", "О", "В", 2),
            _mention("татур", "Татур Остап Васильевич", "О", "В", 6),
            _mention("татура", "Татура"),
            _mention("чамары", "Чамары Д. П.", "Д", "П", 2),
            _mention("чамара", "Чамара Денис Петрович", "Д", "П", 6),
            _mention("чамары", "Чамары"),
            _mention("чамары", "Чамары И. И.", "И", "И", 2),
        ],
    )
    register, _ = persons([facts])
    shown = {p.shown: sorted(m.shown for m in p.mentions) for p in register}
    assert shown["Татур Остап Васильевич"] == ["Татур Остап Васильевич", "Татура", "Татура О. В."]
    assert shown["Чамара Денис Петрович"] == ["Чамара Денис Петрович", "Чамары Д. П."]
    assert "Чамары И. И." in shown and "Чамары" not in shown["Чамара Денис Петрович"]  # «Чамары» alone: two fit


@pytest.mark.parametrize(
    ("text", "listed"),
    [
        (
            "Директор Департамента правового обеспечения и контроля утверждает план.",
            "Департамент правового обеспечения и контроля",
        ),
        ("Заместитель директора Административного департамента подписал акт.", "Административный департамент"),
        ("Письмо Госкомстата России от 5 января 2004 г.", "Госкомстат России"),
        (
            "По данным Сингапурского университета технологии и дизайна (SUTD), город на первом месте.",
            "Сингапурский университет технологии и дизайна",
        ),
        ("Данный департамент осуществляет контроль.", None),
        ("Новый департамент создан в 2019 году.", None),
        ("Департамент вправе запросить информацию.", None),
        (
            "Выпускники Московского государственного университета и института стали инженерами.",
            "Московский государственный университет",
        ),
    ],
)
def test_a_ministrys_department_and_a_name_with_its_country_or_a_joined_genitive_are_bodies(
    text: str, listed: str | None
) -> None:
    """The unseen middles of real documents (eval/registers/held-out-9) missed these (meta-12)."""
    bodies = _registers(text)["organisations"]
    assert bodies == ([listed] if listed else []), bodies


@pytest.mark.parametrize(
    ("text", "listed"),
    [
        # held-out-10 (meta-13): a department's name with a verbal noun's object, a newspaper cited as a source, a
        # news agency after «ИА», a federal agency's one word (pymorphy's Orgn, or «Рос…» the dictionary does not
        # know); not a city, a measure's code, a legal form alone, nor a portal's or a method's quoted name
        (
            "Заместитель директора Департамента управления делами и контроля подписал акт.",
            "Департамент управления делами и контроля",
        ),
        ("Опубликовано: Российская газета, 2020, 30 марта.", "Российская газета"),
        ("Данная газета выходит еженедельно.", None),
        ("Как сообщает ИА Regnum, рейтинг присвоен.", "ИА Regnum"),
        ("По сведениям РИА Новости, работы завершены.", "РИА Новости"),
        ("Данные поставщика (Роскартография, Оператор БПД) загружаются в базу.", "Роскартография"),
        (
            "Выписка из Росреестра получена.",
            "Федеральная служба государственной регистрации, кадастра и картографии (Росреестр)",
        ),
        ("Письма пришли из Ростова и Москвы.", None),
        ("Мера ЗИС.26 применяется ко всем системам.", None),
        ("Документ подписан руководителем АО и заверен.", None),
        ("Сотрудники НКВД провели обыск.", "НКВД"),
        ("За время работы портала «Наш город» устранено пять миллионов проблем.", None),
        ('Рис. 1.5. Матрица портфельного анализа "Продукт-Рынок" для основных видов продукции.', None),
        # held-out-11 (meta-14): a quoted name wrapped at a line end, two dictionary bodies side by side, a ministry
        # named by its field, a letter with its combining mark (NFC), a territorial office's regions after a comma;
        # not a ministry's pronoun object, nor a Latin project's name after «проекте»
        (
            "Первым оператором стало ОАО «Российские\nкоммунальные системы», учрежденное в 2003 году.",
            "ОАО «Российские коммунальные системы»",
        ),
        ("Компанию учредило РАО ЕЭС в мае.", "РАО ЕЭС"),
        (
            "Стратегия утверждена в 2015 г.\nМинистерством городского развития и окружающей среды.",
            "Министерство городского развития и окружающей среды",
        ),
        (
            "Проект Федерального министерства образования и научных исследований завершён.",
            "Федеральное министерство образования и научных исследований",
        ),
        ("Субъект вправе требовать от\nМинистерства уточнения его персональных данных.", None),
        (
            "Стратегия утверждена Министерством городского развития и окружающеи\u0306 среды.",
            "Министерство городского развития и окружающей среды",
        ),
        ("Города участвуют в проекте Smart Urban Services вместе с вузами.", None),
        (
            "| Управление Федеральной службы государственной статистики по Красноярскому краю, Республике Хакасия и "
            "Республике Тыва | Красноярский край |",
            "Управление Федеральной службы государственной статистики по Красноярскому краю, Республике Хакасия и "
            "Республике Тыва",
        ),
        # held-out-12 (meta-15): «Гос(ком|тех)… России», the treasury, a commission named with its kind; not a verb
        # read as a genitive noun («были»: «быль»), nor a project's quoted name however it is built
        ("Руководящий документ Гостехкомиссии России «Временная методика».", "Гостехкомиссия России"),
        ("Положение, утвержденное Госкомвузом России. Согласно Положению", "Госкомвуз России"),
        ("Сертификаты выдаёт удостоверяющий центр Федерального казначейства.", "Федеральное казначейство"),
        ("Федеральной комиссией были выделены такие практики.", None),
        ("Уроки с использованием сервисов проекта «Московская электронная школа».", None),
        (
            "Секретарь Государственной аттестационной комиссии (далее ГАК) вызывает слушателя.",
            "Государственная аттестационная комиссия",
        ),
        ("Решение Центральной избирательной комиссии опубликовано.", "Центральная избирательная комиссия"),
        ("Государственной комиссией принят объект.", None),
        # held-out-12's misses (meta-16): bodies an archive names by an abbreviation korpus knows, a Latin agency
        # after «агентство»; not a word written in capitals that is no body
        ("Сборники литературы (ИНИОН и др.) выходят ежегодно.", "ИНИОН"),
        ("Рейтинговое агентство Moody’s присвоило рейтинг.", "Moody’s"),
        ("ПРОТОКОЛ ЗАСЕДАНИЯ. Бан на форуме снят.", None),
        # held-out-13's misses (meta-17): a company type's abbreviation before a quoted name, a town's council by its
        # adjective, the office of a mayor, an exchange in a ticker
        ("— полемизирует аналитик ИК «Атон».", "ИК «Атон»"),
        ("Активы были переданы Омскому муниципалитету.", "Омский муниципалитет"),
        ("Заказчиком может выступить Аппарат Мэра Москвы.", "Аппарат Мэра Москвы"),
        ("Аппарат управления сокращён.", None),
        ("Акции компании (NYSE: MCO) выросли.", "NYSE"),
        # held-out-14's misses (meta-18): a territorial office's regions with «г.», a republic named after its word, a
        # list of regions after a comma and a dash; not the next table cell; the central bank
        (
            "| Управление Федеральной службы государственной статистики по г. Москве и Московской области | г. Москва, "
            "4-й Войковский проезд, д. 6",
            "Управление Федеральной службы государственной статистики по г. Москве и Московской области",
        ),
        (
            "| Управление Федеральной службы государственной статистики по Республике Крым и г. Севастополю | "
            "г. Симферополь, ул. Ушинского, д. 6",
            "Управление Федеральной службы государственной статистики по Республике Крым и г. Севастополю",
        ),
        (
            "| Управление Федеральной службы государственной статистики по Тюменской области, Ханты-Мансийскому "
            "автономному округу - Югре и Ямало-Ненецкому автономному округу | Тюменская область",
            "Управление Федеральной службы государственной статистики по Тюменской области, Ханты-Мансийскому "
            "автономному округу - Югре и Ямало-Ненецкому автономному округу",
        ),
        (
            "| Управление Федеральной службы государственной статистики по г. Санкт-Петербургу и Ленинградской "
            "области | город федерального значения Санкт-Петербург",
            "Управление Федеральной службы государственной статистики по г. Санкт-Петербургу и Ленинградской области",
        ),
        (
            "органы государственной власти субъектов Российской Федерации, Банк России, органы фондов",
            "Центральный банк Российской Федерации (Банк России)",
        ),
    ],
)
def test_what_the_unseen_windows_of_real_documents_missed_or_listed_wrongly(text: str, listed: str | None) -> None:
    """The middles of real documents (eval/registers/held-out-10 to -12), each scored unseen before its misses were
    read: every case below is one of those misses or wrong entries, or its negative."""
    bodies = _registers(text)["organisations"]
    assert bodies == ([listed] if listed else []), bodies


def test_an_initial_before_a_titles_first_word_belongs_to_the_author_before_it() -> None:
    """«Бодди Д., Пэйтон Р. Менеджмент. - С-Пб.: 1999.»: two authors, «Менеджмент» is the book's title (held-out-10);
    in a table row («Апт А. | Монитор Орион Про») nothing changes: a capitalised cell is no surname."""
    people = _registers("Источник: Бодди Д., Пэйтон Р. Менеджмент. - С-Пб.: 1999. С. 409.")["persons"]
    assert people == ["Бодди Д.", "Пэйтон Р."], people
    assert _registers(ESTIMATE)["persons"][0] == "Иванов И. И."


def test_an_abbreviation_a_document_defines_is_its_body_on_every_page() -> None:
    """«Государственной аттестационной комиссии (далее ГАК)» on one page, «Заседание ГАК» on the next: one entry, the
    commission, with all its mentions — no entry «ГАК»; an abbreviation in brackets that does not open with the
    name's letter defines nothing, and one the document gives two bodies stands for neither."""
    pages = [
        "Секретарь Государственной аттестационной комиссии (далее ГАК) вызывает слушателя.",
        "Заседание ГАК считается правомочным. Решения ГАК окончательны.",
    ]
    entries = _organisations_of_pages(pages)
    assert [(e.shown, len(e.mentions)) for e in entries] == [("Государственная аттестационная комиссия", 3)]
    assert defined_after("Комиссии (ФСБ) ", "Комиссии", len("Комиссии")) is None
    assert defined_after("Федеральная служба безопасности (ФСБ)", "Федеральная служба безопасности", 31) == "ФСБ"
    both = "Главное управление (далее ГУ) и Государственный университет (далее ГУ). ГУ ответил."
    assert "ГУ" not in [e.shown for e in _organisations_of_pages([both])]


def _organisations_of_pages(pages: list[str]) -> list[Organisation]:
    source = Source(source_id="x.txt", version="0" * 64, path="x.txt", kind="text", owner="a", access="public")
    return organisations(
        [
            extract_facts(
                source,
                [
                    PageResult(source_id="x.txt", source_version="0" * 64, page=n, text=text, method="chunks")
                    for n, text in enumerate(pages, 1)
                ],
            )
        ]
    )


def test_a_function_word_after_an_initial_is_no_surname_and_a_genitive_after_its_word_is_a_mans() -> None:
    """«аналитик Алексей Ю. По его мнению»: «По» opens the next sentence, no «По Алексей Ю.»; «по мнению В. Н.
    Иванова», «под ред. Л. П. Брагина»: a woman would be «Ивановой», so the man «Иванов В. Н.» (held-out-13, -11)."""
    people = _registers("Аналитик Алексей Ю. По его мнению, риск велик.")["persons"]
    assert not any(p.startswith("По ") for p in people), people
    people = _registers("Как подчеркивает В. И. Петров; по мнению В. Н. Иванова; под ред. Л. П. Брагина.")["persons"]
    assert people == ["Брагин Л. П.", "Иванов В. Н.", "Петров В. И."], people
    assert _registers("Документ подписала В. Н. Иванова.")["persons"] == ["Иванова В. Н."]


def test_a_name_patronymic_surname_after_a_common_noun_and_a_street_after_a_title_word() -> None:
    """«заместитель Председателя Правительства Марат Шикирзянович Хуснуллин.» is Хуснуллин, not «Правительства Марат
    Шикирзянович»; «ул. Профессора Попова» is a street, no person (held-out-14)."""
    text = (
        "– говорит заместитель Председателя\nПравительства Марат Шикирзянович Хуснуллин. "
        "Адрес: ул. Профессора Попова, д. 39."
    )
    assert _registers(text)["persons"] == ["Хуснуллин Марат Шикирзянович"]
    assert _registers("Директор Попов Иван Петрович подписал.")["persons"] == ["Попов Иван Петрович"]

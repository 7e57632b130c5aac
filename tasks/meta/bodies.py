"""Evidence that a name is an organisation's (docs/meta.md «Organisations»): the patterns of legal forms' kin, state
bodies and institutions, agencies «… России», Latin company suffixes — and `body_end`, which walks a state body's
name word by word. tasks/meta/names.py asks these before it lists an organisation.
"""

from __future__ import annotations

import re

from tasks.meta.models import known, parse
from tasks.text.identifiers import valid_inn, valid_ogrn

# --- evidence for an organisation (docs/meta.md «Organisations») --------------------------------------------------
# A name NER marks ORG is an organisation only with evidence: a legal form, a quoted name after an organisation word, a
# valid ИНН/ОГРН beside it, a state body's or institution's name, an agency's abbreviation with «России», or a
# company suffix in Latin script. On two real manuals NER's bare ORG spans were mostly English authors, code words,
# OCR debris and table captions.
_BODY_HEADS = (  # a commission first: «Центр…» would take «Центральной избирательной комиссии» as its own head
    r"(?:Межведомственн|Государственн|Центральн|Федеральн)\w+\s+(?:[а-яё]+(?:ая|ой|ую|ые|ых)\s+)?комисси\w+"
    r"|Правительств[оаеу]м?|Администраци[яиюей]|Министерств[оауе]м?|Федеральн\w+\s+(?:служб|агентств|[Сс]обрани)\w*"
    r"|Государственн\w+\s+Дум\w+|Совет\w*\s+(?:Федерации|Безопасности|Министров)|Верховн\w+\s+(?:[Сс]уд|Совет)\w*"
    r"|Конституционн\w+\s+Суд\w*|Арбитражн\w+\s+суд\w*|Съезд\w*\s+народных\s+депутатов|Управлени[еяюи]м?"
    r"|Территориальн\w+\s+орган\w*|Правительственн\w+\s+комисси\w+|Департамент\w*|Комитет\w*|Прокуратур\w+"
    r"|Генеральн\w+\s+прокуратур\w+|Центральн\w+\s+банк\w*|Пенсионн\w+\s+фонд\w*|Институт\w*|Академи\w+"
    r"|Университет\w*|Национальн\w+\s+центр\w*|Центр\w*|Палат\w+|Агентств\w+|Служб\w+|Законодательн\w+\s+[Сс]обрани\w+"
    r"|Издательств\w*|Аппарат\w*(?=\s+(?:Мэра|Президента|Правительства|Губернатора|Главы)(?![а-яё]))"
)
_BODY_HEAD = re.compile(rf"(?<![А-ЯЁа-яё])(?:{_BODY_HEADS})(?![а-яё])")
_INSTITUTION = re.compile(r"Институт|Университет|Академи|Управлени|Центр")
_DEPARTMENT = re.compile(r"Департамент|Министерств")  # a department or a ministry named by its field: two genitives
_WHOLE_NAME = re.compile(
    r"Государственн\w+\s+Дум\w+|Совет\w*\s+(?:Федерации|Безопасности)|Конституционн\w+\s+Суд\w*|Верховн\w+\s+[Сс]уд\w*"
    r"|Федеральн\w+\s+[Сс]обрани\w+|(?:Межведомственн|Государственн|Центральн)\w+\s+[а-яё]+(?:ая|ой|ую)\s+комисси\w+"
)  # a head that is a name by itself: «Принят Государственной Думой», «Государственной аттестационной комиссии»
_CAPS_BODY = re.compile(
    rf"(?<![А-ЯЁа-яё])(?:[А-ЯЁ]+(?:АЯ|ИЙ|ЫЙ|ОЕ)\s+){{0,3}}(?:{_BODY_HEADS.upper()}|ШКОЛА|БИБЛИОТЕКА)"
    r"(?:[ \t]*\n?[ \t]+(?!(?:ПРИКАЗ|ПОСТАНОВЛЕНИЕ|УКАЗ|РАСПОРЯЖЕНИЕ|РЕШЕНИЕ|УТВЕРЖДАЮ|ПОЛОЖЕНИЕ|ПРИКАЗЫВАЮ)\b)"
    r"(?:[А-ЯЁ]{2,}|И|ПО|ПРИ|В))*"
    r"(?:[ \t]*\n[ \t]*\n[ \t]*РОССИЙСКОЙ[ \t]+ФЕДЕРАЦИИ)?"  # a title page sets the country apart
)
_TOKEN = re.compile(r"[ \t]*\n?[ \t]*([А-ЯЁа-яё][А-ЯЁа-яё-]*)")
_ADJ_BODY = re.compile(
    r"(?<![А-ЯЁа-яё])(?:(?!Акционерн|Данн|Указанн|Настоящ|Эт[оиа]|Так|Кажд|Люб|Друг|Ин[аоы]|Соответствующ|Названн"
    r"|Вышеуказанн|Уполномоченн|Структурн|Профильн|Ответственн|Нов\w+\s+департамент)"
    r"[А-ЯЁ][а-яё]+(?:ая|ий|ый|ое|ой|ую|ого|ых|им|ым|ому|ему|ом|ем)\s+)"
    r"(?:(?!акционерн)[а-яё]+(?:ая|ий|ый|ое|ой|ую|ого|ых|им|ым|ому|ему|ом|ем)\s+){0,3}"  # not «… акционерное общество»
    r"(?:библиотек\w*|школ\w*|[Дд]ум\w*|союз\w*|академи\w+|палат\w+|корпораци\w+|банк\w*|университет\w*|больниц\w*|фонд\w*|палат\w*"
    r"|совет(?:а|у|ом|е)?(?![а-яё])|обществ(?:о|а|у|ом|е)(?![а-яё])"
    r"|АЭС|ГЭС|ГРЭС|ТЭЦ|электростанци\w+|атомн\w+\s+станци\w+|департамент\w*|газет[аыеуой]\w*|министерств\w*|казначейств\w*"
    r"|муниципалитет\w*)"
    r"(?:\s+реконструкции\s+и\s+развития)?"
)
_OBLIQUE = {"gent", "datv", "loct", "ablt"}  # the cases a name's words after its head stand in
_VERB_OR_PRONOUN = {"VERB", "INFN", "GRND", "PRTS", "NPRO"}  # «комиссией были выделены», «уточнения его данных»
_REGION = re.compile(r"Республик[еи]|Област[иь]|Кра[юе]|Округ[уе]")  # a region named after a comma in «по …»
_REGION_NAMED = re.compile(  # «…, Магаданской области», «…, Ханты-Мансийскому автономному округу», «…, г. Москве»
    r"[ \t]*\n?[ \t]*(?:[А-ЯЁ][А-ЯЁа-яё-]+(?:ой|ому|ым)[ \t]+(?:автономн\w+[ \t]+)?(?:област|кра|округ)\w*"
    r"|г\.[ \t]*[А-ЯЁ])"
)
_CITY = re.compile(r"\.[ \t]*[А-ЯЁ]")  # «г.» before a city's name, in a list of the regions a body serves
_LIST_BEFORE = re.compile(r"(?:(?<![а-яё])(?:по|и)|,)[ \t]*\n?[ \t]*$")
_NAMED_REPUBLIC = re.compile(r"[А-ЯЁ][а-яё-]+(?:ой|ая|ую)[ \t]*\n?[ \t]*Республик\w+[ \t]*\n?[ \t]*$")
_DASH_NAME = re.compile(r"[ \t]+[-–—][ \t]+(?=[А-ЯЁ][а-яё]+(?:е|и|у|ю)(?![а-яё]))")
_GOVERNS_ABLT = re.compile(r"управлени[яе]$")  # «управления делами», «управления имуществом»
_NEXT_WORD = re.compile(r"[ \t]+([А-ЯЁ][а-яё]+|[А-ЯЁ]{2,4}(?![А-ЯЁа-яё]))")  # «… Австралии», «… США»


def with_place(text: str, end: int) -> int:
    """«Королевское географическое общество Лондона»: a place's name in the genitive right after a body's name is
    part of it."""
    word = _NEXT_WORD.match(text, end)
    if word and any({"Geox", "gent"} <= set(p.tag.grammemes) for p in parse(word.group(1))):
        return word.end()
    return end


# Heads of a named institution that only NER's ORG spans may carry (the tagger has read the context; by rule alone
# «Первая партия товара» would be a party): parties, churches, theatres, museums, courts, movements, unions, leagues;
# not commissions or assemblies (an exam board, a body only proposed)
_INSTITUTION_HEADS = (
    r"[Пп]арти[яиюей]|[Цц]ерк(?:овь|ви|овью)|[Тт]еатр\w*|[Мм]узе[йяюе]\w*|[Сс]уд\w*|[Дд]вижени\w+"
    r"|[Аа]ссоциаци\w+|[Фф]едераци\w+|[Пп]рофсоюз\w*|[Гг]алере\w+|[Кк]оалици\w+|[Кк]онгресс\w*"
    r"|[Пп]арламент\w*|[Сс]овет\w*|[Сс]оюз\w*|[Лл]иг[аиуе]"
)
_ADJECTIVE = r"[а-яё]+(?:ая|ий|ый|ое|ой|ую|ого|ых|им|ым|ому|ему|ом|ем)"
_ADJ_INSTITUTION = re.compile(rf"[А-ЯЁ]{_ADJECTIVE}(?:\s+{_ADJECTIVE}){{0,3}}\s+(?:{_INSTITUTION_HEADS})")
_HEAD_INSTITUTION = re.compile(rf"(?=[А-ЯЁ])(?:{_INSTITUTION_HEADS})")
_BY_PHRASE = re.compile(r"\s+по\s+[а-яё]+(?:,?\s+[а-яё]+){0,7}")  # «Комиссия по этике и противодействию коррупции»
_QUOTES = tuple('«»"“”„')
_OF_WAR = re.compile(r"\s+(?:[А-ЯЁ][а-яё]+\s+)?(?:войн|военных|боевых)")
_NAMES_AFTER = re.compile(r"(?:\s+(?:и\s+)?[А-ЯЁ][а-яё]+)+")  # «Музей Виктории и Альберта»


def named_institution(text: str, start: int, stop: int) -> bool:
    """NER's ORG span `text[start:stop]` names an institution by a capitalised adjective before its head («Австралийская
    лейбористская партия», «Англиканской церкви», «Большого театра»), or by its head and then names in the genitive
    («Музей Виктории и Альберта») or a «по …» phrase. Not a phrase in quotes («примером "Польского монументального
    театра"»: a style) nor a theatre of war («Североамериканского театра Семилетней войны»)."""
    if text[max(0, start - 1) : start] in _QUOTES or text[stop : stop + 1] in _QUOTES:
        return False
    if _OF_WAR.match(text, stop):
        return False
    span = text[start:stop].strip()
    if (adjective := _ADJ_INSTITUTION.match(span)) and adjective.end() == len(span):
        return True
    head = _HEAD_INSTITUTION.match(span)
    if head is None or head.end() == len(span) or not span[head.end()].isspace():
        return False
    rest = span[head.end() :]
    if _BY_PHRASE.fullmatch(rest) or genitive_tail(span, head.end()) == len(span):
        return True  # «Комиссии по этике …», «Партии национального единства»
    words = re.findall(r"[А-ЯЁ][а-яё]+", rest)
    return _NAMES_AFTER.fullmatch(rest) is not None and all("gent" in _cases(w) for w in words)


_LOWER_WORD = re.compile(r"[ \t]+([а-яё]+)(?![А-ЯЁа-яё-])")
_NOT_A_NAME_AFTER_PO = {
    "адресу",
    "улице",
    "месту",
    "состоянию",
    "сравнению",
    "данным",
    "мнению",
    "словам",
    "причине",
    "поводу",
    "итогам",
    "результатам",
    "всей",
    "всему",
    "всем",
    "крайней",
    "меньшей",
}


def genitive_tail(text: str, end: int) -> int:
    """«Гарвардская школа | бизнеса», «… школа | общественного здравоохранения», «Центральный совет | по вопросам
    среднего образования»: lower-case words in the genitive (up to three) and a «по …» phrase after a body's head are
    part of its name; not «по адресу», «по данным», a verb or a pronoun."""
    at, taken = end, 0
    while taken < 3 and (word := _LOWER_WORD.match(text, at)) and word.group(1) != "по":
        if word.group(1) == "и":  # «университет технологии | и дизайна»; not «университета | и института»
            after = _LOWER_WORD.match(text, word.end())
            if not taken or after is None or _INSTITUTION.match(after.group(1).capitalize()):
                break
            word = after
        readings = parse(word.group(1))
        if not any(r.tag.case == "gent" for r in readings) or not _plain_word(word.group(1)) or _pronoun(word.group(1)):
            break
        at, taken = word.end(), taken + 1
    po = _LOWER_WORD.match(text, at)
    if po and po.group(1) == "по" and (first := _LOWER_WORD.match(text, po.end())):
        if first.group(1) not in _NOT_A_NAME_AFTER_PO and _plain_word(first.group(1)):
            at, free = first.end(), 0
            while free < 6 and (more := _LOWER_WORD.match(text, at)) and _plain_word(more.group(1)):
                at, free = more.end(), free + 1
    return at


_AGENCY_OF_RUSSIA = re.compile(
    r"(?<![А-ЯЁа-яё])(?:[А-ЯЁ]{2,6}|Мин[а-яё]{3,}|Рос[а-яё]{4,}|Гос(?:ком|тех)[а-яё]{3,})\s+России(?![а-яё])"
)  # «МВД России», «Минюстом России», «Гостехкомиссии России», «Госкомвузом России»
_KNOWN_ACRONYMS = {
    "ФСТЭК",
    "ФСБ",
    "ФНС",
    "МВД",
    "МЧС",
    "ГИБДД",
    "ФСИН",
    "ФАС",
    "ФТС",
    "ФМС",
    "СВР",
    "ФСО",
    "ЦБ",
    "РАН",
    "ЕБРР",
    "ООН",
    "ЮНЕСКО",
    "СНГ",
    "ЕАЭС",
    "РАНХиГС",
    "МГУ",
    "СПбГУ",
    "МЭРТ",
    "Росстат",
    "Роскомнадзор",
    "Госкомстат",
    "Минюст",
    "Минфин",
    "Минздрав",
    "Минтруд",
    "Минобрнауки",
    "Минэкономразвития",
    "Ростехрегулирование",
    # international bodies, agencies and leagues an archive's prose names by their abbreviation alone
    "МВФ",
    "ВОЗ",
    "ВТО",
    "НАТО",
    "МАГАТЭ",
    "ОПЕК",
    "ОБСЕ",
    "НАСА",
    "ФБР",
    "ЦРУ",
    "МОК",
    "ФИФА",
    "УЕФА",
    "МККК",
    "ЮНИСЕФ",
    "МОТ",
    "ЕЦБ",
    "ФРС",
    "МГЭИК",
    "ШОС",
    "АСЕАН",
    "ОДКБ",
    "Интерпол",
    "Европол",
    "Евросоюз",
    "НФЛ",
    "НБА",
    "НХЛ",
    "КХЛ",
    "NASA",
    "NATO",
    "FIFA",
    "UEFA",
    "UNESCO",
    "UNICEF",
    "IMF",
    "OPEC",
    "IPCC",
    "FBI",
    "CIA",
    "BBC",
    "CNN",
    "ABC",
    "CBS",
    "NBC",
    "HBO",
    "IBM",
    "CDC",
    "NFL",
    "NBA",
    "NHL",
    "MLB",
    "MLS",
}
_OPEN, _CLOSE = '[«"„“]', '[»"”“]'
_NOT_QUOTE = '(?:[^«»"„“”\n]|\n(?=(?-i:[а-яё])))'  # a name wrapped at a line end: «Российские\nкоммунальные системы»
QUOTED_NAME = (
    rf"{_OPEN}(?!\s)(?:({_NOT_QUOTE}{{1,60}}\s{_OPEN}[^«»\"„“”\n\s]{_NOT_QUOTE}{{0,60}}{_CLOSE}){_CLOSE}?"
    rf"|({_NOT_QUOTE}{{1,80}}){_CLOSE})"
)
"""A quoted name, one quote nested in it the way names are written and OCR'd: «Ромашка», «Кафе-кондитерская
«Зефир»», "Торговый дом "Комплексный"" and its outer quote lost, “Управляющая компания “Кузбассразрезуголь”. A nested
name opens after a space, so «"Ромашка" и ООО "Лютик"» stays two names. Group 1 or 2 holds the name."""
# ОКОПФ's abbreviations, by how they are made: institutions «[level][kind]У» (ГУ, МБУ, ФГБУ, КГАУ, МБДОУ, ГБУЗ),
# enterprises «[level]УП/КП» (ФГУП, МКП), public bodies «[М/Р]ОО», banks, partnerships, co-operatives. Case-sensitive:
# «ОО» is a form, «оо» is not.
OKOPF = (
    r"(?-i:[ФКО]?[ГМ]?[БКА]?(?:Д?О)?УЗ?|[ФКО]?[ГМ]?[УК]П|[МР]?ОО|АКБ|КБ|НАО|ТОО|НКО|НП|ТСЖ|ТСН|СНТ|С?ПК|КФХ|ЧОП"
    r"|БФ)"
)
_ORG_WORD_ABBREVIATION = re.compile(
    r"(?<![А-ЯЁа-яё])(?:[Кк]омпани|[Хх]олдинг|[Кк]онцерн|[Кк]орпораци|[Фф]ирм|[Аа]гентств)\w*\s+"
    r"([А-ЯЁ]{2,6}(?![А-ЯЁа-яё])|[A-Z][\w&'’`.-]*(?:(?:,[ \t]+[A-Z][\w'’`.-]*)+[ \t]+&[ \t]+[A-Z][\w'’`.-]*"
    r"|(?:[ \t]+(?:[A-Z][\w&'’`.-]*|&))*))"  # «Skidmore, Owings & Merrill»: commas only before an «&»
)
"""«компании РКС», «компания BSkyB», «фирмы Simmenthal SpA», «агентство Moody’s»: an organisation word and an
abbreviation or a Latin name; the abbreviation or the name is the organisation."""
_LOWER_HEAD = re.compile(
    r"(?<![А-ЯЁа-яё])(?:администраци|правительств|министерств|законодательн\w+\s+собрани)\w*\s+(?=[А-ЯЁ][а-яё])"
)
"""A body's head word in lower case, a capitalised genitive right after it: «администрации Пушкинского района»."""
_KNOWN_BODY_WORD = re.compile(
    r"(?<![А-ЯЁа-яё])(?:(?:Ростехрегулировани|Роскомнадзор|Росстат|Госкомстат|Минюст)[а-яё]*(?:\s+(?:России|РФ)(?![а-яё]))?"
    r"|Банк(?:а|у|ом|е)?\s+России(?![а-яё]))"
)  # «Госкомстата России»: the country is part of the name; «Банк России», the central bank
_NEWS_AGENCY = re.compile(  # «ИА Regnum», «РИА Новости»: a news agency cited as a source, its name unquoted
    r"(?<![\wА-ЯЁа-яё])(?:РИА|ИА)[ \t]+(?:[A-Z][A-Za-z]+|[А-ЯЁ][а-яё]+)(?![\wА-ЯЁа-яё-])"
)
_LEGAL_FORM_WORDS = {"АО", "ООО", "ОАО", "ЗАО", "ПАО", "НАО", "ТОО", "СП", "ИП", "ФГУП", "МУП", "ГУП", "НКО", "ЧП"}
_QUOTED_PART = re.compile(r"[«\"„“][^«»\"„“”\n]*")
_CAPITALISED = re.compile(r"(?<![А-ЯЁа-яё-])[А-ЯЁ][А-ЯЁа-яё]+(?![А-ЯЁа-яё-]|\.\d)")  # not a code: «ЗИС.26»


def dictionary_bodies(text: str) -> list[tuple[int, int]]:
    """A news agency's name after «ИА»/«РИА» (`_NEWS_AGENCY`); words the dictionary knows first as an organisation's
    name («МВД», «НКВД», «МХАТ», «Газпрома», «Минфин», «Роскартографии»: pymorphy's Orgn), and a federal agency's
    «Рос…» it does not know at all («Росреестра»)."""
    found = [(m.start(), m.end()) for m in _NEWS_AGENCY.finditer(text)]
    quoted: str | None = None  # the text's quoted names, read once a candidate needs them
    for m in _CAPITALISED.finditer(text):
        word = m.group(0)
        if word in _LEGAL_FORM_WORDS or not (
            ("Orgn" in parse(word)[0].tag and known(word.lower()))
            or (word.startswith("Рос") and len(word) > 7 and not known(word.lower()))
        ):
            continue
        quoted = " ".join(_QUOTED_PART.findall(text)) if quoted is None else quoted
        if word not in quoted:  # a word of a quoted name is that name's («АО «Концерн Росэнергоатом»»)
            found.append((m.start(), m.end()))
    joined: list[tuple[int, int]] = []  # «РАО ЕЭС»: two such words side by side are one name
    for start, end in sorted(found):
        if joined and text[joined[-1][1] : start] == " ":
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


_ORG_WORD_QUOTED = re.compile(
    r"(?<![А-ЯЁа-яё])(?:(?:[Кк]омпани|[Аа]гентств|[Бб]анк|[Фф]онд|[Оо]рганизаци|[Кк]орпораци|[Пп]артнерств|[Ии]здательств"
    r"|[Хх]олдинг|[Кк]онцерн|[Зз]авод|[Кк]омбинат|[Тт]орговый\s+дом|РИА|ИА|БФ|МОО|ГБУЗ|МБУ|ГБУ|ФГБУ|НКО|ТД"
    r"|ИК|УК|ГК|СК|ТК)\w*"  # an investment, managing, insurance or trading company, a group: «ИК «Атон»»
    rf"(?:\s+[А-ЯЁ]{{2,5}})?\s*{QUOTED_NAME})"
)
_QUOTED_ALONE = re.compile(r"[«\"“„][A-ZА-ЯЁ][\w-]{2,}(?:\s[\w-]+){0,3}[»\"”“]")
_ADJECTIVE_END = re.compile(r"(?:[сц]ки[йх]|[сц]к(?:ой|ая|ое|ие)|[ыиоа]й|ая|ое)$")


_THING_BEFORE = re.compile(  # «портала «Наш город»», «матрица анализа "Продукт-Рынок"»: a thing's quoted name
    r"(?<![А-ЯЁа-яё])(?:портал|сайт|сервис|проект|программ|приложени|матриц|модел|систем|метод|анализ|конкурс|фестивал"
    r"|акци[яиюей]|книг|фильм|роман|песн|альбом|операци|концепци|стратеги|платформ|продукт|бренд|рубрик"
    r"|передач|спектакл|выставк)\w*\s*[«\"„“]?$"
)


def names_a_thing(text: str, start: int) -> bool:
    """The name at `start` follows a word for a thing, not a body: a portal, a method, a film, a project («в проекте
    Smart Urban Services»)."""
    return _THING_BEFORE.search(text, max(0, start - 40), start) is not None


def quoted_body(text: str, start: int, stop: int) -> bool:
    """The span is a quoted name standing alone (`quoted_alone`) that does not follow a word for a thing, not a body:
    a portal, a method, a film («портала «Наш город»»)."""
    return not names_a_thing(text, start) and quoted_alone(text[max(0, start - 1) : stop + 1].strip())


def latin_companies(text: str) -> list[tuple[int, int]]:
    """«Morningstar, Inc.», «Energiprojekt AB» (`_LATIN_COMPANY`), not a project's or a product's name after the word
    for it («в проекте Smart Urban Services»)."""
    return [(m.start(), m.end()) for m in _LATIN_COMPANY.finditer(text) if not names_a_thing(text, m.start())]


def quoted_alone(span: str) -> bool:
    """«"Спартак"», «"Лацио"»: a capitalised quoted name of up to four words, the quotes around it — not a quoted
    adjective, which names a place or a plot («№ 7 "Копканский"»), nor a code word in Latin capitals («"POST"»)."""
    if not _QUOTED_ALONE.fullmatch(span) or _ADJECTIVE_END.search(span[1:-1]):
        return False
    words = re.findall(r"[\w-]+", span)  # one word declines in running text («"Спартака"»); a phrase opening on
    if len(words) == 1:  # an oblique word is a title or a place («"Посланию Галатам"», «"Юго-западным Фресно"»)
        return not (re.fullmatch(r"[A-Z]{2,8}", words[0]) and words[0] not in _KNOWN_ACRONYMS)  # «"POST"»: code
    return any(p.tag.case in (None, "nomn") or {"Fixd", "UNKN"} & set(p.tag.grammemes) for p in parse(words[0]))


_LATIN_COMPANY = re.compile(  # «Morningstar, Inc.», «Bloomberg L.P.», «Energiprojekt AB»
    r"\b[A-Z][\w&'’`.-]*(?:\s+[A-Z][\w&'’`.-]*){0,4},?\s+(?:(?:Inc|Ltd|LLC|PLC|plc|GmbH|AG|AB|SA|SpA|NV|BV|Corp"
    r"|Corporation|Company|Holdings|Bank|Group|Agency|Service|Services|International|University|Institute"
    r"|Foundation)\b\.?|L\.\s?P\.)"
)
_LATIN_PERSON = re.compile(
    r"^(?!.*\b(?:Street|Avenue|Road|Square|Digital|News|Media|Sports|Network|Records|Studios?)\b)"  # «Sky Digital»
    r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?(?:\s+[A-Z]\.)?(?:\s+[A-Z][a-z]+(?:-[A-Z][a-z]+)?){1,2}$"
)


_ZEROS_FOR_OOO = re.compile(r"^000(?=\s*[«\"„“])")


def ooo_as_read(name: str) -> str:
    """«000 "Ромашка"» → «ООО "Ромашка"»: OCR's zeros for the letters of the legal form before a quoted name."""
    return _ZEROS_FOR_OOO.sub("ООО", name)


_PLACEHOLDER = re.compile(
    r"[«\"“„']\s*(?:([ХXУYZЯ*_.?])\1{2,}|[ХXУYZ*_.?\s-]{3,}|Название|Наименование)\s*[»\"”“']", re.IGNORECASE
)


def is_placeholder(name: str) -> bool:
    """«ОАО «ХХХХХХХХХХХ»», «ООО «Название»»: a form's blank, not an organisation."""
    return bool(_PLACEHOLDER.search(name))


def _cases(word: str) -> set[str]:
    parses = parse(word)
    if any({"Geox", "Fixd", "UNKN"} & set(p.tag.grammemes) for p in parses[:2]):
        return {"gent"}  # «Тыва», «Планка»: a place or an unknown word names the body
    return {p.tag.case for p in parses if p.tag.case}


def body_end(text: str, start: int) -> int | None:
    """Where the name of a state body or institution that starts at `start` with its head word ends, or None when
    nothing names it. «Правительство Российской Федерации», «Министерство спорта Российской Федерации»,
    «Управление по вопросам противодействия коррупции в Республике Тыва»: after the head come lower-case genitives
    («спорта», «государственной статистики»), then capitalised genitives («Российской Федерации») or «по/при …»
    words; a nominative («Александр Баженов»), a verb or punctuation ends it. A head alone («Министерство», a
    defined short form) is not a name."""
    head = _BODY_HEAD.match(text, start)
    if head is None:
        return None
    multiword = " " in head.group(0)
    at, end, phase, adjective, free, lower, previous = head.end(), None, "lower", False, 0, 0, ""
    while (token := _TOKEN.match(text, at)) is not None:
        word = token.group(1)
        if word in ("по", "при") and phase != "free":
            phase, at = "free", token.end()
            continue
        if word in ("и", "в") and phase in ("lower", "free"):
            at = token.end()
            continue
        if (
            word == "г"
            and phase != "lower"
            and _CITY.match(text, token.end())
            and _LIST_BEFORE.search(text, max(0, token.start(1) - 8), token.start(1))
        ):
            at = token.end() + 1  # «по г. Москве и Московской области», «по Республике Крым и г. Севастополю»
            continue
        if len(word) < 3 and word != "РФ":
            break  # a letter-spaced word («п р и к а з ы в а ю») or a preposition
        if word[0].isupper() and _BODY_HEAD.match(text, token.start(1)) and token.start(1) > head.end():
            inner = body_end(text, token.start(1))  # «Территориальный орган Федеральной службы … по … Республике»
            if inner is not None:
                return inner
            break
        if word[0].isupper():
            # «Республике Крым»: the republic's name as it is — not after «Чеченской Республике», named already
            republic = previous.startswith("Республик") and not _NAMED_REPUBLIC.search(
                text, max(0, token.start(1) - 60), token.start(1)
            )
            if word != "РФ" and not republic and (word.isupper() or not _cases(word) & _OBLIQUE):
                break
            if {"Name", "nomn"} <= parse(word)[0].tag.grammemes:
                break  # «… партнерств Александр Баженов»; not «Институт Макса Планка»
            phase = "caps" if phase == "lower" else phase
        elif phase == "lower" and "gent" in _cases(word) and not _VERB_OR_PRONOUN & set(parse(word)[0].tag.grammemes):
            lower += 1
        elif phase == "lower" and lower and _GOVERNS_ABLT.search(previous) and "ablt" in _cases(word):
            lower += 1  # «Департамент управления делами и контроля»: a verbal noun's object
        elif phase == "caps" and adjective and "gent" in _cases(word):
            pass  # «Корякского округа», «Дальнего Востока»: the noun after a capitalised adjective
        elif phase == "free" and free < 8 and _plain_word(word) and _cases(word) & _OBLIQUE:
            free += 1  # not a nominative: «… и Ленинградской области | город федерального значения» is the next cell
        else:
            break
        adjective, previous = "ADJF" in parse(word)[0].tag, word
        at = end = token.end()
        if phase == "free" and text.startswith(", ", at) and (more := _TOKEN.match(text, at + 1)) is not None:
            if more.group(1)[0].islower() and "gent" in _cases(more.group(1)) and not _pronoun(more.group(1)):
                at = at + 1  # «по надзору в сфере связи, информационных технологий и массовых коммуникаций»
            elif _REGION.match(more.group(1)) or _REGION_NAMED.match(text, at + 1):
                at = at + 1  # «по Красноярскому краю, Республике Хакасия и Республике Тыва», «…, Магаданской области»
        if phase == "free" and (dash := _DASH_NAME.match(text, at)) is not None:
            at = dash.end()  # «Ханты-Мансийскому автономному округу - Югре»
    if end is None and _WHOLE_NAME.fullmatch(head.group(0)):
        return with_place(text, head.end())  # «Государственной Думой», «Верховного суда США»
    if phase == "lower" and not (multiword and lower) and lower < 2:
        return None  # «на Министерство полномочий»: common words after a head are not its name
    if phase == "lower" and not multiword and not _DEPARTMENT.match(head.group(0)):
        if lower < 3 or not _INSTITUTION.match(head.group(0)):
            return None  # «Институт государственной службы и управления» is a name, «Управление делами» is not
    return end


def _pronoun(word: str) -> bool:
    """«иных», «других», «таких»: a pronoun-like adjective opens a list of other things, not more of the name."""
    return "Apro" in parse(word)[0].tag


def _plain_word(word: str) -> bool:
    """A word that may stand in a body's «по …» name: not a verb or a participle («по надзору в сфере связи»)."""
    return not {"VERB", "PRTS", "PRTF", "INFN", "GRND", "CONJ", "NPRO", "PREP"} & set(parse(word)[0].tag.grammemes)


_INN = re.compile(r"ИНН\s*:?\s*(\d{10}|\d{12})(?!\d)")
_OGRN = re.compile(r"ОГРНИП?\s*:?\s*(\d{13}|\d{15})(?!\d)")


def organisation_ids(text: str, end: int, limit: int = 120) -> tuple[str | None, str | None]:
    """A valid ИНН and ОГРН written right after an organisation (within `limit` characters, same sentence)."""
    tail = re.split(r"(?<=[.!?])\s+[А-ЯЁ]", text[end : end + limit], maxsplit=1)[0]
    inn = next((m.group(1) for m in _INN.finditer(tail) if valid_inn(m.group(1))), None)
    ogrn = next((m.group(1) for m in _OGRN.finditer(tail) if valid_ogrn(m.group(1))), None)
    return inn, ogrn

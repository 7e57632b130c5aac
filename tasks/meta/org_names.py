"""An organisation shown as a person would index it: in the nominative, and a federal body as one entry under its
full name and abbreviation (issue «Registers a person can trust»).

- **Federal bodies.** «МВД России», «МВД РФ», «Министерством внутренних дел Российской Федерации» and «Минтруда
  России» / «Министерства труда и социальной защиты Российской Федерации» are one body each: a name whose terms
  (Snowball stems, stop words out, the country words «России», «РФ», «Российской Федерации» after an abbreviation
  dropped) are a body's full name, abbreviation or short form gets the body's key, and the entry is shown
  «Министерство внутренних дел Российской Федерации (МВД России)». The list is korpus's own: the federal
  ministries, services and agencies an office archive names, each with the abbreviation its own documents use.
- **The nominative.** A body written only in an oblique case («Арбитражного суда города Санкт-Петербурга»,
  «Межгосударственным советом по стандартизации») is shown with its head noun and the adjectives before it put in
  the nominative (pymorphy3), the genitives after it as written: «Арбитражный суд города Санкт-Петербурга». A name
  that opens with an abbreviation or a quote, or whose opening words do not agree in one case, is left as written.
"""

from __future__ import annotations

import re
from functools import cache

from tasks.meta.models import _models

_RF = "Российской Федерации"
# (full name, abbreviation shown, other short forms the documents write)
FEDERAL_BODIES: list[tuple[str, str, tuple[str, ...]]] = [
    (f"Министерство внутренних дел {_RF}", "МВД России", ("МВД",)),
    (
        f"Министерство {_RF} по делам гражданской обороны, чрезвычайным ситуациям и ликвидации последствий стихийных "
        "бедствий",
        "МЧС России",
        ("МЧС",),
    ),
    (f"Министерство труда и социальной защиты {_RF}", "Минтруд России", ("Минтруд",)),
    (f"Министерство финансов {_RF}", "Минфин России", ("Минфин",)),
    (f"Министерство юстиции {_RF}", "Минюст России", ("Минюст",)),
    (f"Министерство здравоохранения {_RF}", "Минздрав России", ("Минздрав",)),
    (f"Министерство науки и высшего образования {_RF}", "Минобрнауки России", ("Минобрнауки",)),
    (f"Министерство просвещения {_RF}", "Минпросвещения России", ("Минпросвещения",)),
    (f"Министерство экономического развития {_RF}", "Минэкономразвития России", ("Минэкономразвития",)),
    (f"Министерство цифрового развития, связи и массовых коммуникаций {_RF}", "Минцифры России", ("Минцифры",)),
    (f"Министерство спорта {_RF}", "Минспорт России", ("Минспорт",)),
    (f"Министерство культуры {_RF}", "Минкультуры России", ("Минкультуры",)),
    (f"Министерство обороны {_RF}", "Минобороны России", ("Минобороны",)),
    (f"Министерство иностранных дел {_RF}", "МИД России", ("МИД",)),
    (f"Министерство природных ресурсов и экологии {_RF}", "Минприроды России", ("Минприроды",)),
    (f"Министерство промышленности и торговли {_RF}", "Минпромторг России", ("Минпромторг",)),
    (f"Министерство сельского хозяйства {_RF}", "Минсельхоз России", ("Минсельхоз",)),
    (f"Министерство строительства и жилищно-коммунального хозяйства {_RF}", "Минстрой России", ("Минстрой",)),
    (f"Министерство транспорта {_RF}", "Минтранс России", ("Минтранс",)),
    (f"Министерство энергетики {_RF}", "Минэнерго России", ("Минэнерго",)),
    ("Федеральная налоговая служба", "ФНС России", ("ФНС",)),
    (f"Федеральная служба безопасности {_RF}", "ФСБ России", ("ФСБ",)),
    ("Федеральная служба по техническому и экспортному контролю", "ФСТЭК России", ("ФСТЭК",)),
    ("Федеральная служба исполнения наказаний", "ФСИН России", ("ФСИН",)),
    ("Федеральная антимонопольная служба", "ФАС России", ("ФАС",)),
    ("Федеральная таможенная служба", "ФТС России", ("ФТС",)),
    ("Федеральная служба судебных приставов", "ФССП России", ("ФССП",)),
    ("Федеральная служба государственной статистики", "Росстат", ()),
    (
        "Федеральная служба по надзору в сфере связи, информационных технологий и массовых коммуникаций",
        "Роскомнадзор",
        (),
    ),
    ("Федеральная служба государственной регистрации, кадастра и картографии", "Росреестр", ()),
    ("Федеральная служба по экологическому, технологическому и атомному надзору", "Ростехнадзор", ()),
    ("Федеральная служба по надзору в сфере защиты прав потребителей и благополучия человека", "Роспотребнадзор", ()),
    (f"Центральный банк {_RF}", "Банк России", ("ЦБ РФ", "ЦБ")),
    (f"Генеральная прокуратура {_RF}", "Генпрокуратура России", ("Генпрокуратура",)),
    (f"Следственный комитет {_RF}", "СК России", ("СКР",)),
]
_COUNTRY = re.compile(r"\s+(?:России|РФ|Российской\s+Федерации)$")


def _terms(name: str) -> tuple[str, ...]:
    from tasks.text.analysis import analyse

    return tuple(analyse(name))


@cache
def _bodies() -> dict[tuple[str, ...], int]:
    """Terms of every form of every body → the body's index."""
    out: dict[tuple[str, ...], int] = {}
    for number, (full, abbreviation, others) in enumerate(FEDERAL_BODIES):
        for form in (full, abbreviation, *others):
            out[_terms(_COUNTRY.sub("", form) if form != full else form)] = number
    return out


def federal_body(name: str) -> int | None:
    """The index in FEDERAL_BODIES of the body `name` writes, in any case and form; None for any other name."""
    name = " ".join(name.split()).strip(' «»"')
    bodies = _bodies()
    found = bodies.get(_terms(name))
    if found is None and (short := _COUNTRY.sub("", name)) != name and len(short.split()) == 1:
        found = bodies.get(_terms(short))  # «МВД РФ», «Минтруда России», «Минюстом России»
    return found


def body_key(number: int) -> str:
    return f"federal:{FEDERAL_BODIES[number][1]}"


def body_shown(key: str) -> str | None:
    """«Министерство внутренних дел Российской Федерации (МВД России)» for a federal body's key."""
    if not key.startswith("federal:"):
        return None
    full, abbreviation, _ = next(b for b in FEDERAL_BODIES if b[1] == key.removeprefix("federal:"))
    return f"{full} ({abbreviation})"


_OBLIQUE = ("gent", "datv", "accs", "ablt", "loct")


def nominative_org(name: str) -> str | None:
    """`name` with its head noun and the adjectives before it in the nominative, or None where that cannot be read."""
    words = name.split(" ")
    if not words or not re.fullmatch(r"[А-ЯЁа-яё-]+", words[0]) or words[0].isupper():
        return None
    morph = _models()[2]
    head_at = None
    readings = []
    for at, word in enumerate(words[:5]):
        every = morph.parse(word)
        parses = [
            p for p in every if {"ADJF", "NOUN"} & set(p.tag.grammemes) and not {"Supr", "Cmp2"} & set(p.tag.grammemes)
        ]
        if not parses:
            return None  # «Лучшим …» (a superlative), «и», a number: not read
        readings.append(parses)
        if "NOUN" in every[0].tag:  # the head: the first word read first as a noun («новым» is an adjective first)
            head_at = at
            break
    if head_at is None:
        return None
    for number in ("sing", "plur"):
        for case in _OBLIQUE:
            chosen = [
                next(
                    (
                        p
                        for p in parses
                        if number in p.tag and p.tag.case == case and ("NOUN" if at == head_at else "ADJF") in p.tag
                    ),
                    None,
                )
                for at, parses in enumerate(readings)
            ]
            if any(p is None for p in chosen):
                continue
            gender = chosen[-1].tag.gender
            out = []
            for word, parse in zip(words, chosen, strict=False):
                wanted = {"nomn", number} | ({gender} if number == "sing" and "ADJF" in parse.tag and gender else set())
                form = parse.inflect(wanted)
                if form is None:
                    return None
                shown = form.word if "ё" in word.lower() else form.word.replace("ё", "е")  # spelt as written
                out.append(shown.capitalize() if word[0].isupper() else shown)
            return " ".join(out + words[len(out) :])
    return None


_APOSTROPHES = str.maketrans({"’": "'", "`": "'", "‘": "'", "ʼ": "'"})
_QUOTE = re.compile(r"[\"“”„«»]")


def _quotes_as_guillemets(name: str) -> str:
    """«АО "Международный аэропорт "Казань"» and «АО «Международный аэропорт «Казань»» written alike: a quote after
    a space or at the start opens, any other closes; apostrophes as «'»."""
    name = name.translate(_APOSTROPHES)
    return _QUOTE.sub(lambda m: "«" if m.start() == 0 or name[m.start() - 1].isspace() else "»", name)


def org_key(name: str) -> str:
    """The merge key of an organisation's name: a federal body's, else `organisation_key` of the name with its quotes
    written alike and a name quoted whole («"Евразийское водное партнерство"») read without them."""
    from tasks.meta.names import organisation_key

    if (body := federal_body(name)) is not None:
        return body_key(body)
    name = _quotes_as_guillemets(" ".join(name.split()))
    whole = re.fullmatch(r"«([^«»]+)»", name)
    return organisation_key(whole.group(1).lower() if whole else name)  # «"ОмскВодоканал"» = «Омскводоканал»


def ungrammatical(name: str) -> bool:
    """An adjective before a head noun that it agrees with in no case and number: OCR's debris («Ослиной совет»), not
    a body's name."""
    words = [w.strip("'\"«»“”„.,;:") for w in name.split()]
    if len(words) < 2 or not all(re.fullmatch(r"[А-ЯЁа-яё-]+", w) for w in words[:2]):
        return False
    morph = _models()[2]
    first, second = morph.parse(words[0]), morph.parse(words[1])
    if not all("ADJF" in p.tag for p in first) or "NOUN" not in second[0].tag:
        return False
    agree = {(p.tag.case, p.tag.number) for p in first} & {
        (p.tag.case, p.tag.number) for p in second if "NOUN" in p.tag
    }
    return not agree


_FORM_FIRST = re.compile(r"^[А-ЯЁA-Z]{2,6}\s*(?=«)")


def _as_written_alike(name: str) -> str:
    """Spaces, long legal forms («Акционерное общество» → «АО») and quotes written alike."""
    from tasks.meta.names import legal_form

    return _quotes_as_guillemets(legal_form(" ".join(name.split())))


def core_lemmas(name: str) -> tuple[str, ...]:
    """A name without its legal form and quotes, each word in its dictionary form: «АО "Омскводоканал"»,
    «"ОмскВодоканал"» and «Омскводоканалом» are («омскводоканал»,)."""
    name = _FORM_FIRST.sub("", _as_written_alike(name))
    morph = _models()[2]
    return tuple(morph.parse(w)[0].normal_form.replace("ё", "е") for w in re.findall(r"\w+", name.lower()))


def formal(name: str) -> bool:
    """The name opens with a legal form before its quoted name («АО «Омскводоканал»»)."""
    return bool(_FORM_FIRST.match(_as_written_alike(name)))

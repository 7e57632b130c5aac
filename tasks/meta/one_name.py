"""People an encyclopedia or a chronicle names by one name: «Аристотель», «Тэмуджин», «Бортэ».

The NER tagger marks such a word PER, and `person_name` finds no surname in it: pymorphy reads «Тэмуджин» and «Бортэ»
as first names. One such mention says little — a first name alone («Джона») or a
misread word — so a one-word name is a person only when the tagger marks it PER at least twice in one document (in any
case: «Аристотель», «Аристотеля»), more often than the text writes it in lower case, the dictionary reads it as a
first name or does not know it (not «Исполнителя», a contract's defined term; so «Тесла», a case of «тесло», is
not taken), and no fuller name in the document has it as its first name («Анна Петрова» … «Анна»). It is shown in a form
that can be a nominative (pymorphy reads one in it: «Тесла», not «Тесле»), the shortest and then the most frequent
(«Тэмуджин», not «Тэмуджина»).
"""

from __future__ import annotations

import re
from collections import defaultdict

from tasks.meta.models import _models, parse
from tasks.meta.surnames import plainly_oblique, surname_key

ONE_WORD = re.compile(r"[А-ЯЁ][а-яё]{3,}")
MIN_MENTIONS = 2


def in_table_row(page_text: str, word: str) -> bool:
    """`word` stands in a table row of the page as served («Заголовочек 1 | Заголовочек 2»; the name rules read the
    cells joined): tables are not mined for one-name people."""
    return any("|" in line and word in line for line in page_text.splitlines())


def one_name_key(word: str) -> str:
    """«Аристотель», «Аристотеля» → «аристотел»; «Тэмуджин», «Тэмуджина» → «тэмуджин»."""
    return surname_key(word).removesuffix("ь")


def may_be_a_name(word: str) -> bool:
    """A first name by the dictionary («Тэмуджин», «Бортэ», «Аристотель») or a word it does not know; never a place
    («Виттенберга»), an adjective («Быстринского») or only a common word («Исполнителя», «Доктор», «Юань»: a document's
    defined terms are capitalised, and so is a fictional hero)."""
    readings = parse(word)
    if any("Geox" in r.tag for r in readings) or "ADJF" in readings[0].tag:
        return False
    return any("Name" in r.tag for r in readings) or not _models()[2].word_is_known(word.lower())


def one_name_people(words: list[str], first_names: set[str], text: str) -> dict[str, str]:
    """Of the one-word PER mentions `words` of one document (in order), those that name a person by one name: each
    word → the form its person is shown in. `first_names`: the first names of the document's fuller names; `text`:
    the document's text as the name rules read it."""
    groups: dict[str, list[str]] = defaultdict(list)
    for word in words:
        groups[one_name_key(word)].append(word)
    taken_as_first = {one_name_key(name) for name in first_names}
    lowered = text.replace("ё", "е")
    shown: dict[str, str] = {}
    for key, forms in groups.items():
        if len(forms) < MIN_MENTIONS or key in taken_as_first:
            continue
        if not all(may_be_a_name(form) for form in forms):
            continue
        if len(re.findall(rf"(?<![А-ЯЁа-яё]){re.escape(key)}", lowered)) >= len(forms):
            continue  # the text writes it in lower case as often: a common word
        nominative = {f for f in forms if any("nomn" in p.tag for p in parse(f))}  # «Тесла», not «Тесле»
        best = max(set(forms), key=lambda f: (not plainly_oblique(f), f in nominative, -len(f), forms.count(f), f))
        shown.update((form, best) for form in forms)
    return shown

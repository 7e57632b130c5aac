"""Is a question about the collection as a whole? Only then may a meta-document outrank the documents themselves.

The meta-documents (docs/meta.md) answer what no single document does: lists, counts, «who/what/when across the
documents». For any other question they are in the way: a register part shares a surname or an organisation with
almost any question, and in the demo a chronology or register chunk took rank 2 for nearly every question. So the
retriever (tasks/retrieval/retriever.py) keeps meta chunks out of the fusion of an ordinary question and lists them
after every document hit; for a collection question they rank as the fusion places them.

A collection question is recognised by what it asks for, not by a fitted threshold:
- an overview word on its own: «реестр», «оглавление», «хронология», «по датам», «по годам»;
- «перечисли», «список», «перечень», «назови», «покажи» with a thing the collection holds (documents, files,
  folders, persons, organisations, events …), unless only some or examples are asked for: «список организаций и их
  ИНН», «перечисли все компании-контрагенты», not «перечислите некоторые из крупных компаний» (an XQuAD question
  about the world);
- «сколько» with such a thing and a pointer at the collection, or with documents, files or folders: «сколько всего
  приказов в архиве», not «сколько людей умерло от чумы» nor «сколько стоит»;
- «какие / все / кто» with such a thing and a pointer: «какие организации упоминаются в документах»; «кто
  упоминается»; «что есть в базе»; «что и когда происходило», «какие события», «события 2023 года».
Checked on every question set korpus has (tests/unit/test_collection_question.py): no ordinary question of the
archive-style set, the sample archive or XQuAD-ru (623) is taken for one.
"""

from __future__ import annotations

import re

_NOUNS = (
    r"(?:документ|файл|папк|приказ|договор|акт\b|акта|актов|письм|писем|протокол|распоряжени|постановлени|записей|запис[ьи]"
    r"|страниц|лиц\b|лица|люд|человек|персон|сотрудник|организаци|компани|контрагент|учреждени|предприяти"
    r"|упоминани|событи|дат)"
)
# Nouns that name the collection's own contents: with these a count or a listing needs no other pointer.
_OWN = r"(?:документ|файл|папк|контрагент)"
_STRONG = re.compile(r"\b(?:реестр\w*|оглавлени\w*|хронолог\w*|по\s+датам|по\s+годам|в\s+хронологическом)")
_LISTING = re.compile(r"\b(?:перечисл\w*|перечень|перечня|список|списк\w*|назови|покажи)\b")
_COUNT = re.compile(rf"\bсколько\b(?:\s+\w+){{0,3}}?\s+{_NOUNS}")
_WHICH = re.compile(rf"\b(?:какие|каких|какое|все|всех|кто|кого|кем)\b.*?{_NOUNS}")
_ANCHOR = re.compile(
    r"\b(?:есть|имеются|имеется|хранятся|хранится|лежат|упомина\w*|упомянут\w*|встречаю\w*|фигурир\w*"
    r"|(?:в|во|из)\s+(?:базе|базы|архиве|архива|коллекции|корпусе|документах|документов|папке|папках)|архива"
    r"|коллекции)\b"
)
_SOME = re.compile(r"\b(?:некоторы\w+|несколько|нескольк\w+|пример\w*|крупн\w+|известн\w+)\b")
_WHAT_IS_HELD = re.compile(r"\bчто\s+(?:есть|хранится|лежит)\s+(?:в|во)\s+(?:базе|архиве|коллекции|корпусе)")
_WHO = re.compile(r"\b(?:кто|кого|какие\s+люди|какие\s+лица)\b.*?\b(?:упомина\w*|упомянут\w*|фигурир\w*|встречае\w*)")
_EVENTS = re.compile(r"\b(?:что\s+и\s+когда|какие\s+события|события\s+\d{4}|события\s+за\b|события\s+по\b)")


def is_collection_question(question: str) -> bool:
    """True for a question about the collection as a whole (a list, a count, who/what/when across documents)."""
    text = " ".join(question.lower().replace("ё", "е").split())
    if _STRONG.search(text) or _WHO.search(text) or _EVENTS.search(text) or _WHAT_IS_HELD.search(text):
        return True
    anchored = bool(_ANCHOR.search(text))
    own = bool(re.search(rf"\b{_OWN}", text))
    if _LISTING.search(text) and re.search(_NOUNS, text) and not _SOME.search(text):
        return True
    if _COUNT.search(text) and (anchored or own):
        return True
    return bool(_WHICH.search(text) and anchored)

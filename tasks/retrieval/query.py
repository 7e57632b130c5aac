"""What a real question carries that should not steer ranking, taken out before retrieval (`clean_query`).

People paste: invisible characters (zero-width spaces and joiners, soft hyphens, byte-order marks), links and
e-mail addresses, quoted reply chains (lines starting with `>`), and wrap a question in greetings and thanks
(«Здравствуйте!», «Добрый день», «подскажите, пожалуйста», «заранее спасибо», «С уважением, Иван»). Each is one
documented step below; each keeps what it cannot be sure of. Identifiers are never altered: ИНН, ОГРН and
«№ 45-17/2023» pass through as written (no step touches digits or №). A message that is nothing but politeness
(«Здравствуйте!») is returned as it came, so a query never becomes empty.

A message may hold several questions (`split_questions`): each is searched on its own and the hits interleaved
(`search_message`), so the second question's answer is not drowned by the first's. CLI, API and eval all read a
message through `search_message`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

INVISIBLE = re.compile("[\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad]")
URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
QUOTED_LINE = re.compile(r"^\s*>.*$", re.MULTILINE)
# Greetings and thanks as whole phrases (with their punctuation), wherever they stand in the message.
POLITENESS = re.compile(
    r"(?<![\w-])(?:"
    r"здравствуйте|здравствуй|добрый\s+(?:день|вечер|утро)|доброе\s+утро|доброго\s+(?:дня|времени\s+суток)|"
    r"привет(?:ствую)?|уважаемые\s+коллеги|коллеги|"
    r"подскажите(?:\s*,?\s*пожалуйста)?|скажите(?:\s*,?\s*пожалуйста)?|пожалуйста|"
    r"заранее\s+(?:большое\s+)?спасибо|(?:большое\s+)?спасибо(?:\s+заранее)?|благодарю(?:\s+заранее)?|"
    r"с\s+уважением(?:\s*,\s*[А-ЯЁ][а-яё]+(?:\s+[А-ЯЁ][а-яё]+)?)?|"
    r"буду\s+(?:очень\s+)?благодарен|буду\s+(?:очень\s+)?благодарна|извините\s+за\s+беспокойство"
    r")(?![\w-])[!.,:;)]*",
    re.IGNORECASE,
)
_SPACES = re.compile(r"[ \t]+")
_BLANK_PUNCT = re.compile(r"^[\s!.,:;()\-–—]+|[\s,:;(\-–—]+$")


def clean_query(text: str) -> str:
    """The question without invisible characters, links, e-mail addresses, quoted replies and politeness."""
    cleaned = INVISIBLE.sub("", text)
    cleaned = QUOTED_LINE.sub(" ", cleaned)
    cleaned = URL.sub(" ", cleaned)
    cleaned = EMAIL.sub(" ", cleaned)
    cleaned = POLITENESS.sub(" ", cleaned)
    cleaned = " ".join(_SPACES.sub(" ", line).strip() for line in cleaned.splitlines() if line.strip())
    cleaned = _BLANK_PUNCT.sub("", cleaned)
    return cleaned if re.search(r"\w", cleaned) else " ".join(INVISIBLE.sub("", text).split())


# «Где акт проверки склада? И кто подписал договор поставки?» — a question mark closing a question of its own,
# followed by the next one. Each part must be a question in its own right (MIN_PART_WORDS words); a «?» inside a
# short aside, a number or a quotation keeps the message whole.
_QUESTION_END = re.compile(r"(?<=[?？])\s+(?=\S)")
MIN_PART_WORDS = 3
MAX_PARTS = 4


def split_questions(text: str) -> list[str]:
    """The questions a message holds, in order: one part when it is a single question (or a split would leave a
    fragment). Identifiers and everything else stay as written; only the whitespace between questions goes."""
    parts = [p.strip() for p in _QUESTION_END.split(text) if p.strip()]
    if len(parts) < 2 or any(len(re.findall(r"\w+", p)) < MIN_PART_WORDS for p in parts):
        return [text]
    if len(parts) > MAX_PARTS:  # the rest stays together with the last question
        return [*parts[: MAX_PARTS - 1], " ".join(parts[MAX_PARTS - 1 :])]
    return parts


def interleave(results: Sequence[Sequence[dict[str, Any]]], k: int) -> list[dict[str, Any]]:
    """One hit list from each question's hits: first of each question in turn, then second, and so on — each
    question gets its best answer near the top — with a chunk found by two questions kept once, where it first
    came. Each hit says which question found it (`question`, 0-based)."""
    merged: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rank in range(max((len(r) for r in results), default=0)):
        for number, hits in enumerate(results):
            if rank < len(hits) and hits[rank]["chunk_id"] not in seen:
                seen.add(hits[rank]["chunk_id"])
                merged.append({**hits[rank], "question": number})
    return merged[:k]


def search_message(
    text: str,
    search: Callable[[str, Any], list[dict[str, Any]]],
    embed: Callable[[list[str]], Sequence[Any]] | None,
    k: int,
) -> list[dict[str, Any]]:
    """A message as people send it, searched: cleaned (`clean_query`), split into its questions
    (`split_questions`), each question searched (`search(question, vector)`, vectors from `embed` in one batch, or
    None for a lexical mode), and the hits interleaved. A single question is searched as it is."""
    parts = split_questions(clean_query(text))
    vectors = list(embed(parts)) if embed is not None else [None] * len(parts)
    if len(parts) == 1:
        return search(parts[0], vectors[0])[:k]
    return interleave([search(part, vector) for part, vector in zip(parts, vectors, strict=True)], k)

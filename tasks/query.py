"""What a real question carries that should not steer ranking, taken out before retrieval (`clean_query`).

People paste: invisible characters (zero-width spaces and joiners, soft hyphens, byte-order marks), links and
e-mail addresses, quoted reply chains (lines starting with `>`), and wrap a question in greetings and thanks
(«Здравствуйте!», «Добрый день», «подскажите, пожалуйста», «заранее спасибо», «С уважением, Иван»). Each is one
documented step below; each keeps what it cannot be sure of. Identifiers are never altered: ИНН, ОГРН and
«№ 45-17/2023» pass through as written (no step touches digits or №). A message that is nothing but politeness
(«Здравствуйте!») is returned as it came, so a query never becomes empty.
"""

from __future__ import annotations

import re

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

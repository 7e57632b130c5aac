"""Optional model extraction of dated events (`KORPUS_LLM_URL`, any OpenAI-compatible chat endpoint).

The model is asked for a JSON array of records `{"date", "event", "persons"}` per page. Every record is validated
here: an object with exactly those fields, an event of 3-500 characters, persons a list of strings, and a date
that korpus's own date rules read (tasks/meta/dates.py: «12 марта 2023 г.», «12.03.2023», «2023-03-12», «в марте
1998 года» …). A record that fails any check is refused and counted, never repaired; a reply that is not a JSON
array refuses the page's records as a whole. A valid record whose date the rules already found on that page adds
nothing (the rule's sentence stands); the others join the chronology with the page's place. The model extracts;
merging, sorting and counting stay code (tasks/meta/documents.py).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.meta.dates import find_dates
from tasks.runtime.chat import ChatClient, ChatError

logger = logging.getLogger("korpus.meta")
PROMPT = (
    "Извлеки из текста все события, у которых указана дата. Ответь только JSON-массивом объектов вида "
    '{"date": "дата как в тексте или ГГГГ-ММ-ДД", "event": "что произошло, одним предложением", '
    '"persons": ["кто участвовал"]}. Если событий нет, ответь [].'
)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_ISO = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$")


class EventRecord(BaseModel):
    """One record as the model must write it."""

    model_config = ConfigDict(extra="forbid")
    date: str = Field(min_length=4, max_length=60)
    event: str = Field(min_length=3, max_length=500)
    persons: list[str] = Field(default_factory=list)


@dataclass
class ExtractedEvent:
    first: str
    last: str
    event: str
    persons: list[str]


def normalise_date(written: str) -> tuple[str, str] | None:
    """(first, last) ISO for a date the rules read, or an ISO date as given; None otherwise."""
    written = written.strip()
    if _ISO.match(written):
        found = find_dates(f"{written} г." if len(written) == 4 else written)
        if found:
            return found[0].first, found[0].last
        return (written, written) if len(written) == 7 and 1 <= int(written[5:]) <= 12 else None
    found = find_dates(written)
    return (found[0].first, found[0].last) if len(found) == 1 else None


def parse_records(reply: str) -> tuple[list[ExtractedEvent], int]:
    """Valid events from a reply, and how many records were refused (a reply that is no JSON array: 1)."""
    try:
        records = json.loads(_FENCE.sub("", reply.strip()))
    except ValueError:
        return [], 1
    if not isinstance(records, list):
        return [], 1
    valid: list[ExtractedEvent] = []
    refused = 0
    for record in records:
        try:
            parsed = EventRecord.model_validate(record)
        except ValidationError:
            refused += 1
            continue
        dates = normalise_date(parsed.date)
        if dates is None:
            refused += 1
            continue
        valid.append(ExtractedEvent(dates[0], dates[1], " ".join(parsed.event.split()), parsed.persons))
    return valid, refused


@dataclass
class LlmEvents:
    """Ask the endpoint for a page's dated events; a page it cannot answer is counted, not fatal."""

    client: ChatClient

    @property
    def variant(self) -> str:
        return f"llm:{self.client.model}"

    def page_events(self, text: str) -> tuple[list[ExtractedEvent], int]:
        try:
            reply = self.client.complete([{"role": "system", "content": PROMPT}, {"role": "user", "content": text}])
        except ChatError as exc:  # retried already (transient) or refused (4xx): the rules' events stand
            logger.warning("LLM event extraction failed on a page: %s", exc)
            return [], 1
        return parse_records(reply)

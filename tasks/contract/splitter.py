"""Optional LLM boundary splitter over an OpenAI-compatible chat-completions endpoint (`KORPUS_SPLITTER_URL`).

The model sees a page's units, numbered, and may answer only `{"splits": [unit indices], "topic": "…"}`: the
indices where a new chunk starts. The host cuts, so every chunk body stays an exact substring of the page. Any
invalid answer — not JSON, wrong shape, indices not strictly increasing or out of range, a timeout or an HTTP
error that outlasts the chat client's retries (tasks/runtime/chat.py) — falls back to the deterministic policy, and the
reason is counted.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass, field

from korpus.core.datamodel import PageResult, Unit, UnitKind
from tasks.contract.furniture import content_units
from tasks.runtime.chat import ChatClient, ChatError, ChatUnavailable
from tasks.runtime.retry import RetryPolicy

SYSTEM_PROMPT = (
    "Ты делишь документ на смысловые фрагменты для поиска. Тебе дан пронумерованный список единиц текста "
    "(заголовки, предложения, пункты, таблицы). Ответь только JSON: "
    '{"splits": [номера единиц, с которых начинается новый фрагмент, по возрастанию], "topic": "тема"}. '
    "Не отделяй исключение от правила, заголовок от текста под ним, таблицу от её заголовка."
)
RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {
        "splits": {"type": "array", "items": {"type": "integer", "minimum": 1}},
        "topic": {"type": "string"},
    },
    "required": ["splits"],
    "additionalProperties": False,
}


class SplitterRefused(ValueError):
    """The splitter's answer cannot be used; `reason` is the counted category."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def validate_splits(content: str, unit_count: int) -> list[int]:
    """Parse and check an answer; raises SplitterRefused with a reason category."""
    try:
        answer = json.loads(content)
    except (json.JSONDecodeError, TypeError) as exc:
        raise SplitterRefused("invalid-json", str(exc)) from exc
    splits = answer.get("splits") if isinstance(answer, dict) else None
    if not isinstance(splits, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in splits):
        raise SplitterRefused("invalid-shape", f"expected {{'splits': [int, …]}}, got {content[:200]!r}")
    if any(b <= a for a, b in itertools.pairwise(splits)):
        raise SplitterRefused("non-monotonic", str(splits))
    if any(i <= 0 or i >= unit_count for i in splits):
        raise SplitterRefused("out-of-range", f"{splits} for {unit_count} units")
    return splits


def check_structure(page: PageResult, units: list[Unit], splits: list[int]) -> None:
    """The hard rules hold whoever proposes the cut: never right after a heading, never before an exception."""
    from tasks.contract.chunking import is_exception_sentence

    for i in splits:
        if units[i - 1].kind is UnitKind.heading:
            raise SplitterRefused("breaks-structure", f"split {i} leaves a heading at the end of a chunk")
        if units[i].kind is UnitKind.sentence and is_exception_sentence(page.text[units[i].start : units[i].end]):
            raise SplitterRefused("breaks-structure", f"split {i} separates an exception from its rule")


@dataclass
class LlmSplitter:
    """Asks the endpoint for boundaries; keeps a tally of answers used and of fallbacks by reason.

    >>> splitter = LlmSplitter("http://127.0.0.1:8000/v1", model="splitter")
    >>> spans = splitter.page_spans(page)   # None → use the deterministic policy
    """

    url: str
    model: str = "splitter"
    timeout: float = 20.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    used: int = 0
    fallbacks: Counter = field(default_factory=Counter)

    def ask(self, page: PageResult, units: list[Unit]) -> list[int]:
        numbered = "\n".join(
            f"{i}. [{u.kind.value}] {' '.join(page.text[u.start : u.end].split())[:400]}" for i, u in enumerate(units)
        )
        client = ChatClient(self.url, self.model, self.timeout, self.retry)
        try:
            content = client.complete(
                [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": numbered}],
                response_format={"type": "json_schema", "json_schema": {"name": "splits", "schema": RESPONSE_SCHEMA}},
            )
        except ChatUnavailable as exc:
            raise SplitterRefused("timeout" if "no answer within" in str(exc) else "http-error", str(exc)) from exc
        except ChatError as exc:
            raise SplitterRefused("http-error", str(exc)) from exc
        return validate_splits(content, len(units))

    def page_spans(self, page: PageResult) -> list[tuple[int, int, list[str], str]] | None:
        units = content_units(page.units)
        if len(units) < 2:
            return None
        try:
            splits = self.ask(page, units)
            check_structure(page, units, splits)
        except SplitterRefused as refused:
            self.fallbacks[refused.reason] += 1
            return None
        self.used += 1
        starts = [0, *splits]
        ends = [*splits, len(units)]
        return [(units[a].start, units[b - 1].end, [], "") for a, b in zip(starts, ends, strict=True)]

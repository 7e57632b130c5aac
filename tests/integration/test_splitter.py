"""The LLM boundary splitter's real HTTP client against a local OpenAI-compatible stand-in (not a model).

The stand-in is a tiny chat-completions server on a loopback port that answers what each test scripts:
a valid split, invalid JSON, indices out of order or out of range, an HTTP error, or nothing in time.
"""

from __future__ import annotations

import json

import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import build_chunks, chars_as_tokens
from tasks.contract.splitter import LlmSplitter
from tasks.runtime.retry import RetryPolicy, counting_retries
from tasks.text.structure import text_structure

from .chat_stand_in import Script, chat_stand_in

pytestmark = pytest.mark.integration
TEXT = "# Заголовок\n\nПервое предложение. Второе предложение.\n\n## Раздел\n\nТретье предложение. Четвёртое."


SCRIPT = Script()


@pytest.fixture(scope="module")
def stand_in() -> str:
    with chat_stand_in(SCRIPT) as url:
        yield url


def _answer(content: str = "", status: int = 200, sleep: float = 0.0) -> None:
    SCRIPT.content, SCRIPT.status, SCRIPT.sleep = content, status, sleep


def _run(url: str, timeout: float = 5.0) -> tuple[list, LlmSplitter]:
    source = Source(source_id="a.pdf", version="ee" * 32, path="/a", kind=SourceKind.pdf, owner="o", access="public")
    page = PageResult(
        source_id="a.pdf",
        source_version="ee" * 32,
        page=1,
        text=TEXT,
        method="text-layer",
        units=text_structure(TEXT, markdown=True),
    )
    splitter = LlmSplitter(url, model="splitter-test", timeout=timeout, retry=RetryPolicy(attempts=2, backoff=0.01))
    chunks, _ = build_chunks(source, [page], "structure-v1", count=chars_as_tokens, spans_override=splitter.page_spans)
    for chunk in chunks:
        assert TEXT[chunk.locator.start : chunk.locator.end] == chunk.body
    return chunks, splitter


def test_valid_answer_is_used_and_the_host_cuts(stand_in: str) -> None:
    # units: 0 heading, 1-2 sentences, 3 heading, 4-5 sentences → split before the second heading and before 5
    _answer(json.dumps({"splits": [3, 5], "topic": "проверка"}))
    chunks, splitter = _run(stand_in)
    assert [c.body for c in chunks] == [
        "# Заголовок\n\nПервое предложение. Второе предложение.",
        "## Раздел\n\nТретье предложение.",
        "Четвёртое.",
    ]
    assert splitter.used == 1 and not splitter.fallbacks
    request = SCRIPT.requests[-1]
    assert request["model"] == "splitter-test" and request["response_format"]["type"] == "json_schema"
    assert "0. [heading] # Заголовок" in request["messages"][1]["content"]


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ({"content": "Вот границы: 3 и 5"}, "invalid-json"),
        ({"content": json.dumps({"boundaries": [3]})}, "invalid-shape"),
        ({"content": json.dumps({"splits": ["3"]})}, "invalid-shape"),
        ({"content": json.dumps({"splits": [5, 3]})}, "non-monotonic"),
        ({"content": json.dumps({"splits": [3, 3]})}, "non-monotonic"),
        ({"content": json.dumps({"splits": [0, 3]})}, "out-of-range"),
        ({"content": json.dumps({"splits": [3, 60]})}, "out-of-range"),
        ({"content": json.dumps({"splits": [1]})}, "breaks-structure"),
        ({"status": 500, "content": "boom"}, "http-error"),
        ({"sleep": 1.5, "content": json.dumps({"splits": [3]})}, "timeout"),
    ],
)
def test_bad_answers_fall_back_to_the_policy_and_are_counted(stand_in: str, script: dict, reason: str) -> None:
    _answer(**script)
    deterministic, _ = build_chunks(
        Source(source_id="a.pdf", version="ee" * 32, path="/a", kind=SourceKind.pdf, owner="o", access="public"),
        [
            PageResult(
                source_id="a.pdf",
                source_version="ee" * 32,
                page=1,
                text=TEXT,
                method="text-layer",
                units=text_structure(TEXT, markdown=True),
            )
        ],
        "structure-v1",
        count=chars_as_tokens,
    )
    chunks, splitter = _run(stand_in, timeout=0.5)
    assert splitter.used == 0 and splitter.fallbacks == {reason: 1}
    assert [c.body for c in chunks] == [c.body for c in deterministic]


def test_a_restarting_server_is_retried_not_fallen_back_on(stand_in: str) -> None:
    # one 503 then one connection dropped mid-request: the third call answers, within the policy's 4 attempts
    _answer(json.dumps({"splits": [3]}))
    SCRIPT.unavailable, SCRIPT.drop, SCRIPT.faults[:] = 1, 1, []
    sent = len(SCRIPT.requests)
    page = PageResult(
        source_id="a.pdf",
        source_version="ee" * 32,
        page=1,
        text=TEXT,
        method="text-layer",
        units=text_structure(TEXT, markdown=True),
    )
    splitter = LlmSplitter(stand_in, model="splitter-test", retry=RetryPolicy(attempts=4, backoff=0.01))
    with counting_retries() as retries:
        spans = splitter.page_spans(page)
    assert SCRIPT.faults == ["503", "drop"] and len(SCRIPT.requests) == sent + 3
    assert spans is not None and splitter.used == 1 and not splitter.fallbacks
    assert retries[0] == 2

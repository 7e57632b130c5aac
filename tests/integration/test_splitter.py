"""The LLM boundary splitter's real HTTP client against a local OpenAI-compatible stand-in (not a model).

The stand-in is a tiny chat-completions server on a loopback port that answers what each test scripts:
a valid split, invalid JSON, indices out of order or out of range, an HTTP error, or nothing in time.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from korpus.datamodel import PageResult, Source, SourceKind
from tasks.chunking import build_chunks, chars_as_tokens
from tasks.splitter import LlmSplitter
from tasks.structure import text_structure

pytestmark = pytest.mark.integration
TEXT = "# Заголовок\n\nПервое предложение. Второе предложение.\n\n## Раздел\n\nТретье предложение. Четвёртое."


class StandIn(BaseHTTPRequestHandler):
    script: ClassVar[dict] = {}
    requests: ClassVar[list] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StandIn.requests.append(body)
        answer = StandIn.script
        if answer.get("sleep"):
            time.sleep(answer["sleep"])
        status = answer.get("status", 200)
        payload = {"choices": [{"message": {"role": "assistant", "content": answer.get("content", "")}}]}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def stand_in() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _run(url: str, timeout: float = 5.0) -> tuple[list, LlmSplitter]:
    source = Source(source_id="a.pdf", version="ee" * 32, path="/a", kind=SourceKind.pdf, owner="o", access="public")
    page = PageResult(source_id="a.pdf", source_version="ee" * 32, page=1, text=TEXT, method="text-layer",
                      units=text_structure(TEXT, markdown=True))  # fmt: skip
    splitter = LlmSplitter(url, model="splitter-test", timeout=timeout)
    chunks, _ = build_chunks(source, [page], "structure-v1", count=chars_as_tokens, spans_override=splitter.page_spans)
    for chunk in chunks:
        assert TEXT[chunk.locator.start : chunk.locator.end] == chunk.body
    return chunks, splitter


def test_valid_answer_is_used_and_the_host_cuts(stand_in: str) -> None:
    # units: 0 heading, 1-2 sentences, 3 heading, 4-5 sentences → split before the second heading and before 5
    StandIn.script = {"content": json.dumps({"splits": [3, 5], "topic": "проверка"})}
    chunks, splitter = _run(stand_in)
    assert [c.body for c in chunks] == [
        "# Заголовок\n\nПервое предложение. Второе предложение.",
        "## Раздел\n\nТретье предложение.",
        "Четвёртое.",
    ]
    assert splitter.used == 1 and not splitter.fallbacks
    request = StandIn.requests[-1]
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
    StandIn.script = script
    deterministic, _ = build_chunks(
        Source(source_id="a.pdf", version="ee" * 32, path="/a", kind=SourceKind.pdf, owner="o", access="public"),
        [PageResult(source_id="a.pdf", source_version="ee" * 32, page=1, text=TEXT, method="text-layer",
                    units=text_structure(TEXT, markdown=True))],
        "structure-v1", count=chars_as_tokens,
    )  # fmt: skip
    chunks, splitter = _run(stand_in, timeout=0.5)
    assert splitter.used == 0 and splitter.fallbacks == {reason: 1}
    assert [c.body for c in chunks] == [c.body for c in deterministic]

"""The mirror's bulk bodies (tasks/index/opensearch_mirror.bulks): bounded in actions and bytes, never cut between an
action and its document, every line once and in order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.index.opensearch_mirror import bulks

pytestmark = pytest.mark.unit

action = st.one_of(
    st.builds(lambda i: [{"delete": {"_id": i}}], st.text(max_size=8)),
    st.builds(lambda i, t: [{"index": {"_id": i}}, {"text": t}], st.text(max_size=8), st.text(max_size=300)),
    st.builds(lambda i, a: [{"update": {"_id": i}}, {"doc": {"access": a}}], st.text(max_size=8), st.text(max_size=5)),
)


@given(st.lists(action, max_size=60), st.integers(200, 3000), st.integers(1, 7))
def test_bodies_are_bounded_and_hold_every_line_in_order(items: list, max_bytes: int, max_actions: int) -> None:
    lines = [line for item in items for line in item]
    bodies = list(bulks(lines, max_bytes=max_bytes, max_actions=max_actions))
    sent = [json.loads(line) for body in bodies for line in body.split("\n")[:-1]]
    assert sent == lines
    for body in bodies:
        parsed = [json.loads(line) for line in body.split("\n")[:-1]]
        headers = [i for i, line in enumerate(parsed) if set(line) <= {"delete", "index", "update"} and len(line) == 1]
        assert parsed and body.endswith("\n")
        assert len(headers) <= max_actions
        assert len(body.encode()) <= max_bytes or len(headers) == 1  # one action over the bound goes alone
        assert "delete" in parsed[0] or "index" in parsed[0] or "update" in parsed[0]  # never cut after a header

"""How the default embedder cuts texts into batches: by a budget of padded tokens, shortest first."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.retrieval.embedding import MAX_ROWS, TOKEN_BUDGET, length_batches

pytestmark = pytest.mark.unit


@given(st.lists(st.integers(1, 600), max_size=300), st.integers(16, 8192), st.integers(1, 80))
def test_every_text_runs_once_within_the_budget(lengths: list[int], budget: int, max_rows: int) -> None:
    batches = length_batches(lengths, budget, max_rows)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= max_rows
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget, batch
    # shortest first, so a batch pads only up to its own longest text: no later batch holds a shorter one
    widths = [[lengths[i] for i in b] for b in batches]
    assert all(max(a) <= min(b) for a, b in itertools.pairwise(widths))
    # and a batch is cut only when the next text would not fit: greedy, no half-empty batch in the middle
    for a, b in itertools.pairwise(batches):
        assert len(a) == max_rows or (len(a) + 1) * lengths[b[0]] > budget


def test_the_default_budget_runs_letters_many_at_a_time_and_long_paragraphs_a_few() -> None:
    assert [len(b) for b in length_batches([12] * 100)] == [MAX_ROWS, 100 - MAX_ROWS]
    letters, long = TOKEN_BUDGET // 95, TOKEN_BUDGET // 512
    assert letters >= 16 and [len(b) for b in length_batches([95] * (4 * letters))] == [letters] * 4
    assert long >= 2 and [len(b) for b in length_batches([512] * (3 * long))] == [long] * 3

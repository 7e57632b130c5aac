"""tasks/retrieval/tuning.py's parts: the halves are a fixed partition, the remembered backend answers what the
backend answers (asking it once per arguments), the paired interval holds its mean."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.retrieval.evaluation import Question
from tasks.retrieval.tuning import Remembered, halves, paired_interval

pytestmark = pytest.mark.unit


@given(st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=40))
def test_the_halves_partition_the_questions_the_same_way_every_time(ids: list[str]) -> None:
    questions = [Question(id=i, question="вопрос") for i in ids]
    fit, check = halves(questions)
    assert sorted(q.id for q in fit + check) == sorted(ids) and not {q.id for q in fit} & {q.id for q in check}
    assert halves(list(reversed(questions))) == (list(reversed(fit)), list(reversed(check)))


class Counting:
    def __init__(self) -> None:
        self.calls = 0
        self.name = "counting"

    def vector(self, vector: np.ndarray, scopes: list[str], depth: int) -> list[tuple[str, float]]:
        self.calls += 1
        return [(f"c{int(vector.sum())}", float(depth))]


def test_a_remembered_backend_asks_once_per_arguments_and_passes_the_rest() -> None:
    backend = Counting()
    memo = Remembered(backend)
    one, two = np.ones(3, dtype=np.float32), np.full(3, 2, dtype=np.float32)
    assert memo.vector(one, ["public"], 5) == memo.vector(one, ["public"], 5) == backend.vector(one, ["public"], 5)
    assert memo.vector(two, ["public"], 5) != memo.vector(one, ["public"], 5)
    assert memo.vector(one, ["hr"], 5) == [("c3", 5.0)]
    assert backend.calls == 4 and memo.asked == 3 and memo.name == "counting"


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=50))
def test_the_paired_interval_holds_its_mean(diffs: list[float]) -> None:
    found = paired_interval(diffs)
    assert found["low"] - 1e-4 <= found["mean"] <= found["high"] + 1e-4
    assert found == paired_interval(diffs)  # seeded

"""Score fusion (tasks/retrieval/fusion.py, #48 item 1): the normalisations of Bruch, Gai and Ingber (2023) and the
convex combination benchmarks/fusion.py compares with RRF. Properties over any two scored lists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.retrieval.fusion import convex_fuse, normalised

pytestmark = pytest.mark.unit

scored = st.lists(
    st.tuples(st.integers(0, 30), st.floats(0.0, 40.0, allow_nan=False).map(lambda x: round(x, 4))),
    max_size=12,
    unique_by=lambda p: p[0],
)
cosines = st.lists(
    st.tuples(st.integers(0, 30), st.floats(-1.0, 1.0, allow_nan=False).map(lambda x: round(x, 4))),
    max_size=12,
    unique_by=lambda p: p[0],
)


@given(scored, cosines, st.sampled_from([0.0, 0.3, 1.0]), st.sampled_from(["minmax", "zscore", "tmm"]))
def test_convex_fusion_ranks_the_union_once_and_its_ends_are_the_sides(lexical, dense, alpha, how) -> None:
    fused = [key for key, _ in convex_fuse(lexical, dense, alpha, how)]
    assert sorted(fused) == sorted({k for k, _ in lexical} | {k for k, _ in dense})
    scores = [s for _, s in convex_fuse(lexical, dense, alpha, how)]
    assert scores == sorted(scores, reverse=True)
    if alpha == 1.0 and lexical:  # BM25 alone: its best is first (ties by key)
        best = max(s for _, s in lexical)
        assert fused[0] == min(k for k, s in lexical if s == best)
    if alpha == 0.0 and dense:
        best = max(s for _, s in dense)
        assert fused[0] == min(k for k, s in dense if s == best)


@given(scored)
def test_minmax_and_theoretical_minmax_keep_the_order_within_0_and_1(lexical) -> None:
    for how in ("minmax", "tmm"):
        values = normalised(lexical, how, "bm25")
        assert all(-1e-9 <= v <= 1 + 1e-9 for v in values.values())
        order = sorted(lexical, key=lambda p: p[1])
        assert [values[k] for k, _ in order] == sorted(values[k] for k, _ in order)


def test_theoretical_minimum_keeps_a_lone_strong_hit_strong() -> None:
    """One BM25 hit: min-max makes it 0 (max = min); the theoretical minimum (0) leaves it 1 — Bruch et al.'s
    reason for TMM."""
    assert normalised([("a", 7.5)], "tmm", "bm25") == {"a": 1.0}
    assert normalised([("a", 0.9), ("b", 0.5)], "tmm", "dense") == {"a": 1.0, "b": pytest.approx(1.5 / 1.9)}

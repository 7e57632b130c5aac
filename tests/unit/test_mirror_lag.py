"""When a mirror counts as behind its catalog (tasks/index/catalog_check.lag_of): only when it lacks a change older
than the bound — a catalog never written, and a first refresh streaming its documents, are not."""

from __future__ import annotations

import time

import pytest

from tasks.index.catalog_check import lag_of

pytestmark = pytest.mark.unit


def test_a_catalog_never_written_has_nothing_to_mirror() -> None:
    assert lag_of(0, None, None, lambda _after: None, 60) is None


def test_a_mirror_never_synced_is_catching_up_until_its_oldest_change_passes_the_bound() -> None:
    fresh, old = time.time() - 5, time.time() - 300
    assert lag_of(3, None, None, lambda after: fresh if after == 0 else None, 60) is None
    behind = lag_of(3, None, None, lambda after: old if after == 0 else None, 60)
    assert behind is not None and behind["mirror_generation"] is None and behind["lag_seconds"] >= 299
    # changes the outbox no longer carries (pruned before this mirror was known): behind, it cannot tell how long
    assert lag_of(3, None, None, lambda _after: None, 60) == {"catalog_generation": 3, "mirror_generation": None}


def test_a_synced_mirror_is_behind_only_past_the_bound() -> None:
    assert lag_of(5, 5, 9, lambda _after: None, 0) is None
    assert lag_of(6, 5, 9, lambda after: time.time() - 1 if after == 9 else None, 60) is None
    assert lag_of(6, 5, 9, lambda after: time.time() - 120 if after == 9 else None, 60) is not None
    assert lag_of(6, 5, 9, lambda _after: None, 60) is None  # a write the outbox does not carry

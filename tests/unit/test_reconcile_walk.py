"""The reconcile's merge of two walks in chunk id order (tasks/index/opensearch_mirror.in_step) against a model that
holds both sides whole in dicts, and the catalog's own walk in order (keyset pages) against its whole table."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.index.opensearch_mirror import in_step
from tasks.index.sqlite import SqliteIndex
from tests.unit.test_index_sqlite import _publish

pytestmark = pytest.mark.unit

ids = st.text(alphabet="0123456789abcdefжё-", min_size=1, max_size=6)
states = st.tuples(st.sampled_from(["current", "superseded", "staged"]), st.sampled_from(["public", "hr"]))


@given(st.dictionaries(ids, states, max_size=40), st.dictionaries(ids, states, max_size=40))
def test_in_step_pairs_every_id_once_with_both_sides(catalog: dict, cluster: dict) -> None:
    walked = list(in_step(sorted(catalog.items()), sorted(cluster.items())))
    assert [chunk_id for chunk_id, *_ in walked] == sorted(catalog.keys() | cluster.keys())
    assert all(want == catalog.get(c) and have == cluster.get(c) for c, want, have in walked)


def test_the_catalog_walks_its_chunks_in_order_a_page_at_a_time(tmp_path: Path) -> None:
    with SqliteIndex(tmp_path / "korpus.db") as index:
        for n in range(7):
            _publish(index, f"файл_{n}.txt", "v1", [f"Письмо номер {n} о поставке насосов."] * 2)
        _publish(index, "файл_0.txt", "v2", ["Письмо исправлено."])  # superseded chunks are walked too
        whole = index.chunk_states()
        for page in (1, 2, 3, 1000):
            walked = list(index.chunk_states_in_order(page))
            assert [c for c, _ in walked] == sorted(whole) and dict(walked) == whole

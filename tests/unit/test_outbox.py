"""The mirror's outbox (tasks/index/schema.py OUTBOX_SQL, tasks/index/catalog_check.py): a mirror that applies only
the outbox rows past the last number it holds ends up holding exactly the catalog's chunk states — for every sequence
of publishes, relabels, retirements, garbage collection and outbox pruning (a state machine with a mirror of its own,
over a real SQLite catalog). What the incremental OpenSearch sync (tasks/index/opensearch_mirror.py) relies on."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tasks.index import catalog_check
from tasks.index.retention import drop_version
from tasks.index.sqlite import SqliteIndex
from tests.unit.test_index_sqlite import _publish

pytestmark = pytest.mark.unit
SOURCES = ("a.txt", "b.txt", "c.txt")
WORDS = ("договор", "поставка", "склад", "кровля", "приказ", "премия", "акт", "проверка")
ALIAS = "korpus-test"


class MirrorFromTheOutbox(RuleBasedStateMachine):
    """The catalog is written by the real index; the mirror is a dict kept only from the outbox."""

    @initialize()
    def open(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.index = SqliteIndex(Path(self.dir.name) / "k.db")
        self.mirror: dict[str, tuple] = {}
        self.held: int | None = None  # the outbox number the mirror holds; None: never synced (a full copy first)
        self.versions = 0
        self.published: list[tuple[str, str, list[str], str]] = []

    def teardown(self) -> None:
        self.index.close()
        self.dir.cleanup()

    @rule(
        source=st.sampled_from(SOURCES),
        texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=3, max_size=12).map(" ".join), min_size=1, max_size=3),
        access=st.sampled_from(("public", "hr")),
    )
    def publish(self, source: str, texts: list[str], access: str) -> None:
        self.versions += 1
        _publish(self.index, source, f"v{self.versions}", texts, access)
        self.published.append((source, f"v{self.versions}", texts, access))

    @rule(data=st.data(), access=st.sampled_from(("public", "hr")))
    def republish(self, data: st.DataObject, access: str) -> None:
        """A file back to bytes it had, under the labels the manifest gives now (an earlier version switched current
        again: publish's upsert of its row relabels its chunks through a trigger)."""
        if self.published:
            source, version, texts, _ = data.draw(st.sampled_from(self.published))
            _publish(self.index, source, version, texts, access)

    @rule(source=st.sampled_from(SOURCES), access=st.sampled_from(("public", "hr", "legal")))
    def relabel(self, source: str, access: str) -> None:
        found = self.index.current_source(source)
        if found is not None:
            self.index.relabel_source(found[0].model_copy(update={"access": access}))

    @rule(source=st.sampled_from(SOURCES))
    def retire(self, source: str) -> None:
        self.index.retire_source(source)

    @rule()
    def collect(self) -> None:
        """Retention: every version no longer served is dropped, chunks and all."""
        rows = self.index.conn.execute("SELECT source_id, version FROM sources WHERE lifecycle != 'current'")
        for source_id, version in rows.fetchall():
            drop_version(self.index, source_id, version)

    @rule()
    def prune(self) -> None:
        with self.index.write_transaction():
            catalog_check.prune_outbox(self.index.conn)

    @rule()
    def sync(self) -> None:
        conn = self.index.conn
        head = catalog_check.outbox_head(conn)
        if self.held is None:  # the first sync copies everything
            self.mirror = dict(self.index.chunk_states())
        else:
            for ids in catalog_check.changed_since(conn, self.held, head, batch=7):
                states = self.index.chunk_states_of(ids)
                for chunk_id in ids:
                    if chunk_id in states:
                        self.mirror[chunk_id] = states[chunk_id]
                    else:
                        self.mirror.pop(chunk_id, None)
        self.held = head
        with self.index.write_transaction():
            catalog_check.mark_synced(conn, ALIAS, catalog_check.generation(conn), head)

    @invariant()
    def a_synced_mirror_holds_the_catalog(self) -> None:
        """Right after a sync the mirror is the catalog; between syncs every difference is in the outbox."""
        if self.held is None:
            return
        states = self.index.chunk_states()
        differ = {c for c in set(states) | set(self.mirror) if states.get(c) != self.mirror.get(c)}
        pending = {c for ids in catalog_check.changed_since(self.index.conn, self.held, 2**62, 100) for c in ids}
        assert differ <= pending, differ - pending


MirrorFromTheOutbox.TestCase.settings = hypothesis_settings(max_examples=60, stateful_step_count=30, deadline=None)
test_a_mirror_kept_from_the_outbox_holds_the_catalog = MirrorFromTheOutbox.TestCase


def test_prune_keeps_what_a_mirror_has_not_taken(tmp_path: Path) -> None:
    with SqliteIndex(tmp_path / "k.db") as index:
        _publish(index, "a.txt", "v1", ["договор поставки склада"], "public")
        assert catalog_check.outbox_head(index.conn) > 0
        with index.write_transaction():
            assert catalog_check.prune_outbox(index.conn) > 0  # no mirror: nothing needs the rows
        _publish(index, "b.txt", "v1", ["приказ о премии", "акт проверки склада"], "public")
        head = catalog_check.outbox_head(index.conn)
        rows = index.conn.execute("SELECT count(*) FROM chunk_outbox").fetchall()[0][0]
        assert rows >= 2
        with index.write_transaction():
            catalog_check.mark_synced(index.conn, ALIAS, 0, head - 1)  # the mirror lacks the last row
            assert catalog_check.prune_outbox(index.conn) == rows - 1
        left = [c for ids in catalog_check.changed_since(index.conn, 0, head, 10) for c in ids]
        assert len(left) == 1  # the row past the mirror stays

"""The labels a chunk is served under come from its catalog row, whatever wrote the chunk and in whatever order.

A state machine over the index's own writes — a publish, a relabel (`relabel_source`, or the catalog row alone as
`apply_catalog_changes` does it), a reviewer's release of a chunk stored with stale labels, a retire — against a
model of its own: the catalog's labels per source. After every step each chunk row carries its row's labels, its
`chunk_visibility` entry (what BM25 filters on) is that scope while current and NULL otherwise, and a search under
any scope returns only chunks the model puts in it. The first cut read `new.access` in the insert trigger, which
SQLite runs after the catalog trigger: a released chunk stored before a relabel was found by its old scope.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from korpus.core.datamodel import PageResult, Source, SourceKind, scope_of
from tasks.contract.chunking import page_chunks
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.unit
NAMES = ("a.txt", "b.txt")
ACCESS = ("public", "hr")
TENANTS = ("default", "acme")
SCOPES = [scope_of(a, t) for a in ACCESS for t in TENANTS]
TEXT = "Договор поставки насосов подписан директором"


def _vector() -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    return v


class Labels(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.index = SqliteIndex(Path(self.dir.name) / "k.db")
        self.catalog: dict[str, tuple[str, str, str]] = {}  # the model: source → (version, access, tenant)
        self.served: set[str] = set()
        self.versions = 0

    def _source(self, name: str, access: str, tenant: str, version: str | None = None) -> Source:
        return Source(
            source_id=name,
            version=version or self.catalog[name][0],
            path="/x",
            kind=SourceKind.text,
            owner="o",
            access=access,
            tenant=tenant,
        )

    @rule(name=st.sampled_from(NAMES), access=st.sampled_from(ACCESS), tenant=st.sampled_from(TENANTS))
    def publish(self, name: str, access: str, tenant: str) -> None:
        self.versions += 1
        source = self._source(name, access, tenant, version=f"v{self.versions}")
        page = PageResult(source_id=name, source_version=source.version, page=1, text=TEXT, method="plain-text")
        chunks, _ = page_chunks(source, [page])
        self.index.publish_version(source, chunks, np.stack([_vector()] * len(chunks)), 1)
        self.catalog[name] = (source.version, access, tenant)
        self.served.add(name)

    @precondition(lambda self: self.served)
    @rule(data=st.data(), access=st.sampled_from(ACCESS), tenant=st.sampled_from(TENANTS), row_only=st.booleans())
    def relabel(self, data: st.DataObject, access: str, tenant: str, row_only: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.served)))
        if row_only:  # the catalog row alone: the triggers move its chunks
            with self.index.write_transaction():
                self.index.conn.execute(
                    "UPDATE sources SET access = ?, tenant = ? WHERE source_id = ? AND version = ?",
                    (access, tenant, name, self.catalog[name][0]),
                )
        else:
            self.index.relabel_source(self._source(name, access, tenant))
        self.catalog[name] = (self.catalog[name][0], access, tenant)

    @precondition(lambda self: self.served)
    @rule(data=st.data(), access=st.sampled_from(ACCESS), tenant=st.sampled_from(TENANTS))
    def release_a_chunk_stored_with_stale_labels(self, data: st.DataObject, access: str, tenant: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.served)))
        stale = self._source(name, access, tenant)
        page = PageResult(
            source_id=name, source_version=stale.version, page=2, text=f"{TEXT} повторно", method="plain-text"
        )
        for chunk in page_chunks(stale, [page])[0]:
            released = chunk.model_copy(update={"chunk_id": f"{chunk.chunk_id}-released{self.versions}"})
            self.index.add_reviewed_chunk(released, _vector(), exception=True)

    @precondition(lambda self: self.served)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.served)))
        self.index.retire_source(name)
        self.served.discard(name)

    @invariant()
    def every_chunk_carries_its_rows_labels(self) -> None:
        rows = self.index.conn.execute(
            "SELECT c.source_id, c.source_version, c.access, c.tenant, c.lifecycle, v.visible FROM chunks c "
            "LEFT JOIN chunk_visibility v ON v.rowid = c.rowid"
        ).fetchall()
        for source_id, version, access, tenant, lifecycle, visible in rows:
            if self.catalog[source_id][0] == version:
                assert (access, tenant) == self.catalog[source_id][1:], (source_id, access, tenant)
            expected = scope_of(access, tenant) if lifecycle == "current" else None
            assert visible == expected, (source_id, lifecycle, access, tenant, visible)

    @invariant()
    def search_finds_only_what_the_scope_holds(self) -> None:
        for scope in SCOPES:
            for mode in ("bm25", "dense", "hybrid"):
                hits = retrieve(self.index.searcher, "договор поставки", _vector(), [scope], k=20, mode=mode)
                for hit in hits:
                    version, access, tenant = self.catalog[hit["source_id"]]
                    assert hit["source_id"] in self.served and hit["source_version"] == version, hit["chunk_id"]
                    assert scope_of(access, tenant) == scope, (hit["chunk_id"], scope, access, tenant, mode)

    def teardown(self) -> None:
        self.index.close()
        self.dir.cleanup()


Labels.TestCase.settings = settings(
    max_examples=60, stateful_step_count=8, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLabels = Labels.TestCase

"""The writer's file without the embedded search's terms (KORPUS_BACKEND=opensearch: the cluster holds them) and
with them again: over any sequence of publishes, retirements and switches of the backend, a file whose terms were
dropped and built again answers BM25, identifier and typo searches exactly as a file that always kept them
(its model, fed the same writes); while dropped, the file holds none, and the embedded search refuses with a
clear message instead of answering from nothing."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.settings import Settings
from tasks.contract.chunking import page_chunks
from tasks.index.backend import IndexMismatchError
from tasks.index.registry import backend_for, keep_search_terms
from tasks.index.sqlite import SqliteIndex

pytestmark = pytest.mark.unit
WORDS = "договор поставка насос кровля ремонт склад приказ премия отпуск сотрудник акт проверка смета".split()
INNS = ("ИНН 7707083893", "ИНН 5408131553", "ОГРН 1027700132195")
SOURCES = [f"{n}.txt" for n in range(6)]


def _text(rng: random.Random) -> str:
    body = " ".join(rng.choice(WORDS[: rng.randint(2, len(WORDS))]) for _ in range(rng.randint(4, 40)))
    return body + (f" {rng.choice(INNS)}." if rng.random() < 0.4 else ".")


def _publish(index: SqliteIndex, source_id: str, version: str, text: str, access: str) -> None:
    source = Source(
        source_id=source_id, version=version, path="/x", kind=SourceKind.text, owner="o", access=access, tenant="t"
    )
    page = PageResult(source_id=source_id, source_version=version, page=1, text=text, method="plain-text")
    chunks, _ = page_chunks(source, [page])
    index.publish_version(source, chunks, np.ones((len(chunks), 4), dtype=np.float32), 1, embed_model="m")


def _answers(index: SqliteIndex) -> list:
    """What the embedded search answers, rowids read as chunk ids."""
    ids = dict(index.conn.execute("SELECT rowid, chunk_id FROM chunks"))
    searcher, out = index.searcher, []
    for scopes in (["public"], ["public", "hr"]):
        for query in ("договор поставка", "ремонт кровли насос", "смета акт проверка", "премия"):
            out.append([(ids[r], round(s, 9)) for r, s in searcher.lexical(query, scopes, 50, True, {})])
        out.append(sorted(ids[r] for r in searcher.identifiers(["7707083893", "1027700132195"], scopes, 50)))
        out.append(searcher.typo_variants(["догвор", "сотрудникк"], scopes))
    return out


def _terms_held(index: SqliteIndex) -> tuple[int, int, int]:
    one = lambda sql: index.conn.execute(sql).fetchall()[0][0]  # noqa: E731
    return (
        one("SELECT count(*) FROM chunk_tokens"),
        one("SELECT count(*) FROM chunk_terms_docsize"),
        one("SELECT count(*) FROM chunk_identifiers"),
    )


class SearchTermsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.model = SqliteIndex(Path(self.tmp.name) / "model.db")  # always keeps its terms
        self.file = SqliteIndex(Path(self.tmp.name) / "korpus.db")
        self.versions = 0

    def teardown(self) -> None:
        self.model.close()
        self.file.close()
        self.tmp.cleanup()

    @rule(source=st.sampled_from(SOURCES), seed=st.integers(0, 2**16), hr=st.booleans())
    def publish(self, source: str, seed: int, hr: bool) -> None:
        self.versions += 1
        text = _text(random.Random(seed))
        for index in (self.model, self.file):
            _publish(index, source, f"v{self.versions}", text, "hr" if hr else "public")

    @rule(source=st.sampled_from(SOURCES))
    def retire(self, source: str) -> None:
        for index in (self.model, self.file):
            index.retire_source(source)

    @rule(backend=st.sampled_from(["sqlite", "opensearch"]))
    def refresh_with(self, backend: str) -> None:
        """A refresh's first step under KORPUS_BACKEND=`backend`."""
        keep_search_terms(Settings(backend=backend), self.file)

    @invariant()
    def answers_as_the_model_or_refuses(self) -> None:
        if self.file.keeps_search_terms():
            assert _answers(self.file) == _answers(self.model)
            assert _terms_held(self.file) == _terms_held(self.model)
        else:
            assert _terms_held(self.file) == (0, 0, 0)
            with pytest.raises(IndexMismatchError, match="KORPUS_BACKEND=opensearch"):
                backend_for(Settings(backend="sqlite"), self.file)


TestSearchTerms = SearchTermsMachine.TestCase
TestSearchTerms.settings = settings(max_examples=25, stateful_step_count=12, deadline=None)


def test_terms_are_built_in_batches_and_the_generation_moves(tmp_path: Path) -> None:
    rng = random.Random(5)
    with SqliteIndex(tmp_path / "korpus.db") as index:
        for n in range(40):
            _publish(index, f"{n}.txt", "v1", _text(rng), "public")
        keep_search_terms(Settings(backend="opensearch"), index)
        held = index.stored_chunks([r[0] for r in index.conn.execute("SELECT chunk_id FROM chunks")])
        assert len(list(held)) == 40  # the text and vectors stay: the mirror indexes the cluster from them
        before = index.conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()[0][0]
        assert index.keep_search_terms(True, batch=7) == 40
        after = index.conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()[0][0]
        assert int(after) - int(before) == 6  # one a batch of 7, the last one short
        assert _terms_held(index)[0] == 40

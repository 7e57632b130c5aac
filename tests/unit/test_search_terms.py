"""The writer's file without the embedded search's terms and vectors (KORPUS_BACKEND=opensearch: the cluster holds
them) and with them again: over any sequence of publishes, retirements, mirror syncs handing vectors to the cluster
and switches of the backend, a file whose terms were dropped and built again, and whose vectors were handed off and
embedded again, answers BM25, identifier, typo and kNN searches exactly as a file that always kept them (its model,
fed the same writes); while dropped, the file holds no terms, and the embedded search refuses with a clear message
instead of answering from nothing.

The vectors come from `TextHash`, a deterministic stand-in for the embedding model (the same text, the same
vector, as the model gives): what is tested here is the file's bookkeeping. The real model gives a lost chunk its
vector again in tests/integration/test_opensearch_mirror.py."""

from __future__ import annotations

import hashlib
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


class TextHash:
    """A chunk text's vector: its digest's bytes, normalised (deterministic, as the real model is)."""

    name, dims = "m", 4

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        raw = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:4], dtype=np.uint8) for t in texts]
        vectors = np.asarray(raw, dtype=np.float32).reshape(len(texts), 4) + 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _publish(index: SqliteIndex, source_id: str, version: str, text: str, access: str) -> None:
    source = Source(
        source_id=source_id, version=version, path="/x", kind=SourceKind.text, owner="o", access=access, tenant="t"
    )
    page = PageResult(source_id=source_id, source_version=version, page=1, text=text, method="plain-text")
    chunks, _ = page_chunks(source, [page])
    vectors = TextHash().embed_passages([c.text for c in chunks])
    index.publish_version(source, chunks, vectors, 1, embed_model="m")


def _answers(index: SqliteIndex) -> list:
    """What the embedded search answers, rowids read as chunk ids."""
    ids = dict(index.conn.execute("SELECT rowid, chunk_id FROM chunks"))
    searcher, out = index.searcher, []
    for scopes in (["public"], ["public", "hr"]):
        for query in ("договор поставка", "ремонт кровли насос", "смета акт проверка", "премия"):
            out.append([(ids[r], round(s, 9)) for r, s in searcher.lexical(query, scopes, 50, True, {})])
        out.append(sorted(ids[r] for r in searcher.identifiers(["7707083893", "1027700132195"], scopes, 50)))
        out.append(searcher.typo_variants(["догвор", "сотрудникк"], scopes))
        for query in ("договор поставка", "премия отпуск"):
            vector = TextHash().embed_passages([query])[0]
            out.append([(ids[r], round(s, 6)) for r, s in searcher.vector(vector, scopes, 50)])
    return out


def _vectors_held(index: SqliteIndex) -> dict[str, bytes]:
    return dict(
        index.conn.execute(
            f"SELECT c.chunk_id, v.embedding FROM chunks c JOIN {index.vector_table()} v ON v.rowid = c.rowid"
        )
    )


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
        self.file.keep_vectors(backend == "sqlite", embedder=TextHash)

    @rule(seed=st.integers(0, 2**16))
    def mirror(self, seed: int) -> None:
        """A sync indexed some chunks in the cluster: the file hands their vectors to it."""
        ids = sorted(c for (c,) in self.file.conn.execute("SELECT chunk_id FROM chunks"))
        picked = random.Random(seed).sample(ids, k=len(ids) // 2)
        held = set(_vectors_held(self.file))
        dropped = self.file.hand_off_vectors(picked)
        assert dropped == (0 if self.file.keeps_vectors() else len(held & set(picked)))
        assert set(_vectors_held(self.file)) == (held if self.file.keeps_vectors() else held - set(picked))

    @invariant()
    def answers_as_the_model_or_refuses(self) -> None:
        if self.file.keeps_search_terms():
            assert _terms_held(self.file) == _terms_held(self.model)
        else:
            assert _terms_held(self.file) == (0, 0, 0)
        if self.file.keeps_vectors():
            assert _vectors_held(self.file) == _vectors_held(self.model)
        if self.file.keeps_search_terms() and self.file.keeps_vectors():
            assert _answers(self.file) == _answers(self.model)
        else:
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


def test_vectors_come_back_in_batches_from_the_catalogs_model_only(tmp_path: Path) -> None:
    rng = random.Random(6)
    with SqliteIndex(tmp_path / "korpus.db") as index:
        for n in range(30):
            _publish(index, f"{n}.txt", "v1", _text(rng), "public")
        kept = _vectors_held(index)
        ids = sorted(kept)
        assert index.hand_off_vectors(ids) == 0  # the file keeps every vector until told otherwise
        assert index.keep_vectors(False) == 0
        assert index.hand_off_vectors(ids) == len(ids)
        held = list(index.stored_chunks(ids))
        assert len(held) == len(ids) and all(s.vector is None for s in held)  # the text stays, the vector is gone

        class Other(TextHash):
            name = "other"

        with pytest.raises(IndexMismatchError, match="korpus reindex"):
            index.keep_vectors(True, embedder=Other)
        with pytest.raises(IndexMismatchError, match="needs the embedding model"):
            index.keep_vectors(True)
        assert not index.keeps_vectors() and _vectors_held(index) == {}  # a refused rebuild leaves the mode
        before = index.conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()[0][0]
        told: list[int] = []
        assert index.keep_vectors(True, embedder=TextHash, batch=7, progress=told.append) == len(ids)
        assert told == list(range(7, len(ids), 7))  # after each full batch; the last one switches the mode
        after = index.conn.execute("SELECT value FROM index_meta WHERE key = 'generation'").fetchall()[0][0]
        assert int(after) - int(before) == len(ids) // 7 + 1
        assert index.keeps_vectors() and _vectors_held(index) == kept


def test_a_meta_documents_parts_keep_their_vectors_and_come_back_as_their_refresh_embedded_them(
    tmp_path: Path,
) -> None:
    """A meta-document's part is embedded from its first two lines (`dense_text`), not its whole text: its vector is
    kept when the others are handed to the cluster (its next build reuses it), and any vector given again — by the
    embedded backend's rebuild, by `korpus reindex` — is embedded from what its refresh embedded."""
    from korpus.core.datamodel import META_PREFIX
    from tasks.text.passages import dense_text

    part = "Реестр лиц: Белов К. С. — Иванов П. С.\nЛица, упомянутые в документах.\nБелов К. С.\nИванов П. С."
    with SqliteIndex(tmp_path / "korpus.db") as index:
        _publish(index, "письмо.txt", "v1", "Письмо о поставке насосов. Срок поставки — март.", "public")
        meta = Source(
            source_id=META_PREFIX + "public/Реестр лиц",
            version="m1",
            path="",
            kind=SourceKind.meta,
            owner="korpus",
            access="public",
            tenant="t",
        )
        page = PageResult(source_id=meta.source_id, source_version="m1", page=1, text=part, method="meta")
        chunks, _ = page_chunks(meta, [page])
        assert dense_text(chunks[0].text) != chunks[0].text
        refreshed = TextHash().embed_passages([dense_text(c.text) for c in chunks])
        index.publish_version(meta, chunks, refreshed, [page], embed_model="m")
        ids = sorted(_vectors_held(index))
        index.keep_vectors(False)
        assert index.hand_off_vectors(ids) == len(ids) - len(chunks)  # the part keeps its vector
        assert set(_vectors_held(index)) == {c.chunk_id for c in chunks}
        index.conn.execute(f"DELETE FROM {index.vector_table()}")  # as a file from before this release left it
        index.keep_vectors(True, embedder=TextHash)
        held = _vectors_held(index)
        assert [np.frombuffer(held[c.chunk_id], dtype=np.float32).tolist() for c in chunks] == refreshed.tolist()
        index.reindex_vectors("n", 4, TextHash().embed_passages)
        held = _vectors_held(index)
        assert [np.frombuffer(held[c.chunk_id], dtype=np.float32).tolist() for c in chunks] == refreshed.tolist()

"""The embedded index with real SQLite/FTS5/sqlite-vec and hand-made vectors (no model needed)."""

from pathlib import Path

import numpy as np
import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import page_chunks
from tasks.index.backend import IndexMismatchError
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.fusion import rrf_fuse
from tasks.retrieval.retriever import Retriever, retrieve

pytestmark = pytest.mark.unit
DIMS = 8


def _vec(i: int) -> np.ndarray:
    v = np.zeros(DIMS, dtype=np.float32)
    v[i] = 1.0
    return v


def _publish(
    index: SqliteIndex, source_id: str, version: str, texts: list[str], access: str = "public", axis: int = 0
) -> Source:
    source = Source(
        source_id=source_id,
        version=version,
        path="/x",
        kind=SourceKind.text,
        owner="o",
        access=access,
        tenant="default",
    )
    pages = [
        PageResult(source_id=source_id, source_version=version, page=i + 1, text=t, method="plain-text")
        for i, t in enumerate(texts)
    ]
    chunks, _ = page_chunks(source, pages)
    index.publish_version(source, chunks, np.stack([_vec(axis)] * len(chunks)), len(pages))
    return source


@pytest.fixture
def index(tmp_path: Path) -> SqliteIndex:
    idx = SqliteIndex(tmp_path / "k.db")
    yield idx
    idx.close()


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = dict(rrf_fuse([[1, 2, 3], [3, 1]], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)


def test_bm25_finds_inflected_form(index: SqliteIndex) -> None:
    _publish(index, "a.txt", "v1", ["Стороны заключили договор поставки."])
    _publish(index, "b.txt", "v1", ["Протокол совещания о ремонте."])
    hits = retrieve(index.searcher, "договорами", None, ["public"], mode="bm25")
    assert [h["source_id"] for h in hits] == ["a.txt"]


def test_restricted_chunk_never_ranks_on_either_side(index: SqliteIndex) -> None:
    # The restricted chunk is the best lexical AND the best vector match; it must still never appear.
    _publish(index, "secret.txt", "v1", ["премия премия Смирновой премия"], access="hr", axis=0)
    _publish(index, "open.txt", "v1", ["о премии в целом"], access="public", axis=1)
    for mode in ("bm25", "dense", "hybrid"):
        hits = retrieve(index.searcher, "премия Смирновой", _vec(0), ["public"], mode=mode)
        assert all(h["access"] == "public" for h in hits), mode
        assert "secret.txt" not in {h["source_id"] for h in hits}, mode
    visible = retrieve(index.searcher, "премия Смирновой", _vec(0), ["public", "hr"])
    assert visible[0]["source_id"] == "secret.txt"


def test_empty_scopes_see_nothing(index: SqliteIndex) -> None:
    _publish(index, "a.txt", "v1", ["договор"])
    assert retrieve(index.searcher, "договор", _vec(0), []) == []


def test_new_version_supersedes_old_in_one_step(index: SqliteIndex) -> None:
    _publish(index, "a.txt", "v1", ["старая редакция договора"])
    _publish(index, "a.txt", "v2", ["новая редакция договора"])
    hits = retrieve(index.searcher, "редакция договора", _vec(0), ["public"])
    assert [(h["source_version"], h["lifecycle"]) for h in hits] == [("v2", "current")]
    assert index.chunk_count("superseded") == 1
    assert index.indexed_versions() == {"a.txt": {"v2": ("o", "public", "default")}}


def test_retired_source_disappears(index: SqliteIndex) -> None:
    _publish(index, "a.txt", "v1", ["договор"])
    index.retire_source("a.txt")
    assert retrieve(index.searcher, "договор", _vec(0), ["public"]) == []
    assert index.indexed_versions() == {}


def test_relabel_changes_access_in_place(index: SqliteIndex) -> None:
    source = _publish(index, "a.txt", "v1", ["договор"])
    index.relabel_source(source.model_copy(update={"access": "hr"}))
    assert retrieve(index.searcher, "договор", _vec(0), ["public"]) == []
    assert retrieve(index.searcher, "договор", _vec(0), ["hr"])[0]["access"] == "hr"


def test_a_tenant_relabel_moves_the_scope_and_an_older_index_is_migrated(index: SqliteIndex, tmp_path: Path) -> None:
    """#46 item 5: a chunk's scope is `tenant/access` outside the default tenant, on every side of the search; a
    relabel to another tenant moves it; an index made before (its triggers filed chunks by access alone) gets the
    new triggers and its scopes recomputed when it is opened."""
    source = _publish(index, "a.txt", "v1", ["договор поставки"])
    index.relabel_source(source.model_copy(update={"tenant": "acme"}))
    for mode in ("bm25", "dense", "hybrid"):
        assert retrieve(index.searcher, "договор", _vec(0), ["public"], mode=mode) == []
        assert retrieve(index.searcher, "договор", _vec(0), ["acme/public"], mode=mode)[0]["source_id"] == "a.txt"
    index.conn.execute(  # what an index of the last release held: the old triggers, chunks filed by access
        "DROP TRIGGER chunks_scope_of_row; DROP TRIGGER chunks_scope_update;"
        "CREATE TRIGGER chunks_visibility_insert AFTER INSERT ON chunks BEGIN INSERT OR REPLACE INTO "
        "chunk_visibility VALUES (new.rowid, CASE WHEN new.lifecycle = 'current' THEN new.access END); END;"
        "UPDATE chunk_visibility SET visible = 'public';"
    )
    index.close()
    with SqliteIndex(tmp_path / "k.db") as again:
        triggers = {row[0] for row in again.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert "chunks_visibility_insert" not in triggers and "chunks_scope_of_row" in triggers
        assert retrieve(again.searcher, "договор", _vec(0), ["public"], mode="bm25") == []
        assert retrieve(again.searcher, "договор", _vec(0), ["acme/public"], mode="bm25")[0]["source_id"] == "a.txt"


def test_a_file_whose_fts_table_kept_a_copy_of_the_terms_is_migrated_on_open(
    index: SqliteIndex, tmp_path: Path
) -> None:
    """The FTS5 table keeps no copy of the terms (`content=''`: they are chunk_tokens'). A file made with the copy
    (the schema before) is migrated when opened: the same hits, by the same scores, for every mode; a retired chunk
    leaves the lexical index and a relabel still moves it, afterwards as before."""
    old = _publish(index, "a.txt", "v1", ["договор поставки насосов", "акт приёмки кровли"])
    _publish(index, "a.txt", "v2", ["договор поставки насосов и задвижек", "акт приёмки кровли склада"])
    memo = _publish(index, "b.txt", "v1", ["служебная записка о поставке"], access="hr", axis=1)
    assert old.version == "v1"
    asked = [("поставка насосов", ["public"]), ("приёмка кровли", ["public", "hr"]), ("записка", ["hr"])]

    def answers(searcher: object) -> list:
        return [
            [(h["chunk_id"], round(h["score"], 9)) for h in retrieve(searcher, q, _vec(0), scopes, mode=mode)]
            for q, scopes in asked
            for mode in ("bm25", "hybrid")
        ]

    before = answers(index.searcher)
    rows = list(index.conn.execute("SELECT rowid, terms, exact FROM chunk_tokens"))
    current = {r for (r,) in index.conn.execute("SELECT rowid FROM chunk_terms")}
    index.conn.execute(  # the table as the schema before made it: its own copy of every current chunk's terms
        "DROP TABLE chunk_terms_vocab; DROP TABLE chunk_terms_instance; DROP TABLE chunk_terms; "
        "CREATE VIRTUAL TABLE chunk_terms USING fts5(terms, exact, "
        "tokenize = \"unicode61 remove_diacritics 0 tokenchars '.,''’:_'\"); "
        "CREATE VIRTUAL TABLE chunk_terms_vocab USING fts5vocab(chunk_terms, 'col'); "
        "CREATE VIRTUAL TABLE chunk_terms_instance USING fts5vocab(chunk_terms, 'instance');"
    )
    index.conn.executemany(
        "INSERT INTO chunk_terms (rowid, terms, exact) VALUES (?, ?, ?)", [r for r in rows if r[0] in current]
    )
    index.close()
    with SqliteIndex(tmp_path / "k.db") as again:
        made = again.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunk_terms'").fetchall()[0][0]
        assert "content = ''" in made and "contentless_delete" in made
        assert {r for (r,) in again.conn.execute("SELECT rowid FROM chunk_terms")} == current
        assert answers(again.searcher) == before
        again.relabel_source(memo.model_copy(update={"access": "public"}))
        assert retrieve(again.searcher, "записка", _vec(1), ["public"], mode="bm25")[0]["source_id"] == "b.txt"
        _publish(again, "b.txt", "v2", ["распоряжение о ремонте"], axis=1)
        assert retrieve(again.searcher, "записка", _vec(1), ["public", "hr"], mode="bm25") == []


def test_other_embedding_model_or_dimension_is_refused(index: SqliteIndex) -> None:
    index.bind_embedding("e5-small", 384)
    index.bind_embedding("e5-small", 384)
    with pytest.raises(IndexMismatchError, match="384-dim"):
        index.bind_embedding("bge-m3", 1024)


def test_identifier_in_the_query_ranks_its_exact_match_first(index: SqliteIndex) -> None:
    # the noise chunks share every query word and the query's vector; only one holds the ИНН
    for i in range(5):
        _publish(index, f"noise{i}.txt", "v1", ["ИНН поставщика указан в договоре, ИНН ИНН договор"], axis=0)
    _publish(index, "contract.txt", "v1", ["Поставщик: ООО «Северный ветер», ИНН 7708123450."], axis=1)
    _publish(index, "secret.txt", "v1", ["ИНН 7708123450 в служебной записке"], access="hr", axis=0)
    for mode in ("hybrid", "bm25"):
        hits = retrieve(index.searcher, "ИНН 7708123450 договор", _vec(0), ["public"], mode=mode)
        assert hits[0]["source_id"] == "contract.txt", mode
        assert "secret.txt" not in {h["source_id"] for h in hits}
    number = retrieve(index.searcher, "договор № 45-17/2023", _vec(0), ["public"])
    assert number[0]["source_id"] != "contract.txt"  # no such number indexed: plain fusion applies


def test_identifiers_are_extracted_with_checksums() -> None:
    from tasks.text.identifiers import extract_identifiers

    text = "ИНН 7708123450, ОГРН 1027700132195, ИНН 7708123451 (неверный), № 45-17/2023, дело А40-12345/2023"
    assert extract_identifiers(text) == ["7708123450", "1027700132195", "45-17/2023", "а40-12345/2023"]


def test_search_exact_finds_every_accessible_current_occurrence(index: SqliteIndex) -> None:
    _publish(index, "a.txt", "v1", ["Договор поставки.\nСтороны: Иванов П. С. и\nПетров.", "Снова Иванов  П. С."])
    _publish(index, "b.txt", "v1", ["иванов п. с. подписал"], access="hr")
    _publish(index, "c.txt", "v1", ["Иванов П. С. — старая редакция"])
    _publish(index, "c.txt", "v2", ["Новая редакция без фамилии"])
    found = Retriever(index.searcher).exact_occurrences("Иванов П. С.", ["public"])
    assert found["total"] == 2 and found["by_source"] == {"a.txt": 2}
    first = found["occurrences"][0]
    assert (first["source_id"], first["page"], first["line"]) == ("a.txt", 1, "Стороны: Иванов П. С. и")
    assert "Договор поставки" in first["context"]
    assert found["occurrences"][1]["page"] == 2  # "Иванов  П. С." with two spaces still matches
    widened = Retriever(index.searcher).count_mentions("Иванов П. С.", ["public", "hr"])
    assert widened == {"query": "Иванов П. С.", "total": 3, "by_source": {"a.txt": 2, "b.txt": 1}}
    assert Retriever(index.searcher).exact_occurrences("Сидоров", ["public"])["total"] == 0


def _axes(*weights: float) -> np.ndarray:
    v = np.asarray(weights + (0.0,) * (DIMS - len(weights)), dtype=np.float32)
    return v / np.linalg.norm(v)


def _publish_vector(index: SqliteIndex, source_id: str, text: str, vector: np.ndarray) -> None:
    source = Source(
        source_id=source_id, version="v1", path="/x", kind=SourceKind.text, owner="o", access="public", tenant="default"
    )
    page = PageResult(source_id=source_id, source_version="v1", page=1, text=text, method="plain-text")
    chunks, _ = page_chunks(source, [page])
    index.publish_version(source, chunks, np.stack([vector] * len(chunks)), 1)


def _paraphrase_corpus(index: SqliteIndex) -> None:
    # The answer shares no word with the question; dense ranks it first. A stray chunk shares one word
    # («складе») and is dense's second choice: plain RRF puts it first (lexical 1 + dense 2 beats dense 1).
    _publish_vector(index, "roof.txt", "Прошу организовать ремонт кровли административного здания.", _axes(1, 0.1))
    _publish_vector(index, "stray.txt", "Инвентаризация товаров на складе номер три.", _axes(1, 0.3))
    _publish_vector(index, "other.txt", "Приказ о летнем режиме работы офиса.", _axes(0, 1))


def test_lexical_coverage_is_the_idf_weighted_share_of_query_terms(index: SqliteIndex) -> None:
    _paraphrase_corpus(index)
    stray = index.searcher.lexical("Инвентаризация на складе", ["public"], 1)[0][0]
    assert index.searcher.coverage("Инвентаризация на складе", stray) == pytest.approx(1.0)
    partial = index.searcher.coverage("Когда починят крышу на складе?", stray)
    assert 0.0 < partial < 0.35


def test_hybrid_routes_a_paraphrase_to_dense_where_plain_rrf_loses_it(index: SqliteIndex) -> None:
    _paraphrase_corpus(index)
    query, vector = "Когда починят крышу на складе?", _axes(1)
    routed = lambda **o: retrieve(index.searcher, query, vector, ["public"], mode="hybrid", fusion="routed", **o)  # noqa: E731
    assert retrieve(index.searcher, query, vector, ["public"], mode="dense")[0]["source_id"] == "roof.txt"
    assert retrieve(index.searcher, query, vector, ["public"], mode="hybrid-rrf")[0]["source_id"] == "stray.txt"
    assert routed()[0]["source_id"] == "roof.txt"
    assert routed(min_coverage=0.0)[0]["source_id"] == "stray.txt"  # routing off is plain RRF again


def test_hybrid_keeps_both_sides_when_the_lexical_hit_covers_the_query(index: SqliteIndex) -> None:
    _paraphrase_corpus(index)
    query, vector = "инвентаризация товаров на складе", _axes(1)
    # Dense alone prefers roof.txt; BM25 covers the whole query with stray.txt, so both sides fuse.
    assert retrieve(index.searcher, query, vector, ["public"], mode="dense")[0]["source_id"] == "roof.txt"
    assert retrieve(index.searcher, query, vector, ["public"], mode="hybrid")[0]["source_id"] == "stray.txt"


def test_convex_fusion_ranks_by_both_normalised_scores(index: SqliteIndex) -> None:
    """hybrid_fusion=convex (#48): alpha × min-max BM25 + (1 - alpha) × min-max cosine — alpha 1 is BM25's order,
    0 dense's; every candidate of either side is ranked once; scopes hold as in every mode. (At 0.5 this
    paraphrase's stray BM25 match — its only hit, min-max 1 — still ranks first: what the routed default avoids.)"""
    _paraphrase_corpus(index)
    query, vector = "Когда починят крышу на складе?", _axes(1)

    def first(**o):
        return retrieve(index.searcher, query, vector, ["public"], mode="hybrid", fusion="convex", alpha_low=None, **o)

    assert first(alpha=1.0)[0]["source_id"] == "stray.txt"  # the only BM25 hit
    assert first(alpha=0.0)[0]["source_id"] == "roof.txt"
    decided: dict = {}
    hits = retrieve(
        index.searcher, query, vector, ["public"], mode="hybrid", explain=decided, fusion="convex", alpha_low=None
    )
    assert decided["fusion"] == "convex" and decided["alpha"] == 0.5 and decided["answer_similarity"] is not None
    assert {h["source_id"] for h in hits} == {"roof.txt", "stray.txt", "other.txt"}
    assert hits[0]["source_id"] == "stray.txt"
    assert retrieve(index.searcher, query, vector, ["hr"], mode="hybrid", fusion="convex") == []


def test_convex_fusion_weighs_a_low_coverage_bm25_match_by_alpha_low(index: SqliteIndex) -> None:
    """KORPUS_HYBRID_ALPHA_LOW: the stray match covers little of the paraphrase, so BM25 weighs alpha_low, not alpha —
    at 0 the roof's dense hit ranks first (at 0.2 the stray's near-equal min-max cosine still wins here); a query BM25
    covers keeps alpha."""
    _paraphrase_corpus(index)
    query, vector = "Когда починят крышу на складе?", _axes(1)
    decided: dict = {}
    hits = retrieve(
        index.searcher, query, vector, ["public"], mode="hybrid", explain=decided, fusion="convex", alpha_low=0.0
    )
    assert hits[0]["source_id"] == "roof.txt" and decided["alpha"] == 0.0
    covered: dict = {}
    retrieve(
        index.searcher, "склад", vector, ["public"], mode="hybrid", explain=covered, fusion="convex", alpha_low=0.2
    )
    assert covered["alpha"] == 0.5


def test_unknown_mode_and_rerank_without_model_are_refused(index: SqliteIndex) -> None:
    with pytest.raises(ValueError, match="unknown search mode"):
        retrieve(index.searcher, "x", None, ["public"], mode="fuzzy")
    with pytest.raises(ValueError, match="KORPUS_RERANK_MODEL"):
        retrieve(index.searcher, "x", _axes(1), ["public"], mode="hybrid+rerank")


def test_reindex_swaps_vectors_to_a_new_model_without_touching_chunks(index: SqliteIndex) -> None:
    index.bind_embedding("old-model", DIMS)
    _paraphrase_corpus(index)
    texts_before = [row[0] for row in index.conn.execute("SELECT text FROM chunks ORDER BY rowid")]
    seen: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:  # a 3-dim "model": roof texts on one axis, the rest on another
        seen.append(texts)
        return np.asarray([[1.0, 0.0, 0.0] if "кровли" in t else [0.0, 1.0, 0.0] for t in texts], dtype=np.float32)

    report = index.reindex_vectors("new-model", 3, embed, batch=2)
    assert report["chunks"] == 3 and report["replaced"] == {"model": "old-model", "dims": str(DIMS)}
    assert sum(len(batch) for batch in seen) == 3 and max(len(batch) for batch in seen) <= 2
    assert [row[0] for row in index.conn.execute("SELECT text FROM chunks ORDER BY rowid")] == texts_before
    assert index.stats()["embed_model"] == "new-model" and index.stats()["embed_dims"] == 3
    hits = retrieve(index.searcher, "крыша", np.asarray([1.0, 0.0, 0.0], dtype=np.float32), ["public"], mode="dense")
    assert hits[0]["source_id"] == "roof.txt"
    # The old model's vectors are gone, and a query of the old dimension is refused with a clear message.
    with pytest.raises(IndexMismatchError, match="3-dim vectors"):
        retrieve(index.searcher, "крыша", _axes(1), ["public"], mode="hybrid")
    with pytest.raises(IndexMismatchError, match="korpus reindex"):
        index.bind_embedding("old-model", DIMS)
    # A version published after the swap goes into the new table; one embedded with the old model is refused.
    _publish_vector(index, "late.txt", "Поздний документ о кровли.", np.asarray([1.0, 0.0, 0.0], dtype=np.float32))
    with pytest.raises(IndexMismatchError):
        source = Source(
            source_id="stale.txt",
            version="v1",
            path="/x",
            kind=SourceKind.text,
            owner="o",
            access="public",
            tenant="default",
        )
        page = PageResult(source_id="stale.txt", source_version="v1", page=1, text="Старый.", method="plain-text")
        chunks, _ = page_chunks(source, [page])
        index.publish_version(source, chunks, np.stack([_vec(0)] * len(chunks)), 1, embed_model="old-model")
    assert index.chunk_count() == 4


def test_reindex_to_the_same_model_is_refused(index: SqliteIndex) -> None:
    index.bind_embedding("m", DIMS)
    with pytest.raises(ValueError, match="already holds"):
        index.reindex_vectors("m", DIMS, lambda texts: np.zeros((len(texts), DIMS), dtype=np.float32))


def test_reindex_refuses_vectors_of_the_wrong_shape(index: SqliteIndex) -> None:
    index.bind_embedding("m", DIMS)
    _paraphrase_corpus(index)
    with pytest.raises(IndexMismatchError, match="shape"):
        index.reindex_vectors("n", 5, lambda texts: np.zeros((len(texts), 4), dtype=np.float32))
    assert index.stats()["embed_model"] == "m"  # nothing swapped
    assert retrieve(index.searcher, "склад", _axes(1), ["public"], mode="dense")


def test_an_empty_index_answers_with_empty_lists(tmp_path: Path) -> None:
    """apsw has no column description for an empty result; listing an empty catalog must not raise."""
    with SqliteIndex(tmp_path / "korpus.db") as index:
        assert index.sources() == [] and index.quarantine_items() == [] and index.quarantine_items("open") == []
        assert index.source_chunks("nowhere.pdf") == [] and index.quarantine_item("0" * 16) is None


def test_publishing_a_version_refused_for_its_manifest_resolves_its_queue_item(index: SqliteIndex) -> None:
    from korpus.core.datamodel import QuarantineItem, ReasonCode

    def item(version: str, reason: ReasonCode, page: int | None = None) -> QuarantineItem:
        return QuarantineItem(source_id="a.txt", source_version=version, page=page, reasons=[reason])

    refused = [
        item("v1", ReasonCode.missing_metadata),  # the manifest lacked owner and access; now fixed
        item("v1", ReasonCode.empty_text, page=2),  # a page of the same version: the content, not the manifest
        item("v0", ReasonCode.missing_metadata),  # another version of the file: not the one published
    ]
    index.record_quarantine(refused)
    _publish(index, "a.txt", "v1", ["Текст письма о поставке насосов."])
    status = {(row["source_version"], row["page"]): row["status"] for row in index.quarantine_items()}
    assert status == {("v1", None): "resolved", ("v1", 2): "open", ("v0", None): "open"}
    decisions = index.quarantine_item(refused[0].item_id)["decisions"]
    assert [(d["reviewer"], d["action"]) for d in decisions] == [("korpus", "admitted")]
    assert index.refused_versions() == {"a.txt": {"v0": {"missing-metadata"}}}

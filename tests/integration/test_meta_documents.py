"""Meta-documents on a generated corpus with known contents (corpora.meta_corpus): 40 documents, 25 persons in
varied cases and initials (3 only in restricted `hr` documents), 12 organisations with ИНН, 60 dated events (6
restricted, 5 written twice). Real natasha NER, pymorphy3, e5 embeddings, SQLite and a real Prefect flow."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from corpora.meta_corpus import Truth, write_meta_corpus
from korpus.apps.api import create_app
from korpus.apps.cli import app
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.meta.names import person_name
from tasks.meta.publish import read_meta
from tasks.retrieval.embedding import shared_embedder
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def built(models, tmp_path_factory: pytest.TempPathFactory) -> tuple[Truth, Settings, dict, Path]:
    from flows.corpus_refresh import run_refresh

    base = tmp_path_factory.mktemp("meta")
    truth = write_meta_corpus(base / "root")
    settings = Settings(data=base / "data", api_keys={"k-public": ["public"], "k-hr": ["public", "hr"]})
    summary = run_refresh(base / "root", settings)
    return truth, settings, summary, base / "root"


def _text(settings: Settings, kind: str, scope: str) -> str:
    with SqliteIndex(settings.index_path) as index:
        documents = read_meta(index, kind, [scope])
    assert len(documents) == 1 and documents[0]["access"] == scope
    return "\n".join(documents[0]["parts"])


def _entries(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def test_toc_counts_are_exact(built) -> None:
    truth, settings, summary, _ = built
    assert summary["meta_documents"]["scopes_built"] == 2 and summary["meta_documents"]["documents_published"] == 8
    toc = _text(settings, "toc", "public")
    assert f"Всего документов в коллекции: {sum(truth.folders.values())} (текст — 37)" in toc
    for folder, count in truth.folders.items():
        assert f"«{folder}» — {count}" in toc
    kinds = ", ".join(f"{t} — {n}" for t, n in sorted(truth.types.items()))
    assert f"По видам документов: {kinds}." in toc
    listed = [e.split(" — ", 1)[0] for e in _entries(toc)]
    assert sorted(listed) == sorted(s for s, a in truth.documents.items() if a == "public")
    hr_toc = _text(settings, "toc", "hr")
    assert "Всего документов в коллекции: 3 " in hr_toc and "кадры/" in hr_toc and "приказы/" not in hr_toc


def test_chronology_holds_the_events_in_order_with_places_and_no_duplicates(built) -> None:
    truth, settings, _, _ = built
    entries = _entries(_text(settings, "chronology", "public"))
    numbers = [int(m.group(1)) for e in entries for m in [re.search(r"\(№ (\d+)\)", e)] if m]
    assert len(numbers) == len(set(numbers))  # the 5 events written in two documents are one entry each
    public = {n + 1: iso for n, (iso, _, access) in enumerate(truth.events) if access == "public"}
    assert len(set(numbers) & set(public)) >= 0.95 * len(public)
    dates = [e.split("(", 1)[1].split(")", 1)[0] for e in entries]
    assert dates == sorted(dates)
    for entry in entries:
        number = int(re.search(r"\(№ (\d+)\)", entry).group(1))
        assert f"({public[number]})" in entry and re.search(r"\[\S+/\S+\.txt · лист 1", entry)
    twice = [e for e in entries if re.search(r"\(№ [1-5]\)", e)]
    assert len(twice) == truth.duplicated_events and all(e.count(".txt · лист 1") == 2 for e in twice)
    restricted = {f"(№ {n + 1})" for n, (_, _, access) in enumerate(truth.events) if access == "hr"}
    assert not any(r in e for r in restricted for e in entries)
    assert all(r in _text(settings, "chronology", "hr") for r in restricted)


def test_person_register_recall_and_precision(built) -> None:
    truth, settings, _, _ = built
    forms = {form: p.full for p in truth.persons for form in p.register_forms}
    shown = [e.split(" — ", 1)[0].split(" (также", 1)[0] for e in _entries(_text(settings, "persons", "public"))]
    expected = {p.full for p in truth.persons if not p.restricted}
    found = [forms.get(name) for name in shown]
    recall = len(expected & set(found)) / len(expected)
    precision = sum(f in expected for f in found) / len(found)
    assert recall >= 0.95 and precision >= 0.9, (recall, precision, shown)
    assert len(found) == len(set(found))  # one entry a person
    restricted = [p for p in truth.persons if p.restricted]
    public_text = _text(settings, "persons", "public")
    assert not any(p.surname[0][:-1] in public_text for p in restricted)  # zero leaks, in any case form
    hr_text = _text(settings, "persons", "hr")
    assert all(p.surname[0][:-1] in hr_text for p in restricted)


def test_organisations_merged_by_inn(built) -> None:
    truth, settings, _, _ = built
    entries = _entries(_text(settings, "organisations", "public"))
    for org in truth.organisations:
        holding = [e for e in entries if f"ИНН {org.inn}" in e]
        assert len(holding) == 1, (org, holding)
        assert "3 упоминания" in holding[0] or "4 упоминания" in holding[0]
    assert sum("ИНН" in e for e in entries) == 12


def test_meta_chunks_say_what_they_are_and_respect_access(built) -> None:
    truth, settings, _, _ = built
    with SqliteIndex(settings.index_path) as index:
        chunks = index.source_chunks("korpus://meta/public/Реестр лиц")
        assert chunks and all(c["text"].startswith(f"[Реестр лиц · часть {c['page']}]") for c in chunks)
        embedder = shared_embedder(str(embed_model_path(settings)))
        for question, title in [
            ("какие документы есть в коллекции?", "Оглавление коллекции"),
            ("перечисли всех людей, которые упоминаются", "Реестр лиц"),
            ("список организаций и их ИНН", "Реестр организаций"),
            ("построй хронологию событий", "Хронология событий"),
        ]:
            hits = retrieve(index.searcher, question, embedder.embed_query(question), ["public"], k=3)
            assert any(h["source_id"] == f"korpus://meta/public/{title}" for h in hits), (question, hits)
        restricted = [p for p in truth.persons if p.restricted]
        for person in restricted:
            query = f"{person.surname[0]} {person.name[0]}"
            hits = retrieve(index.searcher, query, embedder.embed_query(query), ["public"], k=20)
            assert all(h["access"] == "public" for h in hits)
            assert not any(person.surname[0][:-1] in h["text"] for h in hits)

    client = TestClient(create_app(settings))
    public = client.get("/meta/persons", headers={"X-API-Key": "k-public"}).json()
    assert [d["access"] for d in public] == ["public"]
    both = client.get("/meta/persons", headers={"X-API-Key": "k-hr"}).json()
    assert sorted(d["access"] for d in both) == ["hr", "public"]
    assert client.get("/meta/persons", params={"scopes": "hr"}, headers={"X-API-Key": "k-public"}).status_code == 403
    assert client.get("/meta/nothing", headers={"X-API-Key": "k-hr"}).status_code == 404

    shown = CliRunner().invoke(app, ["meta", "organisations", "--data", str(settings.data), "--scopes", "public"])
    assert shown.exit_code == 0 and "korpus://meta/public/Реестр организаций" in shown.output
    assert "ИНН" in shown.output


def test_only_what_changed_is_rebuilt(built, tmp_path: Path) -> None:
    from flows.corpus_refresh import run_refresh

    _, settings, _, root = built
    data = tmp_path / "data"
    shutil.copytree(settings.data, data)
    settings = settings.model_copy(update={"data": data})
    unchanged = run_refresh(root, settings)["meta_documents"]
    assert unchanged["scopes_unchanged"] == 2 and not unchanged.get("scopes_built")
    assert not unchanged.get("facts_extracted") and not unchanged.get("documents_published")

    letter = root / "письма" / "письмо_23.txt"
    original = letter.read_text(encoding="utf-8")
    try:
        letter.write_text(original + "15 мая 2024 г. получен ответ от Петрова Аркадия Ильича.\n", encoding="utf-8")
        changed = run_refresh(root, settings)["meta_documents"]
    finally:
        letter.write_text(original, encoding="utf-8")
    assert changed["scopes_built"] == 1 and changed["scopes_unchanged"] == 1  # hr untouched
    assert changed["facts_extracted"] == 1 and changed["facts_cached"] == 36
    assert 1 <= changed["documents_published"] <= 4
    assert "Петров Аркадий Ильич" in _text(settings, "persons", "public")
    assert "15 мая 2024" in _text(settings, "chronology", "public")
    with SqliteIndex(settings.index_path) as index:
        served = [r for r in index.sources() if r["kind"] == "meta" and r["lifecycle"] == "current"]
        assert len(served) == 8


def test_a_scope_with_no_documents_left_has_its_meta_documents_retired(built, tmp_path: Path) -> None:
    from flows.corpus_refresh import run_refresh

    _, settings, _, root = built
    data, copy = tmp_path / "data", tmp_path / "root"
    shutil.copytree(settings.data, data)
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "кадры")  # the three hr orders removed: nothing in `hr` is left to describe
    settings = settings.model_copy(update={"data": data})
    done = run_refresh(copy, settings)["meta_documents"]
    assert done["documents_retired"] == 4 and done["scopes_unchanged"] == 1
    with SqliteIndex(settings.index_path) as index:
        served = [r for r in index.sources() if r["kind"] == "meta" and r["lifecycle"] == "current"]
        assert len(served) == 4 and {r["access"] for r in served} == {"public"}
        assert "hr" not in {scope.split("/")[-1] for scope in index.meta_fingerprints()}


WORDS = [
    "Саша",
    "Петровна",
    "Иванович",
    "Елена",
    "Смирнову",
    "Кузнецовым",
    "Ткаченко",
    "Е.",
    "В.",
    "А.А.",
    "Анне",
    "Ответственным",
    "Москве",
    "Ищенное",
    "Жан-Поль",
    "Сартр",
    "О'Коннор",
    "Мария",
    "Игоревичу",
    "Белову",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join))
def test_any_person_span_is_read_or_refused_never_crashes(span: str) -> None:
    name = person_name(span)
    assert name is None or (name.surname and name.shown)


def test_meta_parts_stay_out_of_the_way_of_ordinary_questions(built) -> None:
    """A register names almost everyone a question might ask about; only a question about the collection lets a meta
    part outrank a document. For any other, every document hit comes first, and an empty register is never a hit."""
    truth, settings, _, _ = built
    with SqliteIndex(settings.index_path) as index:
        embedder = shared_embedder(str(embed_model_path(settings)))
        people = [p for p in truth.persons if not p.restricted][:6]
        ordinary = [f"что поручено {p.forms()[0]}" for p in people] + [
            f"Контрагент {o.short} ИНН {o.inn}" for o in truth.organisations[:4]
        ]
        for question in ordinary:
            hits = retrieve(index.searcher, question, embedder.embed_query(question), ["public"], k=60)
            meta = [n for n, h in enumerate(hits) if h["source_id"].startswith("korpus://meta/")]
            documents = [n for n, h in enumerate(hits) if not h["source_id"].startswith("korpus://meta/")]
            assert documents and documents[0] == 0, (question, hits[:3])
            assert not meta or min(meta) > max(documents), question
        # the hr scope's documents name no organisation: its register says «Записей нет.» and is never returned
        question = "перечисли все организации, которые упоминаются в документах"
        assert "Записей нет." in _text(settings, "organisations", "hr")
        hits = retrieve(index.searcher, question, embedder.embed_query(question), ["hr"], k=50)
        assert hits and not any("Записей нет." in h["text"] for h in hits)
        assert hits[0]["source_id"].startswith("korpus://meta/hr/")  # a collection question: meta parts lead


def test_meta_parts_are_embedded_a_slice_at_a_time_with_the_vectors_they_get_whole(
    built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#32: the build hands the embedder at most EMBED_SLICE parts a call (it holds every text it is given as tokens:
    the table of contents of 100,000 letters is ~18,000 parts), and each part gets the vector it got in one call."""
    import tasks.meta.publish as publish
    from flows.after_documents import embed_on_every_core
    from tasks.meta.facts import FactCache

    _, settings, _, _ = built
    again = settings.model_copy(update={"data": tmp_path / "data"})
    shutil.copytree(settings.data, again.data)
    calls: list[int] = []

    def embed(chunks: list) -> object:
        calls.append(len(chunks))
        return embed_on_every_core(chunks, again)

    monkeypatch.setattr(publish, "EMBED_SLICE", 3)
    with SqliteIndex(again.index_path) as index:
        assert index.withdraw_meta_documents() == 8  # every part is embedded again
        done = publish.refresh_meta(index, FactCache(again.meta_cache_dir), embed, embed_model_path(again).name)
        ids = [r["source_id"] for r in index.sources() if r["kind"] == "meta" and r["lifecycle"] == "current"]
        sliced = {source_id: index.current_vectors(source_id) for source_id in ids}
    assert done["scopes_built"] == 2 and done["documents_published"] == 8 and len(ids) == 8
    assert done["parts_embedded"] == sum(calls) > 2 * 8 and max(calls) <= 3
    with SqliteIndex(settings.index_path) as index:
        for source_id, vectors in sliced.items():
            whole = index.current_vectors(source_id)
            assert vectors.keys() == whole.keys()
            assert all(float(vectors[text] @ whole[text]) > 0.9999 for text in vectors)


def test_the_refresh_lets_its_plan_go_before_the_meta_documents(
    models, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#32: the files found and the plan (one object a file: ~190 MB at 100,000 letters) are not held while the
    meta-documents are built, whose own peak is in proportion to the archive too."""
    import gc
    import time
    import uuid

    import flows.corpus_refresh as corpus_refresh
    from korpus.core.datamodel import Source

    root, mark = tmp_path / "root", f"plan-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  access: public\n  owner: Канцелярия\n", encoding="utf-8")
    for n in range(3):
        (root / f"{mark}-{n}.txt").write_text(f"Письмо № {n} от 12.03.2024 о ремонте кровли склада.", encoding="utf-8")
    held: list[str] = []
    build = corpus_refresh.build_meta_documents

    def counted(settings: Settings) -> dict:
        for attempt in range(60):  # background threads (Prefect's events, the closed cluster's) may lag on a loaded
            gc.collect()  # machine: what they hold goes within seconds, what the flow holds never does
            alive = [o for o in gc.get_objects() if type(o) is Source and mark in o.source_id]
            if not alive:
                break
            if attempt == 59:
                for source in alive:
                    held.append(f"{source.source_id} <- {_holders(source, alive)}")
            del alive
            time.sleep(0.5)
        return build(settings)

    monkeypatch.setattr(corpus_refresh, "build_meta_documents", counted)
    summary = corpus_refresh.run_refresh(root, Settings(data=tmp_path / "data"))
    assert summary["chunks_indexed"] == 3 and summary["sources"] == 3 and summary["files_hashed"] == 3
    assert summary["meta_documents"]["scopes_built"] == 1
    assert held == []


def _holders(target: object, skip: list, depth: int = 8) -> str:
    """What holds `target`, one referrer a level (for the failure message)."""
    import gc
    import sys
    import types

    chain, seen, current = [], {id(skip), id(sys._getframe())}, target
    for _ in range(depth):
        refs = [r for r in gc.get_referrers(current) if id(r) not in seen and not isinstance(r, types.FrameType)]
        if not refs:
            break
        seen.add(id(refs))
        current = refs[0]
        chain.append(type(current).__name__ + (f"{sorted(current)[:4]}" if isinstance(current, dict) else ""))
    return " <- ".join(chain)

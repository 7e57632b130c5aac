"""A streaming refresh (flows/refresh_stream.py): a letter is published while a scan of the same refresh is still
being OCR'd, the scan is published once its last page is in, and each document's quarantine items are written with
its publish. Real Tesseract, e5 and SQLite; the scan's last page waits (at most a minute) for the letter to be
published, so the order is not left to the machine's load: a refresh that indexes only after every page is read
publishes the letter after that page, and the test fails."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pymupdf
import pytest

import tasks.ocr.tesseract_engine
from corpora.sample_archive import _scan_pdf
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex

pytestmark = pytest.mark.integration
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\n"


def test_a_letter_is_searchable_while_a_scan_is_still_being_read(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    (root / "письмо.txt").write_text("Письмо о поставке насосов на склад № 3 в марте.", encoding="utf-8")
    (root / "пустое.txt").write_text("\n", encoding="utf-8")  # quarantined empty-text with its own publish
    scan = pymupdf.open()
    for n, lines in enumerate(
        [
            ["АКТ № 5", "приёмки насосов на склад", "Приняты без замечаний."],
            ["Приложение 1", "Перечень насосов", "Насос НД-1, насос НД-2"],
            ["ОПИСЬ ДЕЛ", "архивного фонда № 12", "за 1998 год"],
        ]
    ):
        scan.insert_pdf(pymupdf.open(stream=_scan_pdf(lines, seed=n)))
    scan.save(root / "акт.pdf")

    log: list[tuple[str, str, float]] = []
    lock = threading.Lock()
    original_ocr = tasks.ocr.tesseract_engine.ocr_page_words
    original_publish = SqliteIndex.publish_version

    letter_published = threading.Event()
    calls = []

    def slow_ocr(*args: object, **kwargs: object) -> object:
        with lock:
            calls.append(1)
            last = len(calls) == 3
        if last:  # the scan's last page waits for the letter (at most a minute: a refresh that does not stream
            letter_published.wait(60)  # publishes the letter only after this page, and the test fails below)
        result = original_ocr(*args, **kwargs)
        with lock:
            log.append(("ocr", "акт.pdf", time.monotonic()))
        return result

    def logged_publish(self: SqliteIndex, source: object, *args: object, **kwargs: object) -> None:
        original_publish(self, source, *args, **kwargs)
        with lock:
            log.append(("publish", source.source_id, time.monotonic()))  # type: ignore[attr-defined]
        if source.source_id == "письмо.txt":  # type: ignore[attr-defined]
            letter_published.set()

    monkeypatch.setattr(tasks.ocr.tesseract_engine, "ocr_page_words", slow_ocr)
    monkeypatch.setattr(SqliteIndex, "publish_version", logged_publish)
    settings = Settings(data=tmp_path / "data", meta_documents=False, index_group_sources=1)
    summary = run_refresh(root, settings)

    assert summary["pages_by_method"].get("tesseract") == 3, summary
    published = {source_id: at for kind, source_id, at in log if kind == "publish"}
    last_page = max(at for kind, _, at in log if kind == "ocr")
    assert published["письмо.txt"] < last_page, log  # searchable before the scan's OCR ended
    assert published["акт.pdf"] >= last_page, log  # the scan waits for its own last page, and only for it
    assert 0 < summary["first_searchable_seconds"] < summary["seconds"], summary
    with SqliteIndex(settings.index_path) as index:
        hits = index.searcher.lexical("насосов склад", ["public"], 5)
        open_items = index.quarantine_items("open")
    assert hits
    assert [(i["source_id"], i["reasons"]) for i in open_items] == [("пустое.txt", ["empty-text"])]


def test_a_large_document_is_embedded_in_slices_and_each_chunk_keeps_its_own_vector(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flows/refresh_stream.EMBED_SLICE: a document's chunks beyond a slice go to several embed tasks side by side
    (a 3,599-page sheet's 4,237 chunks were one task on one core); the slices' vectors are joined back in order, so
    every stored chunk holds the vector of its own text."""
    import flows.inflight
    import flows.refresh_stream
    from korpus.core.model_store import embed_model_path
    from tasks.retrieval.embedding import shared_embedder

    monkeypatch.setattr(flows.refresh_stream, "EMBED_SLICE", 3)
    sizes: list[int] = []
    original_submit = flows.inflight.Inflight.submit

    def counted(self: object, stage: object, then: object, **kwargs: object) -> None:
        if getattr(stage, "name", "") == "embed":
            sizes.append(len(kwargs["chunks"]))  # type: ignore[arg-type]
        original_submit(self, stage, then, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(flows.inflight.Inflight, "submit", counted)
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    topics = [
        "поставка насосов",
        "ремонт кровли",
        "отпуск сотрудников",
        "закупка бумаги",
        "охрана труда",
        "пожарная безопасность",
        "график дежурств",
        "инвентаризация склада",
    ]
    body = "\n\n".join(
        f"{n + 1}. Раздел о теме «{t}». " + f"Подробности о теме {t} изложены здесь. " * 40
        for n, t in enumerate(topics)
    )
    (root / "регламент.txt").write_text(body, encoding="utf-8")
    # the cluster's slices, not the first documents' in-flow embedding
    settings = Settings(data=tmp_path / "data", meta_documents=False, first_documents=0)
    run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        stored = index.current_vectors("регламент.txt")
    assert len(stored) > 3 and len(sizes) == -(-len(stored) // 3) and max(sizes) == 3, sizes  # sliced, by 3
    embedder = shared_embedder(str(embed_model_path(settings)))
    texts = list(stored)
    direct = embedder.embed_passages(texts)
    for text, vector in zip(texts, direct, strict=True):
        assert float(stored[text] @ vector) > 0.999, text[:60]


def test_the_first_letters_are_searchable_before_the_cluster_starts(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flows/first_documents.py: the first 8 small text files are read, embedded and published in the flow's thread
    before the local Dask cluster starts; the rest (the ninth letter, the PDF: a reading child's kind) on the
    cluster. A refresh of only a few letters starts no cluster at all, and everything is indexed either way. The
    same on a cluster of the user's own; none with KORPUS_FIRST_DOCUMENTS=0."""
    import flows.corpus_refresh

    seen_at_start: list[set[str]] = []
    original = flows.corpus_refresh.dask_task_runner

    def runner(settings: Settings) -> object:
        with SqliteIndex(settings.index_path) as index:  # what is searchable when the cluster is asked for
            seen_at_start.append({s["source_id"] for s in index.sources() if s["lifecycle"] == "current"})
        return original(settings.model_copy(update={"dask_address": None}))  # "a cluster of its own" runs here

    monkeypatch.setattr(flows.corpus_refresh, "dask_task_runner", runner)
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    letters = [f"письмо_{n}.txt" for n in range(9)]
    for n, name in enumerate(letters):
        (root / name).write_text(f"Письмо № {n} о поставке насосов на склад.", encoding="utf-8")
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "Акт приёмки насосов на склад № 3.")
    pdf.save(root / "акт.pdf")
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    summary = run_refresh(root, settings)
    assert len(seen_at_start) == 1 and len(seen_at_start[0]) == 8, seen_at_start
    assert seen_at_start[0] <= set(letters), seen_at_start  # letters, never the PDF
    assert summary["chunks_indexed"] == 10 and summary["quarantined"] == 0, summary
    assert 0 < summary["first_searchable_seconds"] < summary["seconds"], summary

    few = tmp_path / "few"
    few.mkdir()
    (few / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for name in letters[:3]:
        (few / name).write_text((root / name).read_text(encoding="utf-8"), encoding="utf-8")
    summary = run_refresh(few, Settings(data=tmp_path / "data-few", meta_documents=False))
    assert len(seen_at_start) == 1 and summary["chunks_indexed"] == 3, (seen_at_start, summary)

    # On a cluster of the user's own the flow indexes them too (its machine has the model); KORPUS_FIRST_DOCUMENTS=0
    # sends every document to the cluster.
    own = Settings(data=tmp_path / "data-own", meta_documents=False, dask_address="tcp://127.0.0.1:9")
    assert run_refresh(root, own)["chunks_indexed"] == 10 and len(seen_at_start[1]) == 8, seen_at_start
    none_first = Settings(data=tmp_path / "data-none", meta_documents=False, first_documents=0)
    assert run_refresh(root, none_first)["chunks_indexed"] == 10 and seen_at_start[2] == set(), seen_at_start
    # where the flow's machine has no embedding model, a cluster of its own takes every document
    bare = own.model_copy(update={"data": tmp_path / "data-bare", "home": tmp_path / "bare-home"})
    from flows.first_documents import first_documents
    from tasks.receive import RefreshPlan, discover_sources
    from tasks.runtime.reader_child import PURE_PYTHON

    plan = RefreshPlan(to_process=[s for s in discover_sources(root) if s.kind in PURE_PYTHON])
    assert len(plan.to_process) == 9
    assert first_documents(plan, bare, indexer=None) is plan  # type: ignore[arg-type]  # the indexer never asked

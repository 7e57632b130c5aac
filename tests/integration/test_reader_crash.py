"""A crash is one file's item (#46 item 1), with real faults in the real flow: beside good letters and a good PDF,
the reading child of one PDF segfaults, another's allocates past its memory limit, a third's hangs in C — and (#61)
a text file's and a web page's too, read in the child like every kind but a recording. The refresh goes on and
indexes the good files; each bad one is a `reader-crashed` item naming the signal or the limit, or `reader-timed-out`;
the next refresh does not read them again; `korpus review retry` has one read again. A changed file whose new version
times out keeps its old version served, and `korpus status` says so; a child ended at its time limit takes the
program it started in a process group of its own with it."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from corpora.sample_archive import typeset_pdf
from flows.corpus_refresh import run_refresh
from korpus.apps.cli import app
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration
FAULTS = "segv.pdf:segv,alloc.pdf:alloc,hang.pdf:hang,alloc.txt:alloc,hang.html:hang"


def _living_children() -> list[psutil.Process]:
    living = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                child.cmdline()
                living.append(child)
        except psutil.Error:  # gone or a zombie meanwhile
            continue
    return living


def _pdf(text: str) -> bytes:
    return typeset_pdf([[("h1", text), ("p", f"{text}: приказ о поставке насосов и ремонте склада.")]])


def test_a_segfault_an_allocation_and_a_hang_are_each_one_files_item(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for n in range(3):
        (root / f"письмо_{n}.txt").write_text(f"Письмо {n} о поставке труб.\n", encoding="utf-8")
    for name in ("хороший.pdf", "segv.pdf", "alloc.pdf", "hang.pdf"):
        (root / name).write_bytes(_pdf(f"Документ {name}"))
    (root / "alloc.txt").write_text("Записка, на которой чтение выходит за память.", encoding="utf-8")
    (root / "hang.html").write_text("<p>Страница, на которой чтение зависает.</p>", encoding="utf-8")
    settings = Settings(data=tmp_path / "data", meta_documents=False, reader_memory_mb=768, reader_seconds=15)
    monkeypatch.setenv("KORPUS_FAULT_READ", FAULTS)

    first = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        served = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
        items = {i["source_id"]: i for i in index.quarantine_items("open")}
    assert served == {"письмо_0.txt", "письмо_1.txt", "письмо_2.txt", "хороший.pdf"}, (served, first)
    crashes, hangs = ("segv.pdf", "alloc.pdf", "alloc.txt"), ("hang.pdf", "hang.html")
    assert {s: items[s]["reasons"] for s in (*crashes, *hangs)} == {
        **{s: ["reader-crashed"] for s in crashes},
        **{s: ["reader-timed-out"] for s in hangs},
    }
    assert "SIGSEGV" in items["segv.pdf"]["detail"]
    assert "memory limit (768 MB)" in items["alloc.pdf"]["detail"]
    assert "memory limit (768 MB)" in items["alloc.txt"]["detail"]
    assert all("time limit (15 s" in items[s]["detail"] for s in hangs)
    assert not [p for p in _living_children() if "reader_child" in " ".join(p.cmdline())]

    second = run_refresh(root, settings)  # the crashed files are not read again: their versions stay refused
    assert second["changes"] == {"unchanged": 9} and second["quarantined"] == 0, second

    monkeypatch.delenv("KORPUS_FAULT_READ")  # say the reader was fixed; a reviewer asks for one file again
    retried = CliRunner().invoke(
        app, ["review", "retry", items["segv.pdf"]["item_id"], "--reviewer", "р", "--data", str(settings.data)]
    )
    assert retried.exit_code == 0, retried.output
    third = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        served = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
    assert "segv.pdf" in served and "alloc.pdf" not in served, third


def _sleepers() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if (process.info["cmdline"] or [])[:2] == ["sleep", "3617"]:
            found.append(process)
    return found


def test_a_changed_file_that_times_out_keeps_its_old_version_and_its_childs_children_go(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#61 items 3 and 5: a served file is edited and its new version's read passes the time limit (a reader that
    starts a program in a process group of its own — as LibreOffice runs — and hangs). The old version is still
    found, `korpus status` says the file is served at an older version, the item is `reader-timed-out` with its
    advice, and the program the child started is gone once the child is ended. Before, the old version was retired
    (the file vanished from search) and the program ran on."""
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    book = root / "том_1.txt"
    book.write_text("Отчёт о ремонте котельной за первый квартал.\n", encoding="utf-8")
    settings = Settings(data=tmp_path / "data", meta_documents=False, reader_seconds=5)
    run_refresh(root, settings)
    assert not _sleepers()

    book.write_text("Отчёт о ремонте котельной за первый квартал, исправленный.\n", encoding="utf-8")
    monkeypatch.setenv("KORPUS_FAULT_READ", "том_1:orphan")
    run_refresh(root, settings)
    assert not [p for p in _sleepers() if p.status() != psutil.STATUS_ZOMBIE], "the child's own child outlived it"
    with SqliteIndex(settings.index_path) as index:
        hits = retrieve(index.searcher, "ремонт котельной", None, ["public"], k=3, mode="bm25")
        item = next(i for i in index.quarantine_items("open") if i["source_id"] == "том_1.txt")
    assert hits and hits[0]["source_id"] == "том_1.txt" and "исправленный" not in hits[0]["text"]
    assert item["reasons"] == ["reader-timed-out"] and "KORPUS_READER_SECONDS" in item["detail"]
    shown = CliRunner().invoke(app, ["status", "--data", str(settings.data)])
    assert "served_older" in shown.output and "том_1.txt: its new version was refused (reader-timed-out)" in (
        shown.output
    )

    monkeypatch.delenv("KORPUS_FAULT_READ")  # a calmer machine: the reviewer retries, the new version goes in
    retried = CliRunner().invoke(
        app, ["review", "retry", item["item_id"], "--reviewer", "р", "--data", str(settings.data)]
    )
    assert retried.exit_code == 0, retried.output
    run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        hits = retrieve(index.searcher, "ремонт котельной", None, ["public"], k=3, mode="bm25")
        assert index.served_older() == []
    assert hits and "исправленный" in hits[0]["text"]

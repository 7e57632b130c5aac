"""A crash is one file's item (#46 item 1), with real faults in the real flow: beside good letters and a good PDF,
the reading child of one PDF segfaults, another's allocates past its memory limit, a third's hangs in C. The refresh
goes on and indexes the good files; each bad one is a `reader-crashed` item naming the signal or the limit; the next
refresh does not read them again; `korpus review retry` has one read again."""

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

pytestmark = pytest.mark.integration
FAULTS = "segv.pdf:segv,alloc.pdf:alloc,hang.pdf:hang"


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
    settings = Settings(data=tmp_path / "data", meta_documents=False, reader_memory_mb=768, reader_seconds=15)
    monkeypatch.setenv("KORPUS_FAULT_READ", FAULTS)

    first = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        served = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
        items = {i["source_id"]: i for i in index.quarantine_items("open")}
    assert served == {"письмо_0.txt", "письмо_1.txt", "письмо_2.txt", "хороший.pdf"}, (served, first)
    assert {s: items[s]["reasons"] for s in ("segv.pdf", "alloc.pdf", "hang.pdf")} == {
        s: ["reader-crashed"] for s in ("segv.pdf", "alloc.pdf", "hang.pdf")}  # fmt: skip
    assert "SIGSEGV" in items["segv.pdf"]["detail"]
    assert "memory limit (768 MB)" in items["alloc.pdf"]["detail"]
    assert "time limit (15 s)" in items["hang.pdf"]["detail"]
    assert not [p for p in _living_children() if "reader_child" in " ".join(p.cmdline())]

    second = run_refresh(root, settings)  # the crashed files are not read again: their versions stay refused
    assert second["changes"] == {"unchanged": 7} and second["quarantined"] == 0, second

    monkeypatch.delenv("KORPUS_FAULT_READ")  # say the reader was fixed; a reviewer asks for one file again
    retried = CliRunner().invoke(app, ["review", "retry", items["segv.pdf"]["item_id"], "--reviewer", "р",
                                       "--data", str(settings.data)])  # fmt: skip
    assert retried.exit_code == 0, retried.output
    third = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        served = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
    assert "segv.pdf" in served and "alloc.pdf" not in served, third

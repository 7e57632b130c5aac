"""The relabel window, closed on both backends: a file moved to `hr` in korpus.yaml, or removed, is not served to
`public` at any moment of the refresh that moves it once that refresh has taken its first step — the relabels and
removals go to the catalog (and, with KORPUS_BACKEND=opensearch, to the cluster itself) before any document of the
refresh is read. A real `run_refresh` (Prefect flow, Dask cluster, Tesseract on three scans) runs in a thread while
the test searches as `public` the whole time: through the backend korpus serves with and, on OpenSearch, on the
node without the catalog's check too, so the cluster itself is shown to have the change from the first step on."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import flows.corpus_refresh as corpus_refresh
import flows.refresh_stream as refresh_stream
from corpora.sample_archive import _scan_pdf
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.opensearch import opensearch_index
from tasks.index.registry import backend_for
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration
MOVED, REMOVED = "кадры/премия.txt", "склад/инвентаризация.txt"
QUERIES = {MOVED: "премирование Смирновой", REMOVED: "инвентаризация кладовой"}


def _archive(root: Path) -> None:
    (root / "кадры").mkdir(parents=True)
    (root / "склад").mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / MOVED).write_text("Приказ: премирование Смирновой за квартал.\n", encoding="utf-8")
    (root / REMOVED).write_text("Акт: инвентаризация кладовой номер два.\n", encoding="utf-8")
    for n in range(4):
        (root / f"письмо_{n}.txt").write_text(f"Письмо {n}: о поставке труб и насосов.\n", encoding="utf-8")


def _changes(root: Path) -> None:
    """The manifest moves one file to `hr`, another is deleted, and enough new work arrives to take a while."""
    (root / "korpus.yaml").write_text(
        f"defaults:\n  owner: Архив\n  access: public\nrules:\n  - match: {MOVED}\n    access: hr\n", encoding="utf-8"
    )
    (root / REMOVED).unlink()
    for n in range(3):
        (root / f"скан_{n}.pdf").write_bytes(
            _scan_pdf([f"Протокол совещания номер {n}.", "Решили: закупить трубы."], n)
        )
    for n in range(4, 30):
        (root / f"письмо_{n}.txt").write_text(f"Письмо {n}: о ремонте котельной и крыши.\n", encoding="utf-8")


def _public_sees(settings: Settings, raw_cluster: bool = False) -> set[str]:
    """Which of the two files a `public` caller finds (BM25 and exact), through the served backend or the raw node."""
    with SqliteIndex(settings.index_path) as index:
        backend = backend_for(settings, index)
        if raw_cluster:
            backend = opensearch_index(settings)
            backend.catalog = None  # the node's own answer, no catalog check
        seen = set()
        for source_id, query in QUERIES.items():
            hits = retrieve(backend, query, None, ["public"], k=20, mode="bm25")
            found = backend.exact_occurrences(query.split()[0], ["public"])
            if any(h["source_id"] == source_id for h in hits) or source_id in found["by_source"]:
                seen.add(source_id)
        return seen


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def test_a_moved_or_removed_file_is_not_served_from_the_refreshs_first_step(
    backend: str, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    if backend == "opensearch":
        settings = settings.model_copy(
            update={
                "backend": "opensearch",
                "opensearch_url": request.getfixturevalue("opensearch_url"),
                "opensearch_prefix": request.getfixturevalue("os_prefix"),
            }
        )
    root = tmp_path / "archive"
    _archive(root)
    run_refresh(root, settings)
    assert _public_sees(settings) == {MOVED, REMOVED}  # before: both are public, so the searches can find them
    _changes(root)

    moments: dict[str, float] = {}
    real_access, real_start = corpus_refresh.apply_access_changes, refresh_stream.Parse.start
    real_sync = corpus_refresh.sync_opensearch

    def access_changes(*args: Any) -> None:
        real_access(*args)
        moments["access_applied"] = time.monotonic()

    def sync(*args: Any) -> Any:
        report = real_sync(*args)
        moments.setdefault("mirrored", time.monotonic())  # the first sync: the relabels and removals
        return report

    def parse_start(self: Any) -> None:
        moments.setdefault("first_read", time.monotonic())
        real_start(self)

    monkeypatch.setattr(corpus_refresh, "apply_access_changes", access_changes)
    monkeypatch.setattr(refresh_stream.Parse, "start", parse_start)
    monkeypatch.setattr(corpus_refresh, "sync_opensearch", sync)
    summary: dict[str, Any] = {}
    refresher = threading.Thread(target=lambda: summary.update(run_refresh(root, settings)))
    refresher.start()
    polls: list[tuple[float, float, set[str]]] = []
    raw: list[tuple[float, float, set[str]]] = []
    while refresher.is_alive():
        began = time.monotonic()
        polls.append((began, time.monotonic(), _public_sees(settings)))
        if backend == "opensearch":
            began = time.monotonic()
            raw.append((began, time.monotonic(), _public_sees(settings, raw_cluster=True)))
    refresher.join()

    assert summary["chunks_indexed"] >= 29 and summary["relabelled"] == 1, summary
    # the relabel and the removal were applied (and mirrored) before the first document was read
    assert moments["access_applied"] < moments["first_read"], moments
    after = [seen for began, _end, seen in polls if began >= moments["access_applied"]]
    during = [p for p in polls if p[0] >= moments["first_read"]]
    assert len(during) >= 3, f"too few searches while documents were read ({len(polls)} in all)"
    assert all(not seen for seen in after), [p for p in polls if p[0] >= moments["access_applied"] and p[2]]
    assert _public_sees(settings) == set()
    if backend == "opensearch":  # the cluster itself had the change before any document was read
        assert moments["mirrored"] < moments["first_read"], moments
        assert summary["opensearch_first"]["updated"] >= 2  # the relabelled chunk and the retired one
        stale = [p for p in raw if p[0] >= moments["mirrored"] and p[2]]
        assert len([p for p in raw if p[0] >= moments["first_read"]]) >= 3 and not stale, stale

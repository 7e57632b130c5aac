"""A Dask worker started with `--preload flows.worker_warm` (as the topology starts its workers) is warm before its
first task: the embedder a refresh's `embed` task asks for is already loaded — the same one, not a second model in
memory — and the task thread's reading child is running. A refresh's own process warms its first documents'
embedder the same way."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.settings import Settings
from tasks.contract.chunking import page_chunks

pytestmark = pytest.mark.integration


def test_a_warm_worker_holds_the_embedder_its_embed_task_asks_for(models: dict[str, Path]) -> None:
    from distributed import Client, LocalCluster

    import flows.refresh_tasks as refresh_tasks
    from tasks.retrieval.embedding import shared_embedder
    from tasks.runtime.reader_child import stop_children

    shared_embedder.cache_clear()
    try:
        with (
            LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=False,  # the worker in this process: its caches are this test's to read
                preload=["flows.worker_warm"],
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            deadline = time.monotonic() + 120
            while any(t.name == "korpus-warm" for t in threading.enumerate()):
                assert time.monotonic() < deadline, "the worker did not finish warming"
                time.sleep(0.2)
            loaded = shared_embedder.cache_info()
            assert loaded.currsize == 1, loaded

            def reading_child_running() -> bool:
                from tasks.runtime.reader_child import _children

                child = getattr(_children, "child", None)
                return child is not None and child.process is not None and child.process.poll() is None

            assert client.submit(reading_child_running, pure=False).result(timeout=60)
            source = Source(source_id="s", version="v", path="/x", kind=SourceKind.text, owner="o", access="public")
            page = PageResult(source_id="s", source_version="v", page=1, text="Записка о ремонте кровли.", method="x")
            chunks, _ = page_chunks(source, [page])
            vectors = client.submit(refresh_tasks.embed.fn, chunks, Settings(), pure=False).result(timeout=120)
            assert vectors.shape[0] == len(chunks) > 0
            after = shared_embedder.cache_info()
            assert after.misses == loaded.misses and after.currsize == 1, after  # the task found the warm embedder
    finally:
        stop_children()  # the worker thread's reading child (the worker ran in this process)


def test_the_flow_warms_the_embedder_its_first_documents_ask_for(models: dict[str, Path]) -> None:
    """flows/first_documents.Warmer.planned: the refresh's own process loads, once it has a plan with first
    documents, the embedder their `embed` then finds — one load, the same one; an `embed` asking while it loads
    waits for it. A plan without them, or KORPUS_FIRST_DOCUMENTS=0, loads nothing."""
    import flows.refresh_tasks as refresh_tasks
    from flows.first_documents import Warmer
    from tasks.receive import RefreshPlan
    from tasks.retrieval.embedding import shared_embedder, token_counter

    settings = Settings()
    source = Source(source_id="s", version="v", path="/x", kind=SourceKind.text, owner="o", access="public")
    page = PageResult(source_id="s", source_version="v", page=1, text="Записка о ремонте кровли.", method="x")
    chunks, _ = page_chunks(source, [page])
    letter = source.model_copy(update={"size": 100})
    plan = RefreshPlan(to_process=[letter])
    shared_embedder.cache_clear()
    token_counter.cache_clear()
    assert Warmer(settings).planned(RefreshPlan()) is None
    assert token_counter.cache_info().currsize == 0  # nothing loaded for a plan without first documents
    warming = Warmer(settings).planned(plan)
    assert warming is not None
    vectors = refresh_tasks.embed.fn(chunks, settings)  # asked at once: waits for the loading thread
    warming.join(120)
    assert vectors.shape[0] == len(chunks) > 0
    loaded = shared_embedder.cache_info()
    assert (loaded.misses, loaded.currsize) == (1, 1), loaded
    deadline = time.monotonic() + 60
    while token_counter.cache_info().currsize == 0:  # chunk-and-gate's tokenizer, loaded beside the model
        assert time.monotonic() < deadline, "the tokenizer was not warmed"
        time.sleep(0.1)
    counted = token_counter.cache_info()
    refresh_tasks.chunk_and_gate.fn([], settings, None)
    assert token_counter.cache_info().hits == counted.hits + 1  # chunk-and-gate found it loaded
    assert Warmer(settings.model_copy(update={"first_documents": 0})).planned(plan) is None


def test_discovery_starts_the_load_at_the_first_new_letter(models: dict[str, Path], tmp_path: Path) -> None:
    """flows/first_documents.Warmer: the load starts while discovery is still walking the archive — at the first
    small text file the catalog does not hold in that version — not after the plan. A letter current or refused in
    its version, or only files korpus reads through a converter, start nothing."""
    from flows.first_documents import Warmer
    from tasks.receive import discover_sources
    from tasks.retrieval.embedding import shared_embedder, token_counter

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.pdf").write_bytes(b"%PDF-1.4 not really")
    (root / "b.txt").write_text("Записка о ремонте кровли.", encoding="utf-8")
    (root / "c.txt").write_text("Ещё одна записка.", encoding="utf-8")
    (tmp_path / "elsewhere.txt").write_text("Письмо вне корня.", encoding="utf-8")
    (root / "0-link.txt").symlink_to(tmp_path / "elsewhere.txt")  # refused at admission: never read, never warms
    settings = Settings()
    seen: list[str] = []

    def watching(warmer: Warmer) -> Callable[[Source], None]:
        def found(source: Source) -> None:
            seen.append(f"{source.source_id}:{'warming' if warmer.thread else 'cold'}")
            warmer.found(source)

        return found

    shared_embedder.cache_clear()
    token_counter.cache_clear()
    indexed = [s for s in discover_sources(root) if not s.outside_root]
    current = {s.source_id: {s.version: ("o", "public", "default")} for s in indexed}
    cold = Warmer(settings, current)
    discover_sources(root, settings, None, watching(cold))
    assert cold.thread is None and seen == ["0-link.txt:cold", "a.pdf:cold", "b.txt:cold", "c.txt:cold"]
    (root / "b.txt").write_text("Записка о ремонте кровли, исправленная.", encoding="utf-8")
    seen.clear()
    warmer = Warmer(settings, current)
    discover_sources(root, settings, None, watching(warmer))
    assert seen == [
        "0-link.txt:cold",
        "a.pdf:cold",
        "b.txt:cold",
        "c.txt:warming",
    ]  # started at b.txt, while c.txt was still ahead
    assert warmer.thread is not None
    warmer.thread.join(120)
    assert shared_embedder.cache_info().currsize == 1
    now = {s.source_id: s.version for s in discover_sources(root) if not s.outside_root}
    refused = {"b.txt": {now["b.txt"]: {"empty-text"}}}  # the catalog refused this version: it is not read again
    assert now["b.txt"] not in current["b.txt"]
    held = Warmer(settings, current, refused)
    discover_sources(root, settings, None, held.found)
    assert held.thread is None
    off = Warmer(settings.model_copy(update={"first_documents": 0}), current)
    discover_sources(root, settings, None, off.found)
    assert off.thread is None

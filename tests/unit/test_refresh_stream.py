"""The streaming refresh's small decisions (flows/refresh_stream.py), without a cluster — but for one test that starts
the in-process cluster the refresh makes (flows/refresh_tasks.py `dask_task_runner`) and runs tasks on it."""

import gc
import random
import time
import weakref

import dask
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.refresh_stream import FIRST_GROUP, MIN_READS_AHEAD, READS_AHEAD_PER_THREAD, Indexer, Parse, embed_resources
from flows.sealed import Sealed, opened
from flows.tally import Tally
from korpus.core.settings import Settings

pytestmark = pytest.mark.unit


def test_embedding_resources_come_from_the_setting() -> None:
    assert embed_resources(Settings()) is None  # unset: any worker embeds (a LocalCluster has no resources)
    assert embed_resources(Settings(dask_embed_resources="GPU=1")) == {"GPU": 1.0}
    assert embed_resources(Settings(dask_embed_resources="GPU=1, MEMORY=2e9")) == {"GPU": 1.0, "MEMORY": 2e9}


def test_groups_start_small_and_grow_to_the_configured_size() -> None:
    indexer = Indexer(Settings(index_group_sources=128), None, 0, None, Tally())
    limits = []
    for _ in range(7):
        limits.append(indexer.group_limit())
        indexer.flushed += 1
    assert limits == [FIRST_GROUP, 16, 32, 64, 128, 128, 128]
    assert Indexer(Settings(index_group_sources=1), None, 0, None, Tally()).group_limit() == 1  # each alone


def test_sealed_inputs_reach_the_task_function_unsealed() -> None:
    seen = []

    @opened
    def stage(pages: list, settings: object = None) -> int:
        seen.append((pages, settings))
        return len(pages)

    assert stage(Sealed([1, 2]), settings=Sealed("s")) == 2
    assert stage([3]) == 1  # an unsealed value passes through as it is
    assert seen == [([1, 2], "s"), ([3], None)]
    assert repr(Sealed([1])) == "<list>"  # what the Prefect UI shows, not the pages


def test_read_batches_start_small_grow_to_the_cap_and_keep_a_big_file_alone() -> None:
    from types import SimpleNamespace

    from flows.refresh_tasks import FIRST_READ_BATCH, READ_BATCH_BYTES, READ_BATCH_FILES, read_batches

    letters = [SimpleNamespace(size=500) for _ in range(1000)]
    sizes = [len(b) for b in read_batches(letters)]
    assert sizes[:5] == [
        FIRST_READ_BATCH,
        2 * FIRST_READ_BATCH,
        4 * FIRST_READ_BATCH,
        8 * FIRST_READ_BATCH,
        READ_BATCH_FILES,
    ]
    assert max(sizes) == READ_BATCH_FILES and sum(sizes) == 1000 and len(sizes) == 7  # 16 tasks of 64 before
    big = SimpleNamespace(size=READ_BATCH_BYTES)
    batches = read_batches([letters[0], big, letters[1]])
    assert [len(b) for b in batches] == [1, 1, 1] and batches[1] == [big]


def test_the_local_cluster_runs_without_dasks_statistical_profiler() -> None:
    import dask

    from flows.refresh_tasks import dask_task_runner

    with dask.config.set({"distributed.worker.profile.enabled": True}):
        dask_task_runner(Settings(dask_address="tcp://cluster:8786"))  # someone else's cluster: its config is theirs
        assert dask.config.get("distributed.worker.profile.enabled") is True
        runner = dask_task_runner(Settings())
        assert runner.cluster_kwargs["processes"] is False
        assert dask.config.get("distributed.worker.profile.enabled") is False  # what the in-process workers read


_COPIES: list[weakref.ref] = []


class _Letter:
    """A task input that records every copy of itself Dask unpickles (the scheduler's, which the in-process worker
    runs)."""

    def __init__(self) -> None:
        self.text = "письмо " * 200

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        _COPIES.append(weakref.ref(self))


def _length(letter: _Letter) -> int:
    return len(letter.text)


def test_the_local_cluster_lets_a_finished_tasks_inputs_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """#32: Dask's debugging logs (1,000 messages a stream by default) kept every task's inputs alive on a long
    refresh — each read batch's sources, each embed task's chunks. On korpus's cluster a finished task's inputs are
    let go."""
    import distributed

    from flows.refresh_tasks import dask_task_runner

    monkeypatch.setenv("DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH", "1000")  # a user debugging Dask: it stands
    with dask.config.set({"distributed.admin.low-level-log-length": 1000}):
        dask_task_runner(Settings())
        assert dask.config.get("distributed.admin.low-level-log-length") == 1000
    monkeypatch.delenv("DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH")
    with dask.config.set({"distributed.admin.low-level-log-length": 1000}):  # Dask's default
        runner = dask_task_runner(Settings())
        _COPIES.clear()
        with distributed.LocalCluster(**runner.cluster_kwargs) as cluster, distributed.Client(cluster) as client:
            for _ in range(40):
                assert client.submit(_length, _Letter(), pure=False).result() == len("письмо " * 200)
            deadline = time.monotonic() + 30
            while cluster.scheduler.tasks and time.monotonic() < deadline:  # the released futures, forgotten
                time.sleep(0.05)
            assert not cluster.scheduler.tasks
            gc.collect()
            assert len(_COPIES) == 40  # each task's input, unpickled once by the scheduler
            assert [ref for ref in _COPIES if ref() is not None] == []


class _Cluster:
    """Inflight's surface as Parse uses it: what is submitted waits here until the test completes or fails it."""

    def __init__(self, threads: int) -> None:
        self._threads, self.out = threads, []

    def threads(self) -> int:
        return self._threads

    def submit(
        self, stage: object, then: object, annotations: object = None, failed: object = None, **parameters: object
    ) -> None:
        self.out.append((then, failed, parameters))


@settings(max_examples=60, deadline=None)
@given(threads=st.integers(1, 16), files=st.integers(1, 60), seed=st.integers(0, 2**32 - 1))
def test_read_batches_go_out_a_few_at_a_time_and_every_document_comes_in(threads: int, files: int, seed: int) -> None:
    """#32: a 100,000-letter refresh submitted all its read batches at once, and the scheduler held every one of them
    (inputs and task wrapper pickled) until it ran. Now each batch read sends the next out: for any cluster size,
    archive and order of completions and failures, at most max(MIN_READS_AHEAD, READS_AHEAD_PER_THREAD × threads)
    are out (exactly that many while enough are left), every document is handed on once and `on_done` runs once,
    after the last. Files of 40 MB are a batch each (READ_BATCH_BYTES), so a small archive has many batches."""
    from flows.refresh_tasks import read_batches
    from korpus.core.datamodel import Source, SourceKind
    from tasks.parse import ParseOutcome
    from tasks.receive import RefreshPlan

    sources = [
        Source(
            source_id=f"дело_{n}.pdf",
            version=f"{n:064x}",
            path=f"/a/дело_{n}.pdf",
            kind=SourceKind.pdf,
            size=40 * 1024 * 1024,
        )
        for n in range(files)
    ]
    cluster, handed, done = _Cluster(threads), [], []
    parse = Parse(
        cluster,
        RefreshPlan(to_process=sources),
        Settings(),  # type: ignore[arg-type]
        on_document=lambda source, outcome: handed.append(source.source_id),
        on_done=lambda: done.append(len(handed)),
    )
    parse.start()
    limit = max(MIN_READS_AHEAD, READS_AHEAD_PER_THREAD * threads)
    batches = len(read_batches(sources))
    assert batches == files
    rng, completed = random.Random(seed), 0
    assert len(cluster.out) == min(limit, batches)
    while cluster.out:
        then, failed, parameters = cluster.out.pop(rng.randrange(len(cluster.out)))  # done in any order
        if rng.random() < 0.2:
            failed(RuntimeError("the worker died"))  # a batch failed past its retries: its files are quarantined
        else:
            then([ParseOutcome(page_count=1) for _ in parameters["sources"]])
        completed += 1
        assert len(cluster.out) == min(limit, batches - completed)  # the next one out as each comes in, never more
    assert sorted(handed) == sorted(s.source_id for s in sources)
    assert done == [files]

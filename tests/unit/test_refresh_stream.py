"""The streaming refresh's small decisions (flows/refresh_stream.py), without a cluster."""

import pytest

from flows.refresh_stream import FIRST_GROUP, Indexer, Tally, embed_resources
from flows.sealed import Sealed, opened
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
    assert sizes[:5] == [FIRST_READ_BATCH, 2 * FIRST_READ_BATCH, 4 * FIRST_READ_BATCH, 8 * FIRST_READ_BATCH,
                         READ_BATCH_FILES]  # fmt: skip
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

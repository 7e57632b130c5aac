"""A refresh on a real multi-process Dask cluster: `dask scheduler` and two `dask worker` processes on loopback, a
real Prefect server (worker processes report their task runs to it), `KORPUS_DASK_ADDRESS` set. The OCR pages of
two scanned PDFs fan out across both workers, and the index equals the one a LocalCluster run builds from the same
archive; with `pytest -m slow`, a worker SIGKILLed while it holds OCR work loses nothing. Workers see the archive,
the data directory and the page cache at the same paths (one machine here; NFS or an fsspec page-cache URL across
machines — infra/README.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pymupdf
import pytest

from corpora.sample_archive import _scan_pdf
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex

from .conftest import _free_port

pytestmark = pytest.mark.integration
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\n"
PAGES = {
    "акт.pdf": [
        ["АКТ № 5", "приёмки насосов на склад", "Приняты без замечаний."],
        ["Приложение 1", "Перечень насосов", "Насос НД-1, насос НД-2"],
    ],
    "опись.pdf": [
        ["ОПИСЬ ДЕЛ", "архивного фонда № 12", "за 1998 год"],
        ["Дело 1. Приказы", "по личному составу", "Дело 2. Переписка"],
    ],
}


def _archive(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for name, pages in PAGES.items():
        doc = pymupdf.open()
        for n, lines in enumerate(pages):
            doc.insert_pdf(pymupdf.open(stream=_scan_pdf(lines, seed=n + len(name))))
        doc.save(root / name)
    return root


@pytest.fixture
def cluster(prefect_server: str, tmp_path: Path) -> Iterator[str]:
    """The scheduler's address (the worker processes are killed and reaped when the test ends)."""
    with _cluster(prefect_server, tmp_path) as (address, _procs):
        yield address


@contextmanager
def _cluster(prefect_server: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, subprocess.Popen]]]:
    """`dask scheduler` + two single-thread `dask worker` processes, reporting to the Prefect server; w1 is started
    with `--resources GPU=1` (the GPU worker of a real deployment: here a name, nothing runs on a GPU)."""
    port = _free_port()
    env = dict(os.environ, PREFECT_API_URL=prefect_server, PREFECT_SERVER_ANALYTICS_ENABLED="false")
    address = f"tcp://127.0.0.1:{port}"
    bin_dir = Path(sys.executable).parent
    logs = [open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "w1", "w2")]
    procs = [
        subprocess.Popen(
            [str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
        )
    ]
    for name, log in zip(("w1", "w2"), logs[1:], strict=True):
        resources = ["--resources", "GPU=1"] if name == "w1" else []
        procs.append(
            subprocess.Popen(
                [
                    str(bin_dir / "dask"),
                    "worker",
                    address,
                    "--nthreads",
                    "1",
                    "--name",
                    name,
                    "--no-dashboard",
                    "--memory-limit",
                    "0",
                    *resources,
                ],
                env=env,
                cwd=Path(__file__).parents[2],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    from distributed import Client

    deadline = time.monotonic() + 120
    while True:
        try:
            with Client(address, timeout=5) as client:
                if len(client.scheduler_info()["workers"]) == 2:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the Dask cluster did not come up: " + (tmp_path / "w1.log").read_text()
        time.sleep(1)
    try:
        yield address, {"w1": procs[1], "w2": procs[2]}
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        for log in logs:
            log.close()


def _served(settings: Settings) -> list[tuple]:
    with SqliteIndex(settings.index_path) as index:
        return index.conn.execute(
            "SELECT source_id, page, body FROM chunks WHERE lifecycle = 'current' AND source_id NOT LIKE 'korpus://%' "
            "ORDER BY source_id, ordinal"
        ).fetchall()


def test_refresh_on_a_two_worker_cluster_equals_a_local_cluster_run(
    cluster: str, prefect_server: str, models: dict[str, Path], tmp_path: Path
) -> None:
    from distributed import Client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    root = _archive(tmp_path / "archive")
    local = Settings(data=tmp_path / "local-data", meta_documents=False)
    distributed = Settings(
        data=tmp_path / "cluster-data", meta_documents=False, dask_address=cluster, dask_embed_resources="GPU=1"
    )
    with temporary_settings(updates={PREFECT_API_URL: prefect_server}):
        on_cluster = run_refresh(root, distributed)
        on_local = run_refresh(root, local)
    assert on_cluster["pages_by_method"] == on_local["pages_by_method"] == {"tesseract": 4}
    assert on_cluster["ocr_engine_calls"] == 4 and on_cluster["quarantined"] == 0
    assert _served(distributed) == _served(local) and len(_served(local)) >= 2
    with Client(cluster) as client:  # both worker processes ran tasks of the refresh to completion
        done = client.run(
            lambda dask_worker: sorted(
                {str(entry[0]).split("-")[0] for entry in dask_worker.state.log if entry[2] == "memory"}
            )
        )
        names = {info["name"]: done[address] for address, info in client.scheduler_info()["workers"].items()}
    assert len(done) == 2 and all(names.values()), names
    # the embedding asked for GPU=1: only the GPU worker took it; the OCR pages went to both
    assert "embed" in names["w1"] and "embed" not in names["w2"], names
    assert "ocr_page" in names["w2"], names


@pytest.mark.slow  # ~70 s more; passes beside the cluster test (run with `pytest -m slow`)
def test_a_worker_killed_mid_refresh_loses_nothing(
    prefect_server: str, models: dict[str, Path], tmp_path: Path
) -> None:
    """SIGKILL one worker while it holds OCR work: Dask reruns its tasks on the other, the refresh completes, and the
    index equals a LocalCluster run's."""
    import threading

    from distributed import Client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    root = _archive(tmp_path / "archive")
    local = Settings(data=tmp_path / "local-data", meta_documents=False)
    with _cluster(prefect_server, tmp_path) as (address, procs):
        distributed = Settings(data=tmp_path / "cluster-data", meta_documents=False, dask_address=address)
        killed: list[str] = []

        def kill_when_busy() -> None:
            with Client(address) as client:
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline and not killed:
                    for worker, keys in client.processing().items():
                        name = client.scheduler_info()["workers"].get(worker, {}).get("name")
                        if name in procs and any("ocr" in str(key) for key in keys):
                            procs[name].kill()
                            killed.append(name)
                            return
                    time.sleep(0.05)

        watcher = threading.Thread(target=kill_when_busy, daemon=True)
        watcher.start()
        with temporary_settings(updates={PREFECT_API_URL: prefect_server}):
            summary = run_refresh(root, distributed)
            watcher.join(5)
            run_refresh(root, local)
    assert killed, "no worker was caught holding OCR work"
    assert summary["pages_by_method"] == {"tesseract": 4} and summary["quarantined"] == 0
    assert _served(distributed) == _served(local)


def test_a_file_that_kills_its_worker_is_its_own_item_not_its_batchs(
    prefect_server: str, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#46 item 1: on process workers a letter whose reading segfaults the worker (read in-process: isolation off, as
    `KORPUS_READER_ISOLATION=false` allows; with it on, the reading child dies instead — test_reader_crash.py) fails
    the read task of its whole batch each time Dask tries it. The batch is read again file by
    file: the five good letters are indexed, the culprit alone is `reader-crashed`, and the next refresh leaves it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for n in range(5):
        (root / f"письмо_{n}.txt").write_text(f"Письмо {n} о поставке насосов на склад.\n", encoding="utf-8")
    (root / "убийца.txt").write_text("Письмо, на котором падает процесс.\n", encoding="utf-8")
    monkeypatch.setenv("KORPUS_FAULT_READ", "убийца:segv")  # the workers inherit it; the test process reads nothing
    monkeypatch.setenv("DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES", "1")  # two deaths make a KilledWorker
    with _cluster(prefect_server, tmp_path) as (address, _procs):
        settings = Settings(  # every letter to the workers: none read first in this (the flow's) process
            data=tmp_path / "data",
            meta_documents=False,
            dask_address=address,
            reader_isolation=False,
            first_documents=0,
        )
        with temporary_settings(updates={PREFECT_API_URL: prefect_server}):
            first = run_refresh(root, settings)
            second = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        served = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
        items = {i["source_id"]: i for i in index.quarantine_items("open")}
    assert served == {f"письмо_{n}.txt" for n in range(5)}, (first, items)
    assert set(items) == {"убийца.txt"} and items["убийца.txt"]["reasons"] == ["reader-crashed"], items
    assert "the worker reading it died" in items["убийца.txt"]["detail"]
    assert second["changes"] == {"unchanged": 6} and second["quarantined"] == 0, second

"""Integration fixtures: real models, real Tesseract/ffmpeg/faster-whisper, a real Prefect flow on Dask.

The sample archive is refreshed once per session (and a second time, with every engine call counted); the
tests then read the index it built.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from corpora.sample_archive import write_sample_archive
from korpus.core.model_store import embed_model_path, ensure_models
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import shared_embedder
from tasks.retrieval.retriever import retrieve

SHARED_AUDIO = Path(__file__).resolve().parents[1] / "fixtures" / "audio" / "ru.wav"  # MIT, see SOURCE.md there
LECTURE_ID = "записи/лекция_ru.wav"


def shared_audio() -> Path:
    path = Path(os.environ.get("KORPUS_TEST_AUDIO", SHARED_AUDIO))
    if not path.is_file():
        pytest.fail(f"test recording {path} is missing (tests/fixtures/audio/ru.wav is part of the repository)")
    return path


@pytest.fixture(scope="session")
def models() -> dict[str, Path]:
    return ensure_models(Settings())


@dataclass
class Refreshed:
    root: Path
    settings: Settings
    first: dict[str, Any]
    second: dict[str, Any]
    second_calls: dict[str, int] = field(default_factory=dict)

    def copy_index(self, folder: Path) -> Path:
        """A private data directory holding a copy of the session index (SQLite's online backup), for tests that
        write to it."""
        import apsw

        folder.mkdir(parents=True, exist_ok=True)
        target = apsw.Connection(str(folder / "korpus.db"))
        with target.backup("main", apsw.Connection(str(self.settings.index_path)), "main") as backup:
            backup.step()
        target.close()
        return folder

    def search(self, query: str, scopes: list[str] | None = None, k: int = 5, mode: str = "hybrid") -> list[dict]:
        embedder = shared_embedder(str(embed_model_path(self.settings)))
        vector = embedder.embed_query(query) if mode != "bm25" else None
        with SqliteIndex(self.settings.index_path) as index:
            return retrieve(index.searcher, query, vector, scopes or self.settings.default_scopes, k=k, mode=mode)


def _counting(target: Any, name: str, calls: dict[str, int], key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    original = getattr(target, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[key] = calls.get(key, 0) + 1
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, wrapper)


@pytest.fixture(scope="session")
def refreshed(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Refreshed]:
    import tasks.audio.speech
    import tasks.ocr.tesseract_engine
    import tasks.ocr.vlm_engine
    import tasks.retrieval.embedding
    from flows.corpus_refresh import run_refresh

    base = tmp_path_factory.mktemp("sample")
    root = base / "archive"
    write_sample_archive(root)
    shutil.copy(shared_audio(), root / LECTURE_ID)
    # 30-second speech chunks so the 60-second lecture yields more than one timed chunk.
    os.environ["KORPUS_SPEECH_CHUNK_SECONDS"] = "30"
    settings = Settings(data=base / "data")
    try:
        first = run_refresh(root, settings)
        calls: dict[str, int] = {}
        with pytest.MonkeyPatch.context() as mp:
            _counting(tasks.ocr.tesseract_engine, "ocr_page_words", calls, "ocr", mp)
            _counting(tasks.ocr.vlm_engine, "read_page", calls, "vlm", mp)
            _counting(tasks.audio.asr.WhisperEngine, "transcribe", calls, "asr", mp)
            _counting(tasks.audio.speech, "decode_to_file", calls, "decode", mp)
            _counting(tasks.audio.vad.SileroVad, "segments", calls, "vad", mp)
            _counting(tasks.retrieval.embedding.Embedder, "embed_passages", calls, "embed", mp)
            second = run_refresh(root, settings)
    finally:
        os.environ.pop("KORPUS_SPEECH_CHUNK_SECONDS", None)
    yield Refreshed(root=root, settings=settings, first=first, second=second, second_calls=calls)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="session")
def review_archive(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The review workbench's archive (tests/integration/review_corpus.py), refreshed once: (root, data). Tests
    that decide items work on a copy of the data directory."""
    from flows.corpus_refresh import run_refresh

    from .review_corpus import write_review_archive

    base = tmp_path_factory.mktemp("review-archive")
    root = write_review_archive(base / "archive")
    summary = run_refresh(root, Settings(data=base / "data"))
    assert summary["quarantine_reasons"] == {"empty-text": 2, "text-quality": 4}, summary
    return root, base / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PR_SET_PDEATHSIG = 1


def _ends_with_the_session() -> None:
    """In the child before it runs: SIGTERM when the test process ends, however it ends (a session killed by hand or
    by a CI timeout never reaches the fixture's teardown; the OpenSearch node has its own leash)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real `prefect server start` (SQLite) on a free loopback port, shared by the tests that need one."""
    port = _free_port()
    env = dict(os.environ, PREFECT_HOME=str(tmp_path_factory.mktemp("prefect-server")))
    env.pop("PREFECT_API_URL", None)
    log = open(tmp_path_factory.mktemp("log") / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_ends_with_the_session,
    )
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("prefect server did not become healthy in 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real OpenSearch node (OpenSearch 2.19.1 with k-NN, assembled from Maven Central by `make setup`), started
    once per test session on free loopback ports and stopped at its end (leashed: it ends with the session however
    the session ends). KORPUS_OPENSEARCH_URL runs the same tests against a user's own cluster instead."""
    if os.environ.get("KORPUS_OPENSEARCH_URL"):
        yield os.environ["KORPUS_OPENSEARCH_URL"]
        return
    from tasks.runtime.opensearch_node import start, stop_leashed

    nodes = start(tmp_path_factory.mktemp("opensearch"), nodes=1, port=None, heap_mb=768, detach=False)
    try:
        yield nodes[0].url
    finally:
        stop_leashed()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL from Debian's packages (tasks/runtime/postgres.py), one a test session, in a directory its
    server user reaches; a watchdog ends it with the session however the session ends."""
    import uuid

    from tasks.runtime.postgres import LocalPostgres
    from tasks.runtime.processes import watch_over_me

    watch_over_me()
    server = LocalPostgres(Path(os.environ.get("TMPDIR", "/tmp")) / f"korpus-test-pg-{uuid.uuid4().hex[:8]}")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def catalog_url(postgres_server: Any) -> str:
    """A fresh database on the session's server for one test (dropped by the server's end)."""
    import uuid

    from tasks.runtime.postgres import create_database

    name = f"c{uuid.uuid4().hex[:10]}"
    create_database(postgres_server.port, name)
    return f"postgresql://korpus@127.0.0.1:{postgres_server.port}/{name}"


@pytest.fixture
def os_prefix(opensearch_url: str) -> Iterator[str]:
    """A fresh index prefix on the session's node for one test; its indices and template are deleted after it."""
    import uuid

    from opensearchpy import OpenSearch

    prefix = f"t{uuid.uuid4().hex[:10]}"
    yield prefix
    client = OpenSearch(hosts=[opensearch_url], timeout=60)
    client.indices.delete(index=f"{prefix}-chunks-*", ignore=[404])
    client.indices.delete_index_template(name=f"{prefix}-chunks", ignore=[404])
    client.close()


@pytest.fixture(scope="session")
def real_refreshed(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Settings, dict]:
    """tests/fixtures/real-archive (real third-party files) through one real refresh: (root, settings, summary)."""
    from flows.corpus_refresh import run_refresh

    base = tmp_path_factory.mktemp("real")
    root = base / "archive"
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive"
    shutil.copytree(fixture, root, ignore=shutil.ignore_patterns("LICENSE", "README.md"))
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    settings = Settings(data=base / "data")
    return root, settings, run_refresh(root, settings)


@contextmanager
def served_app(app: Any) -> Iterator[str]:
    """`app` (korpus serve's FastAPI app) run by uvicorn on a free loopback port in a thread; yields its base URL."""
    import threading

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's chromium, headless, driven by selenium through Debian's chromedriver (never looked for online)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "make system installs Debian's chromium and chromium-driver"
    os.environ["SE_OFFLINE"] = "true"  # selenium never looks for a driver online: the driver is given
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--lang=ru",
        "--autoplay-policy=no-user-gesture-required",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()

"""Version switches in the embedded index: atomic for readers, safe against crashes, repaired by reconcile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind
from tasks.contract.chunking import page_chunks
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.unit
DIMS = 8


def _version(source_id: str, version: str, pages: int) -> tuple[Source, list, np.ndarray]:
    source = Source(
        source_id=source_id,
        version=version,
        path="/x",
        kind=SourceKind.text,
        owner="o",
        access="public",
        tenant="default",
    )
    results = [
        PageResult(
            source_id=source_id,
            source_version=version,
            page=i + 1,
            text=f"договор редакция {version} стр. {i}",
            method="plain-text",
        )
        for i in range(pages)
    ]
    chunks, _ = page_chunks(source, results)
    vectors = np.ones((len(chunks), DIMS), dtype=np.float32)
    return source, chunks, vectors


def _current_versions(index: SqliteIndex, source_id: str) -> set[str]:
    rows = index.conn.execute(
        "SELECT DISTINCT source_version FROM chunks WHERE source_id = ? AND lifecycle = 'current'", (source_id,)
    )
    return {r[0] for r in rows}


def test_readers_see_old_or_new_never_both_or_neither(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    writer = SqliteIndex(db)
    writer.publish_version(*_version("a.txt", "v0", 200), pages=200)
    seen: list[set[str]] = []
    stop = threading.Event()

    def read() -> None:
        reader = SqliteIndex(db)
        while not stop.is_set():
            seen.append(_current_versions(reader, "a.txt"))
            hits = retrieve(reader.searcher, "договор редакция", np.ones(DIMS, dtype=np.float32), ["public"], k=50)
            seen.append({h["source_version"] for h in hits})
        reader.close()

    thread = threading.Thread(target=read)
    thread.start()
    for n in range(1, 6):
        writer.publish_version(*_version("a.txt", f"v{n}", 200), pages=200)
    stop.set()
    thread.join()
    writer.close()
    assert len(seen) > 10
    assert all(len(versions) == 1 for versions in seen), [v for v in seen if len(v) != 1][:3]


def test_a_crash_inside_the_switch_leaves_the_old_version_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SqliteIndex(tmp_path / "k.db")
    index.publish_version(*_version("a.txt", "v1", 3), pages=3)

    def explode(*_args: object, **_kwargs: object) -> None:
        raise OSError("disk full (injected)")

    monkeypatch.setattr(index, "_add_chunk", explode)
    with pytest.raises(OSError, match="injected"):
        index.publish_version(*_version("a.txt", "v2", 3), pages=3)
    monkeypatch.undo()
    assert _current_versions(index, "a.txt") == {"v1"}
    assert index.indexed_versions() == {"a.txt": {"v1": ("o", "public", "default")}}
    assert index.reconcile() == 0
    index.publish_version(*_version("a.txt", "v2", 3), pages=3)  # the next refresh completes the switch
    assert _current_versions(index, "a.txt") == {"v2"}


KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.unit.test_lifecycle import _version
from tasks.index.sqlite import SqliteIndex
index = SqliteIndex(Path({db!r}))
add = index._add_chunk
def slow_add(chunk, ordinal, *args, **kwargs):
    add(chunk, ordinal, *args, **kwargs)
    if ordinal == 50:  # old version already superseded, half the new one written: the worst moment
        print("inside", flush=True)
        time.sleep(60)
index._add_chunk = slow_add
index.publish_version(*_version("a.txt", "v2", 100), pages=100)
print("done", flush=True)
"""


def test_kill_9_mid_switch_leaves_a_consistent_index(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    index = SqliteIndex(db)
    index.publish_version(*_version("a.txt", "v1", 5), pages=5)
    index.close()
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT.format(root=root, db=str(db))], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "inside"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    index = SqliteIndex(db)
    assert index.reconcile() == 0
    assert _current_versions(index, "a.txt") == {"v1"}
    assert index.indexed_versions() == {"a.txt": {"v1": ("o", "public", "default")}}


def test_reconcile_repairs_two_current_versions(tmp_path: Path) -> None:
    # A state the embedded backend cannot reach (its switch is one transaction) but a non-transactional backend
    # can after a crash: the old version was never superseded.
    index = SqliteIndex(tmp_path / "k.db")
    index.publish_version(*_version("a.txt", "v1", 2), pages=2)
    index.publish_version(*_version("a.txt", "v2", 2), pages=2)
    with index.conn:
        index.conn.execute("UPDATE sources SET lifecycle = 'current', switched_at = '2000-01-01' WHERE version = 'v1'")
        index.conn.execute("UPDATE chunks SET lifecycle = 'current' WHERE source_version = 'v1'")
    assert _current_versions(index, "a.txt") == {"v1", "v2"}
    assert index.reconcile() > 0
    assert _current_versions(index, "a.txt") == {"v2"}
    assert index.reconcile() == 0

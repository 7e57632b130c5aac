"""#47 item 2: `korpus refresh` on an unchanged tree answers without a Prefect flow run once a full refresh found
nothing to do (tasks/unchanged.py) — and runs the flow again whenever anything it depended on changed: a file, the
manifest, the settings, the catalog (a reviewer's decision), the retention clock. After every quick answer the plan
a flow would make from the same files and catalog is computed and is empty."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from korpus.apps.cli import app
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.receive import SETTLED_NS, discover_sources, plan_refresh
from tasks.unchanged import RECORD_NAME

pytestmark = pytest.mark.integration
LETTERS = {f"письмо_{n}.txt": f"Письмо номер {n} о поставке угля на склад {n * 7}." for n in range(4)}


def _refresh(runner: CliRunner, root: Path, data: Path, *extra: str) -> dict:
    done = runner.invoke(app, ["refresh", "--root", str(root), "--data", str(data), "--json", *extra])
    assert done.exit_code == 0, done.output
    return json.loads(done.output[done.output.index("{") : done.output.rindex("}") + 1])


def _plan_is_empty(root: Path, data: Path) -> bool:
    """What the flow would plan now from the same catalog and files (flows/corpus_refresh.py's first steps)."""
    with SqliteIndex(Settings(data=data).index_path) as index:
        indexed, refused = index.indexed_versions(), index.refused_versions()
        readings = index.file_readings()
    plan = plan_refresh(discover_sources(root, Settings(data=data), readings), indexed, refused)
    return not (plan.to_process or plan.removed or plan.relabel)


def test_an_unchanged_tree_is_answered_without_a_flow_until_something_changes(
    models: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    for name, text in LETTERS.items():
        (root / name).write_text(text, encoding="utf-8")
    (root / "пустой.txt").write_bytes(b"")  # refused every time: quarantined with a reason, still quick
    time.sleep(SETTLED_NS / 1e9)  # readings of files written in the last 2 s are not trusted
    monkeypatch.setenv("KORPUS_META_DOCUMENTS", "false")
    runner = CliRunner()

    first = _refresh(runner, root, data)
    assert first["chunks_indexed"] > 0 and "quick" not in first
    assert not (data / RECORD_NAME).exists()  # it did work: nothing to replay
    again = _refresh(runner, root, data)
    assert "quick" not in again and again["changes"] == {"unchanged": 5} and (data / RECORD_NAME).exists()
    quick = _refresh(runner, root, data)
    assert quick["quick"] is True and quick["flow_run_id"] is None and quick["changes"] == {"unchanged": 5}
    assert quick["quarantined"] == again["quarantined"] == 1
    assert _plan_is_empty(root, data)
    status = runner.invoke(app, ["status", "--data", str(data), "--json"])
    assert json.loads(status.output)["last_refresh"].get("quick") is True  # recorded like any refresh

    def flow_ran(summary: dict) -> bool:
        return "quick" not in summary and summary["flow_run_id"] is not None

    # a file edited: the flow reads it; its reading, taken within 2 s of the edit, is not trusted, so the next
    # flow hashes it again and keeps the reading; the one after finds nothing and records; then quick again
    (root / "письмо_1.txt").write_text("Письмо номер 1 отозвано.", encoding="utf-8")
    edited = _refresh(runner, root, data)
    assert flow_ran(edited) and edited["changes"].get("changed") == 1
    time.sleep(SETTLED_NS / 1e9)
    assert _refresh(runner, root, data)["files_hashed"] == 1
    assert flow_ran(_refresh(runner, root, data))
    assert _refresh(runner, root, data).get("quick") and _plan_is_empty(root, data)

    # the manifest relabels a folder of nothing but the same files: the flow applies it
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: hr\n", encoding="utf-8")
    relabelled = _refresh(runner, root, data)
    assert flow_ran(relabelled) and relabelled["relabelled"] >= 4

    # another setting: the flow runs (a policy or limit changes what a refresh does)
    _refresh(runner, root, data)
    assert _refresh(runner, root, data).get("quick")
    monkeypatch.setenv("KORPUS_GC_AFTER_REFRESH", "false")
    assert flow_ran(_refresh(runner, root, data))
    monkeypatch.delenv("KORPUS_GC_AFTER_REFRESH")

    # any write to the catalog since (here a reviewer's decision on the empty file's item): the flow runs
    _refresh(runner, root, data)
    assert _refresh(runner, root, data).get("quick")
    with SqliteIndex(Settings(data=data).index_path) as index:
        item = index.quarantine_items()[0]
    decided = runner.invoke(app, ["review", "reject", item["item_id"], "--data", str(data), "--reviewer", "тест"])
    assert decided.exit_code == 0, decided.output
    assert flow_ran(_refresh(runner, root, data))

    # --verify always reads: never quick
    _refresh(runner, root, data)
    verified = _refresh(runner, root, data, "--verify")
    assert flow_ran(verified) and verified["files_hashed"] >= 4

    # KORPUS_QUICK_UNCHANGED=false: every refresh a flow run
    monkeypatch.setenv("KORPUS_QUICK_UNCHANGED", "false")
    _refresh(runner, root, data)
    assert flow_ran(_refresh(runner, root, data)) and not (data / RECORD_NAME).exists()


def test_the_retention_clock_ends_the_replay(models: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A superseded version waits out KORPUS_RETENTION_DAYS: when it is due, the refresh's garbage collection has
    work, so the flow runs and removes it."""
    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "письмо.txt").write_text("Первая редакция письма о поставке.", encoding="utf-8")
    monkeypatch.setenv("KORPUS_META_DOCUMENTS", "false")
    monkeypatch.setenv("KORPUS_RETENTION_DAYS", str(8 / 86400))  # eight seconds
    runner = CliRunner()
    _refresh(runner, root, data)
    (root / "письмо.txt").write_text("Вторая редакция письма о поставке угля.", encoding="utf-8")
    time.sleep(SETTLED_NS / 1e9)
    _refresh(runner, root, data)  # the first version superseded: it waits out its eight seconds
    _refresh(runner, root, data)
    assert _refresh(runner, root, data).get("quick")
    time.sleep(8)
    collected = _refresh(runner, root, data)
    assert "quick" not in collected and collected["garbage_collected"]["versions"] == 1


GARBAGE = "M]heh\\guc dh^_dk Cl>opMa no KHA M]heh\\guc dh^_dk Cl>opMa no KHA M]heh\\guc dh^_dk Cl>opMa no KHA."


class _Later:
    """The clock `days` ahead, for the modules that read it to decide retention (tasks/unchanged.py, retention.py)."""

    def __init__(self, days: float) -> None:
        import datetime as real

        self.offset = days * 86400
        offset = real.timedelta(days=days)

        class Ahead(real.datetime):
            @classmethod
            def now(cls, tz: real.tzinfo | None = None) -> real.datetime:  # type: ignore[override]
                return real.datetime.now(tz) + offset

        self.datetime = Ahead

    def time(self) -> float:
        return time.time() + self.offset

    def perf_counter(self) -> float:
        return time.perf_counter()


def test_a_stale_refusal_is_scrubbed_by_the_refresh_that_is_due_quick_path_or_not(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#61 item 6: a refusal of a version never indexed, of a file since seen at another version, is resolved and its
    text scrubbed by the first refresh after `KORPUS_RETENTION_DAYS` — also when the tree is unchanged (the quick
    path must not answer past that time) — without `korpus gc`. Before, a refresh's gc returned early when no
    version had expired, and the quick path's clock knew only versions. (The refused bytes here are not text, so the
    item's evidence is written into it, as a page refusal's reading would be.)"""
    import tasks.index.retention
    import tasks.unchanged

    monkeypatch.setenv("KORPUS_RETENTION_DAYS", "1")
    monkeypatch.setenv("KORPUS_META_DOCUMENTS", "false")  # no superseded meta-documents: no version ever expires
    root, data, runner = tmp_path / "archive", tmp_path / "data", CliRunner()
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "письмо.txt").write_text("Письмо о поставке угля на склад.", encoding="utf-8")
    (root / "двоичный.txt").write_bytes(b"\x00\xff\xfe\x01" * 300)  # refused as a whole: never indexed
    _refresh(runner, root, data)
    with SqliteIndex(Settings(data=data).index_path) as index:
        stale = {i["item_id"] for i in index.quarantine_items("open") if i["source_id"] == "двоичный.txt"}
        assert stale
        index.conn.execute(
            f"UPDATE quarantine SET evidence = 'Характеристика Кривошеина' WHERE item_id IN "
            f"({','.join('?' * len(stale))})",
            sorted(stale),
        )
    time.sleep(1.1)  # a later second: the next version's refusal is seen after this one
    (root / "двоичный.txt").write_bytes(b"\x00\xff\xfe\x01" * 301)
    time.sleep(SETTLED_NS / 1e9)
    _refresh(runner, root, data)
    _refresh(runner, root, data)  # nothing changed: recorded for the quick path
    assert _refresh(runner, root, data).get("quick"), "the quick path should answer an unchanged tree"
    with SqliteIndex(Settings(data=data).index_path) as index:
        assert all(index.quarantine_item(i)["status"] == "open" for i in stale)

    later = _Later(days=2)
    monkeypatch.setattr(tasks.unchanged, "time", later)
    monkeypatch.setattr(tasks.index.retention, "datetime", later.datetime)
    summary = _refresh(runner, root, data)
    assert not summary.get("quick"), "past the retention time the quick path must let the flow collect"
    assert summary["garbage_collected"]["versions"] == 0  # the refusal alone was due
    with SqliteIndex(Settings(data=data).index_path) as index:
        for item_id in stale:
            item = index.quarantine_item(item_id)
            assert item is not None and item["status"] == "resolved", item
            assert item["decisions"][-1]["action"] == "expired" and not item["evidence"], item
        newer = [i for i in index.quarantine_items("open") if i["source_id"] == "двоичный.txt"]
    assert newer and not {i["item_id"] for i in newer} & stale  # the present version's refusal stays open

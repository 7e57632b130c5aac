"""Quarantine → review → index, lifecycle across refreshes, and the Prefect UI review flow on a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.corpus_refresh import run_refresh
from korpus.apps.cli import app
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.meta.publish import META_PREFIX

pytestmark = pytest.mark.integration
runner = CliRunner()
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\nrules:\n  - match: 'ничьё/**'\n    owner: ''\n"
GOOD = "Протокол заседания комиссии по списанию имущества от 5 мая 2022 года."
GARBAGE = "npoTOKon Necepa MocKBa OTPH 1031851041431 cocTaB KoMnccnn BbInoJIHeHo"


@pytest.fixture(scope="module")
def corpus(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Settings]:
    root = tmp_path_factory.mktemp("review") / "archive"
    (root / "ничьё").mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    (root / "протокол.txt").write_text(GOOD, encoding="utf-8")
    (root / "старый_слой.txt").write_text(GARBAGE, encoding="utf-8")
    (root / "ничьё" / "записка.txt").write_text("Служебная записка без владельца.", encoding="utf-8")
    settings = Settings(data=root.parent / "data")
    summary = run_refresh(root, settings)
    assert summary["quarantine_reasons"] == {"text-quality": 1, "missing-metadata": 1}, summary
    return root, settings


def _cli(settings: Settings, *args: str) -> str:
    result = runner.invoke(app, [*args, "--data", str(settings.data)])
    assert result.exit_code == 0, result.output
    return result.stdout


def _item(settings: Settings, source_id: str) -> str:
    with SqliteIndex(settings.index_path) as index:
        return next(i["item_id"] for i in index.quarantine_items() if i["source_id"] == source_id)


def _search(settings: Settings, query: str, mode: str = "bm25") -> list[dict]:
    """Hits from the files (the collection's meta-documents, which list them, are left out here)."""
    hits = json.loads(_cli(settings, "search", query, "--json", "--mode", mode))
    return [h for h in hits if not h["source_id"].startswith(META_PREFIX)]


def test_gate_refusal_is_queued_not_indexed(corpus: tuple[Path, Settings]) -> None:
    _root, settings = corpus
    listing = _cli(settings, "review", "list")
    assert "старый_слой.txt" in listing and "text-quality" in listing
    assert _search(settings, "npoTOKon Necepa") == []
    shown = _cli(settings, "review", "show", _item(settings, "старый_слой.txt"))
    assert "npoTOKon" in shown and "case flips" in shown


def test_release_indexes_as_exception_and_reject_withdraws(corpus: tuple[Path, Settings]) -> None:
    _root, settings = corpus
    item = _item(settings, "старый_слой.txt")
    out = _cli(settings, "review", "release", item, "--note", "old layer, only copy", "--reviewer", "Петрова")
    assert "approved exception" in out
    hits = _search(settings, "npoTOKon Necepa")
    assert [h["source_id"] for h in hits] == ["старый_слой.txt"] and hits[0]["exception"] is True
    _cli(settings, "review", "reject", item, "--note", "changed my mind", "--reviewer", "Иванов")
    assert _search(settings, "npoTOKon Necepa") == []
    shown = _cli(settings, "review", "show", item)
    assert "Петрова: release" in shown and "Иванов: reject" in shown


def test_release_cannot_invent_owner_or_access(corpus: tuple[Path, Settings]) -> None:
    _root, settings = corpus
    result = runner.invoke(
        app,
        ["review", "release", _item(settings, "ничьё/записка.txt"), "--reviewer", "x", "--data", str(settings.data)],
    )
    assert result.exit_code == 2 and "fix the manifest" in result.output


def test_release_refuses_a_chunk_cut_by_a_retired_policy(corpus: tuple[Path, Settings]) -> None:
    # a quarantine queue outlives releases: an item kept from a korpus whose policy "structure-v0" is gone
    _root, settings = corpus
    with SqliteIndex(settings.index_path) as index:
        row = index.quarantine_item(_item(settings, "старый_слой.txt"))
        assert row is not None and row["chunk"] is not None
        old = row["chunk"].model_copy(update={"policy_version": "structure-v0", "chunk_id": "old-release-chunk"})
        with index.conn:
            index.conn.execute(
                "INSERT INTO quarantine (item_id, source_id, source_version, chunk_id, reasons, chunk, first_seen, "
                "last_seen) VALUES ('old-release-item', ?, ?, ?, '[\"text-quality\"]', ?, '2025-01-01', '2025-01-01')",
                (old.source_id, old.source_version, old.chunk_id, old.model_dump_json()),
            )
    try:
        result = runner.invoke(
            app, ["review", "release", "old-release-item", "--reviewer", "x", "--data", str(settings.data)]
        )
        assert result.exit_code == 2 and "policy-not-approved" in result.output
        assert all(h["chunk_id"] != "old-release-chunk" for h in _search(settings, "npoTOKon Necepa"))
    finally:
        with SqliteIndex(settings.index_path) as index, index.conn:
            index.conn.execute("DELETE FROM quarantine WHERE item_id = 'old-release-item'")


def test_changed_source_served_only_in_new_version_and_removed_disappears(corpus: tuple[Path, Settings]) -> None:
    root, settings = corpus
    before = _search(settings, "списанию имущества")
    assert len(before) == 1
    (root / "протокол.txt").write_text(GOOD.replace("5 мая", "7 мая"), encoding="utf-8")
    summary = run_refresh(root, settings)
    assert summary["changes"]["changed"] == 1 and summary["chunks_embedded"] == 1
    after = _search(settings, "списанию имущества", mode="hybrid")
    versions = {h["source_version"] for h in after if h["source_id"] == "протокол.txt"}
    assert len(versions) == 1 and versions != {before[0]["source_version"]}
    assert "7 мая" in after[0]["text"]
    (root / "протокол.txt").unlink()
    summary = run_refresh(root, settings)
    assert summary["changes"]["removed"] == 1
    remaining = _search(settings, "списанию имущества", mode="hybrid")
    assert all(h["source_id"] != "протокол.txt" for h in remaining)


def _paused_run(client, flow_run_id_file: Path):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if flow_run_id_file.exists():
            run = client.read_flow_run(flow_run_id_file.read_text().strip())
            if run.state and run.state.is_paused():
                return run
        time.sleep(0.5)
    pytest.fail("the review flow did not pause")


REVIEW_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from prefect import runtime
from flows import quarantine_review as q
orig = q.summarise.fn
def load(item_ids, settings):
    open({id_file!r}, "w").write(str(runtime.flow_run.id))
    return orig(item_ids, settings)
q.summarise.fn = load
print(q.quarantine_review(item_id={item!r}, data={data!r}, timeout_s=300))
"""


def test_review_flow_in_the_prefect_ui_form(corpus: tuple[Path, Settings], prefect_server: str, tmp_path: Path) -> None:
    """The decision is made under a reviewer key (its name in the audit trail, its scopes applied; a key of other
    scopes is refused and a name is not a key), the typed key is deleted from Prefect's run inputs, and nothing the
    flow leaves in Prefect — artifacts, the form's description — carries the item's text."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    _root, settings = corpus
    item = _item(settings, "старый_слой.txt")
    id_file = tmp_path / "flow_run_id"
    script = REVIEW_SCRIPT.format(
        root=str(Path(__file__).resolve().parents[2]), id_file=str(id_file), item=item, data=str(settings.data)
    )
    keys = {"k-petrova": {"name": "Петрова", "scopes": ["public"]}, "k-hr": {"name": "Кадры", "scopes": ["hr"]}}
    env = dict(os.environ, PREFECT_API_URL=prefect_server, KORPUS_REVIEW_KEYS=json.dumps(keys))

    def decide(run_input: dict) -> tuple[subprocess.Popen, object]:
        id_file.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        with temporary_settings(updates={PREFECT_API_URL: prefect_server}), get_client(sync_client=True) as client:
            run = _paused_run(client, id_file)
            bad = client.resume_flow_run(run.id, run_input={"action": "delete", "reviewer_key": "k-petrova"})
            assert bad.status.value == "REJECT", bad
            assert client.read_flow_run(run.id).state.is_paused()
            good = client.resume_flow_run(run.id, run_input=run_input)
            assert good.status.value == "ACCEPT", good
        return proc, run

    proc, _run = decide({"action": "release", "reviewer_key": "k-hr", "note": "не моё"})
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "refused: no quarantine item" in out  # an hr key cannot see a public item
    proc, run = decide({"action": "release", "reviewer_key": "k-petrova", "note": "из UI"})
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "'action': 'release'" in out and "approved exception" in out and "'reviewer': 'Петрова'" in out
    with temporary_settings(updates={PREFECT_API_URL: prefect_server}), get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
        )
        stored = json.dumps([a.data for a in artifacts], ensure_ascii=False)
        assert artifacts and item in stored and "text-quality" in stored
        assert "npoTOKon" not in stored and "старый_слой" not in stored
        from prefect.input.actions import read_flow_run_input

        assert read_flow_run_input("paused-decision-response", flow_run_id=run.id) is None  # the key, deleted
    shown = _cli(settings, "review", "show", item)
    assert "Петрова: release — из UI" in shown
    hits = _search(settings, "npoTOKon Necepa")
    assert hits and hits[0]["exception"] is True

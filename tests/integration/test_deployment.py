"""deployments/prefect.yaml on a real Prefect server: deployed with `prefect deploy`, the nightly refresh triggered
and run by a real process worker (`prefect worker start`), its state, artifacts and events read back from the server,
and the automation of deployments/automations.yaml delivering its notification (a webhook block pointing at a
loopback receiver) when the refresh quarantines something."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\n"


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict]]]:
    """A loopback HTTP receiver: the URL, and the JSON bodies posted to it."""
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            received.append(json.loads(body or b"{}"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()


def _prefect(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "prefect", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _notification_block(api: str, url: str) -> str:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}):
        block = CustomWebhookNotificationBlock(
            name="korpus-test", url=url, json_data={"subject": "{{subject}}", "body": "{{body}}"}
        )
        block.save("korpus-notify", overwrite=True)
        return str(block._block_document_id)


def test_nightly_deployment_runs_on_a_process_worker(
    prefect_server: str, models: dict[str, Path], tmp_path: Path, webhook: tuple[str, list[dict]]
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    hook_url, received = webhook
    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    (root / "протокол.txt").write_text("Протокол заседания комиссии по списанию имущества от 5 мая 2022 года.")
    (root / "старый_слой.txt").write_text("npoTOKon Necepa MocKBa OTPH 1031851041431 cocTaB KoMnccnn BbInoJIHeHo")
    env = dict(
        os.environ,
        PREFECT_API_URL=prefect_server,
        KORPUS_REPO=str(REPO),
        KORPUS_SOURCE_ROOT=str(root),
        KORPUS_DATA=str(data),
        KORPUS_REVIEW_URL="http://127.0.0.1:8765/review",
    )

    automation = yaml.safe_load((REPO / "deployments" / "automations.yaml").read_text(encoding="utf-8"))
    block_id = _notification_block(prefect_server, hook_url)
    automation["automations"][0]["actions"][0]["block_document_id"] = block_id
    _prefect(env, "automation", "create", "--from-json", json.dumps(automation["automations"][0]))

    _prefect(env, "work-pool", "create", "korpus", "--type", "process")
    _prefect(env, "--no-prompt", "deploy", "--prefect-file", "deployments/prefect.yaml", "--all")
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "korpus"],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with temporary_settings(updates={PREFECT_API_URL: prefect_server}), get_client(sync_client=True) as client:
            nightly = client.read_deployment_by_name("corpus_refresh/nightly")
            assert nightly.global_concurrency_limit.limit == 1 and nightly.schedules[0].schedule.cron == "0 2 * * *"
            assert nightly.concurrency_options.collision_strategy == "ENQUEUE"
            assert nightly.parameters == {"root": str(root), "data": str(data)}
            verify = client.read_deployment_by_name("corpus_refresh/verify")  # weekly: every file hashed
            assert verify.parameters == {"root": str(root), "data": str(data), "overrides": {"verify": True}}
            assert verify.schedules[0].schedule.cron == "0 3 * * 0"
            for name in ("quarantine_review/review", "reindex/reindex"):
                assert client.read_deployment_by_name(name).parameters["data"] == str(data)
            run = client.create_flow_run_from_deployment(nightly.id)
            deadline = time.monotonic() + 300
            while not (state := client.read_flow_run(run.id).state).is_final():
                assert time.monotonic() < deadline, f"the flow run did not finish: {state}"
                time.sleep(2)
            assert state.is_completed(), f"{state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
            artifacts = {a.key: a for a in client.read_artifacts() if a.flow_run_id == run.id and a.key}
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a loaded machine: the worker is still finishing its shutdown
            worker.kill()
            worker.wait(timeout=30)
        log.close()
    summary = artifacts["corpus-refresh-summary"].data
    assert "[открыть очередь](http://127.0.0.1:8765/review?status=open)" in summary
    assert "corpus-refresh" in artifacts  # the progress milestone

    events = _events(prefect_server, str(run.id))
    names = sorted(e["event"] for e in events)
    # both files are published (the garbled one with its only chunk in the quarantine); one quarantined
    assert names == ["korpus.refresh.completed", "korpus.source.quarantined", "korpus.sources.indexed"], names
    group = next(e for e in events if e["event"] == "korpus.sources.indexed")  # one event for the published group
    indexed = {s["source"]: s["chunks"] for s in group["payload"]["sources"]}
    assert indexed == {"протокол.txt": 1, "старый_слой.txt": 0} and group["payload"]["chunks"] == 1
    related = {r["prefect.resource.id"] for r in group["related"] if r.get("prefect.resource.role") == "source"}
    assert related == {"korpus.source.протокол.txt", "korpus.source.старый_слой.txt"}
    done = next(e for e in events if e["event"] == "korpus.refresh.completed")["payload"]
    assert done["quarantined"] == 1 and done["quarantine_open"] == 1 and done["chunks_indexed"] == 1
    quarantined = next(e for e in events if e["event"] == "korpus.source.quarantined")
    assert quarantined["resource"]["prefect.resource.name"] == "старый_слой.txt"
    assert quarantined["payload"]["reasons"] == {"text-quality": 1}
    assert "npoTOKon" not in json.dumps(events, ensure_ascii=False)  # events carry no document text

    deadline = time.monotonic() + 90
    while not received and time.monotonic() < deadline:
        time.sleep(1)
    assert received, "the automation's notification did not arrive"
    assert "старый_слой.txt: 1 в карантине" in received[0]["body"] and "карантин" in received[0]["subject"]


def _events(api: str, flow_run_id: str) -> list[dict]:
    """The korpus events related to a flow run (the server persists events a moment after they arrive)."""
    deadline = time.monotonic() + 60
    while True:
        wanted = {"event": {"prefix": ["korpus."]}, "related": {"id": [f"prefect.flow-run.{flow_run_id}"]}}
        page = httpx.post(f"{api}/events/filter", json={"filter": wanted, "limit": 50}, timeout=10)
        page.raise_for_status()
        events = page.json()["events"]
        if any(e["event"] == "korpus.refresh.completed" for e in events) or time.monotonic() > deadline:
            return events
        time.sleep(1)

"""Any OpenSearch node lost, node-1 included (#64 item 1), as a hypothesis state machine on a real three-node
cluster: between kills and restarts of any node, the catalog changes (new versions, relabels to `hr`) and is mirrored
— or left pending while the cluster cannot take it — and `/search` is asked. Every answer is a 200 whose hits are
current and in the caller's scope, or a 503 with a clear body; never a 500. After recovery (every node back, one
sync) the cluster serves exactly the catalog's current chunks. The cluster runs as the topology's does, behind
OpenSearch's security plugin (https verified against its CA, one user with a password): the retries across nodes are
the ones a secured production cluster gets. Runs in `make test-topology`."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
import uuid
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from korpus.core.model_store import ensure_models
from korpus.core.settings import Settings
from tasks.index.opensearch import mirror_or_pending, opensearch_index
from tasks.index.sqlite import SqliteIndex
from tasks.runtime import opensearch_node
from tasks.runtime.tls import loopback_credentials
from tests.unit.test_index_sqlite import DIMS, _publish

pytestmark = pytest.mark.topology
NODES = ("node-1", "node-2", "node-3")
HEAP_MB = 512


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], opensearch_node.Secured]:
    ensure_models(Settings())
    home = tmp_path_factory.mktemp("three-nodes")
    tls = loopback_credentials(home / "tls")
    secured = opensearch_node.Secured(tls.ca, tls.cert, tls.key, "korpus", secrets.token_urlsafe(24))
    started = opensearch_node.start(home, nodes=3, port=None, heap_mb=HEAP_MB, detach=True, secured=secured)
    try:
        yield home, [node.url for node in started], secured
    finally:
        pids = [node["pid"] for node in opensearch_node.recorded(home)]
        opensearch_node.stop(home)
        assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def _text(n: int, version: int) -> list[str]:
    return [f"Письмо {n} о поставке насосов на склад, редакция {version}.", f"Приложение к письму {n}: опись."]


def test_any_node_lost_every_answer_is_in_scope_or_a_clear_503(
    cluster: tuple[Path, list[str], opensearch_node.Secured], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from fastapi.testclient import TestClient

    from korpus.apps.api import create_app

    home, urls, secured = cluster
    assert all(url.startswith("https://") for url in urls)
    seen: dict[str, list] = {"lost": [], "answers while a node was down": []}

    class NodeLoss(RuleBasedStateMachine):
        examples = 0

        def __init__(self) -> None:
            super().__init__()
            self.settings = Settings(
                data=tmp_path_factory.mktemp("catalog") / "data",
                backend="opensearch",
                opensearch_url=",".join(urls),
                opensearch_user=secured.user,
                opensearch_password=secured.password,
                opensearch_ca=secured.ca,
                opensearch_prefix=f"loss{uuid.uuid4().hex[:8]}",
                retry_backoff=0.05,
                retry_attempts=2,
                meta_documents=False,
            )
            self.catalog = SqliteIndex(self.settings.index_path)
            self.catalog.bind_embedding("m", DIMS)
            self.versions = dict.fromkeys(range(4), 1)
            for n in self.versions:
                _publish(self.catalog, f"письмо_{n}.txt", "v1", _text(n, 1), "public", axis=n)
            assert not mirror_or_pending(self.settings, self.catalog, None).get("pending")
            self.api = TestClient(create_app(self.settings))
            self.down: str | None = None

        @initialize()
        def lose_one(self) -> None:
            """Each example starts by losing a node, node-1 first, then node-2 and node-3: every node is lost."""
            self.kill(NODES[NodeLoss.examples % len(NODES)])
            NodeLoss.examples += 1
            self.search()  # asked at once, before the cluster has seen the node go

        @precondition(lambda self: self.down is None)
        @rule(node=st.sampled_from(NODES))
        def kill(self, node: str) -> None:
            record = next(n for n in opensearch_node.recorded(home) if n["name"] == node)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(record["pid"], signal.SIGKILL)
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(record["pid"]).wait(30)
            self.down = node
            seen["lost"].append(node)

        @precondition(lambda self: self.down is not None)
        @rule()
        def restart(self) -> None:
            opensearch_node.restart_node(home, self.down, heap_mb=HEAP_MB, secured=secured)
            self.down = None

        @rule(n=st.integers(0, 3), access=st.sampled_from(["public", "public", "hr"]))
        def new_version(self, n: int, access: str) -> None:
            """A refresh's publish and its sync: pending while the cluster cannot take it, never an error."""
            self.versions[n] += 1
            version = self.versions[n]
            _publish(self.catalog, f"письмо_{n}.txt", f"v{version}", _text(n, version), access, axis=n)
            report = mirror_or_pending(self.settings, self.catalog, None)
            assert "indexed" in report or report.get("pending"), report

        @rule()
        def search(self) -> None:
            answer = self.api.get("/search", params={"q": "поставка насосов", "mode": "bm25", "k": 20})
            if self.down is not None:
                seen["answers while a node was down"].append(answer.status_code)
            if answer.status_code == 200:
                current = {
                    chunk_id
                    for (chunk_id,) in self.catalog.conn.execute(
                        "SELECT chunk_id FROM chunks WHERE lifecycle = 'current' AND access = 'public'"
                    )
                }
                hits = answer.json()
                assert all(h["access"] == "public" and h["lifecycle"] == "current" for h in hits), hits
                assert {h["chunk_id"] for h in hits} <= current, hits
            else:
                assert answer.status_code == 503 and answer.json()["detail"], answer.text

        def teardown(self) -> None:
            try:
                if self.down is not None:
                    opensearch_node.restart_node(home, self.down, heap_mb=HEAP_MB, secured=secured)
                deadline = time.monotonic() + 120
                while (opensearch_node.health(urls[0], secured=secured) or {}).get("status") not in ("green", "yellow"):
                    assert time.monotonic() < deadline, "the cluster did not recover"
                    time.sleep(1)
                report = mirror_or_pending(self.settings, self.catalog, None)
                while report.get("pending"):  # shards still recovering: the next sync completes it
                    assert time.monotonic() < deadline, report
                    time.sleep(2)
                    report = mirror_or_pending(self.settings, self.catalog, None)
                served = opensearch_index(self.settings).states()
                want = {c: tuple(s) for c, s in self.catalog.chunk_states().items()}
                assert {c for c, s in served.items() if s[0] == "current"} == {
                    c for c, s in want.items() if s[0] == "current"
                }
                assert served == want  # labels and lifecycles too
            finally:
                self.catalog.close()
                client = opensearch_index(self.settings).client
                client.indices.delete(index=f"{self.settings.opensearch_prefix}-chunks-*", ignore=[404])

    run_state_machine_as_test(
        NodeLoss,
        settings=hypothesis_settings(
            max_examples=3,
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print("\nnode loss machine:", seen)
    assert set(seen["lost"]) == set(NODES), seen  # node-1 among them
    assert seen["answers while a node was down"], seen

"""First-searchable on the production topology (issue #63, acceptance): during a default refresh of 1,000 letters,
how soon does a search through a `korpus serve` replica find the first documents — as a share of the refresh's
length — and does every replica's `/health` stay 200 throughout?

The topology is the one `korpus topology up` runs (tasks/runtime/topology.py): PostgreSQL (Prefect's database and
the catalog's serving part), a Prefect server and process worker with deployments/prefect.yaml, a Dask scheduler and
two workers, three OpenSearch nodes, two serve replicas. The archive is benchmarks/scale.py's generated letters
(one-paragraph .txt, every tenth a one-page born-digital PDF; labelled as generated). The refresh is the `nightly`
deployment run now, with its defaults. While it runs, one thread searches serve-1 for «письмо» (every letter holds
it) every 0.5 s and another asks both replicas' `/health` every second. First-searchable is measured where a user
sees it: the first search through the replica that returns a letter — served from the cluster and checked against
the catalog on PostgreSQL — minus the flow run's start; the refresh's length is the flow run's start to its end, as
Prefect records them.

    .venv/bin/python benchmarks/topology_first_searchable.py              # 1,000 letters
    .venv/bin/python benchmarks/topology_first_searchable.py --files 200  # a quicker look
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.scale import write_archive
from korpus.core.model_store import ensure_models
from korpus.core.settings import Settings
from tasks.runtime.topology import Topology

KEYS = {"k-public": ["public"]}


class Watch:
    """Searches and health checks through the replicas, each stamped with time.time(), until `stop` is set."""

    def __init__(self, topology: Topology) -> None:
        self.topology, self.stop = topology, threading.Event()
        self.first_hit: float | None = None
        self.searches: list[tuple[float, int]] = []  # (when, status; -1: no answer)
        self.health: list[tuple[float, str, str]] = []  # (when, replica, status)

    def search(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                try:
                    answer = client.get(
                        f"{self.topology.serve_urls[0]}/search",
                        params={"q": "письмо", "k": 5},
                        headers={"X-API-Key": "k-public"},
                    )
                    self.searches.append((time.time(), answer.status_code))
                    letters = answer.status_code == 200 and any("письмо_" in hit["source_id"] for hit in answer.json())
                    if letters and self.first_hit is None:
                        self.first_hit = time.time()
                except httpx.HTTPError as error:
                    self.searches.append((time.time(), -1))
                    print("search failed:", error, flush=True)
                self.stop.wait(0.5)

    def watch_health(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                for url in self.topology.serve_urls:
                    try:
                        answer = client.get(f"{url}/health", headers={"X-API-Key": "k-public"})
                        status = answer.json().get("status") if answer.status_code == 200 else str(answer.status_code)
                    except (httpx.HTTPError, ValueError) as error:
                        status = type(error).__name__
                    self.health.append((time.time(), url, str(status)))
                self.stop.wait(1.0)


def run(files: int, keep: bool) -> dict:
    ensure_models(Settings())
    base = Path(tempfile.mkdtemp(prefix="korpus-first-searchable-"))
    root = base / "archive"
    write_archive(root, files)
    topology = Topology(base / "home", root, base / "data", settings_env={"KORPUS_API_KEYS": json.dumps(KEYS)})
    started = time.monotonic()
    try:
        topology.up()
        up_s = time.monotonic() - started
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

        watch = Watch(topology)
        threads = [threading.Thread(target=watch.search), threading.Thread(target=watch.watch_health)]
        for thread in threads:
            thread.start()
        time.sleep(3)  # a few health answers before the run: the idle topology's own state
        with (
            temporary_settings(
                updates={PREFECT_API_URL: topology.api_url, PREFECT_API_AUTH_STRING: topology.prefect_auth}
            ),
            get_client(sync_client=True) as client,
        ):
            nightly = client.read_deployment_by_name("corpus_refresh/nightly")
            run_id = client.create_flow_run_from_deployment(nightly.id).id
            deadline = time.monotonic() + 3600
            while not (flow_run := client.read_flow_run(run_id)).state.is_final():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the refresh did not end within an hour: {flow_run.state}")
                time.sleep(2)
        time.sleep(3)
        watch.stop.set()
        for thread in threads:
            thread.join()
        began, ended = flow_run.start_time.timestamp(), flow_run.end_time.timestamp()
        length = ended - began
        first = None if watch.first_hit is None else watch.first_hit - began
        steps = _flow_steps(topology, run_id, began, (first or 0) + 1)

        def phase(when: float) -> str:
            return "before the refresh" if when < began else "during the refresh" if when <= ended else "after"

        searches: dict[str, Counter[int]] = {}
        for when, status in watch.searches:
            searches.setdefault(phase(when), Counter())[status] += 1
        health: dict[str, Counter[str]] = {}
        for when, _url, status in watch.health:
            health.setdefault(phase(when), Counter())[status] += 1
        not_ok = [(round(t - began, 1), url, status) for t, url, status in watch.health if status != "ok"]
        return {
            "files": files,
            "data": "generated letters (benchmarks/scale.py), 10 % one-page born-digital PDFs",
            "state": flow_run.state.type.value,
            "topology_up_s": round(up_s, 1),
            "refresh_s": round(length, 1),
            "first_searchable_through_replica_s": None if first is None else round(first, 1),
            "first_searchable_share": None if first is None else round(first / length, 3),
            "search_answers": {name: dict(counts) for name, counts in searches.items()},
            "health_answers": {name: dict(counts) for name, counts in health.items()},
            "health_not_ok_during": [entry for entry in not_ok if 0 <= entry[0] <= length][:20],
            "flow_log_until_first_hit": steps,
        }
    finally:
        topology.down()
        if not keep:
            shutil.rmtree(topology.pg_dir, ignore_errors=True) if topology.state.get("pg_dir") else None
            shutil.rmtree(base, ignore_errors=True)


def _flow_steps(topology: Topology, run_id: object, began: float, until: float) -> list[tuple[float, str]]:
    """The flow run's log lines up to `until` seconds after its start, each with its seconds from the start (from
    before it, negative): where the time to the first searchable documents went."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    with (
        temporary_settings(updates={PREFECT_API_URL: topology.api_url, PREFECT_API_AUTH_STRING: topology.prefect_auth}),
        get_client(sync_client=True) as client,
    ):
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])), limit=200)
    steps = [(round(log.timestamp.timestamp() - began, 2), log.message[:90]) for log in logs]
    return sorted(step for step in steps if step[0] <= until)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs) after the run")
    args = parser.parse_args()
    print(json.dumps(run(args.files, args.keep), ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

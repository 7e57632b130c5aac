"""What `korpus topology status --json` lists, read from a topology's recorded state without starting anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.runtime.topology import ORDER, SERVE_REPLICAS, Topology

pytestmark = pytest.mark.unit


def test_every_part_is_listed_with_its_name_pid_state_and_url(tmp_path: Path) -> None:
    topology = Topology(tmp_path / "home", tmp_path / "root", tmp_path / "data")
    parts = topology.parts()
    assert [p["name"] for p in parts] == [p for p in ORDER if p != "opensearch"]  # no node recorded yet
    assert all(p["state"] == "down" and p["pid"] is None for p in parts)
    urls = {p["name"]: p["url"] for p in parts}
    assert urls["serve-1"] != urls["serve-2"] and [urls[n] for n in SERVE_REPLICAS] == topology.serve_urls
    assert urls["postgres"].startswith("postgresql://korpus@127.0.0.1:") and urls["dask-worker-1"] is None
    assert urls["prefect-server"] == topology.api_url


def test_a_topology_recorded_with_one_server_keeps_its_port_for_the_first_replica(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ports = {"postgres": 40001, "prefect": 40002, "dask": 40003, "serve": 40004}
    (home / "topology.json").write_text(json.dumps({"ports": ports, "parts": {}}), encoding="utf-8")
    topology = Topology(home, tmp_path / "root", tmp_path / "data")
    assert topology.serve_url == "http://127.0.0.1:40004"
    assert topology.ports["postgres"] == 40001 and topology.ports["serve-2"] not in (40001, 40002, 40003, 40004)

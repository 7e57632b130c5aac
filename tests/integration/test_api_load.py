"""The API under 50 concurrent clients on loopback (a real `korpus serve` process): no request fails. The bounded
form runs in `make test`; the 60-second form is `slow` (figures: benchmarks/api_load.py, benchmarks/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.api_load import build_index, load, serving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    data = tmp_path_factory.mktemp("load") / "data"
    queries = build_index(data, documents=60)
    with serving(data) as url:
        yield url, queries


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_fifty_clients_at_once_get_every_answer(server: tuple[str, list[str]], mode: str) -> None:
    url, queries = server
    result = load(url, queries, clients=50, mode=mode, per_client=4)
    assert result["errors"] == 0, result["error_kinds"]
    assert result["requests"] == 200


@pytest.mark.slow
def test_fifty_clients_for_a_minute(server: tuple[str, list[str]]) -> None:
    url, queries = server
    for mode in ("bm25", "hybrid"):
        result = load(url, queries, clients=50, mode=mode, seconds=60)
        assert result["errors"] == 0 and result["requests"] > 0, result

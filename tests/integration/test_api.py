"""The HTTP API over the session's sample index: scopes are decided by the server, from the API key."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from korpus.apps.api import create_app

from .conftest import Refreshed

pytestmark = pytest.mark.integration
HR_ORDER = "кадры/приказ_17-к.txt"


@pytest.fixture(scope="module")
def keyed(refreshed: Refreshed) -> TestClient:
    settings = refreshed.settings.model_copy(update={"api_keys": {"k-public": ["public"], "k-hr": ["public", "hr"]}})
    return TestClient(create_app(settings))


def test_anonymous_sees_default_scopes_and_cannot_widen(refreshed: Refreshed) -> None:
    client = TestClient(create_app(refreshed.settings))
    hits = client.get("/search", params={"q": "премия Смирновой"}).json()
    assert hits and all(h["access"] == "public" for h in hits)
    refused = client.get("/search", params={"q": "премия Смирновой", "scopes": "public,hr"})
    assert refused.status_code == 403 and "hr" in refused.json()["detail"]


def test_api_keys_map_to_scopes_server_side(keyed: TestClient) -> None:
    assert keyed.get("/search", params={"q": "премия"}).status_code == 401
    assert keyed.get("/search", params={"q": "премия"}, headers={"X-API-Key": "wrong"}).status_code == 401
    public = {"X-API-Key": "k-public"}
    assert keyed.get("/search", params={"q": "премия", "scopes": "hr"}, headers=public).status_code == 403
    assert HR_ORDER not in {
        h["source_id"] for h in keyed.get("/search", params={"q": "премия Смирновой"}, headers=public).json()
    }
    hr = {"Authorization": "Bearer k-hr"}
    hits = keyed.get("/search", params={"q": "премия Смирновой", "k": 3}, headers=hr).json()
    assert hits[0]["source_id"] == HR_ORDER
    narrowed = keyed.get("/search", params={"q": "премия Смирновой", "scopes": "public"}, headers=hr).json()
    assert all(h["access"] == "public" for h in narrowed)


def test_exact_count_and_sources_honour_access(keyed: TestClient) -> None:
    public, hr = {"X-API-Key": "k-public"}, {"X-API-Key": "k-hr"}
    found = keyed.get("/exact", params={"text": "Смирновой"}, headers=hr).json()
    by_source = keyed.get("/count", params={"text": "Смирновой"}, headers=hr).json()["by_source"]
    assert found["total"] >= 2 and HR_ORDER in by_source
    assert all(o["line"] and "Смирновой" in o["context"] for o in found["occurrences"])
    assert HR_ORDER not in keyed.get("/count", params={"text": "Смирновой"}, headers=public).json()["by_source"]
    assert keyed.get(f"/sources/{HR_ORDER}", headers=public).status_code == 404
    assert keyed.get(f"/sources/{HR_ORDER}", headers=hr).json()["access"] == "hr"


def test_health_tools_and_openapi(keyed: TestClient) -> None:
    health = keyed.get("/health").json()
    assert health["status"] == "ok" and health["chunks_current"] > 0 and health["embed_dims"] == 384
    assert health["search"] == {"backend": "sqlite", "status": "ok", "chunks_served": health["chunks_current"]}
    assert [t["function"]["name"] for t in keyed.get("/tools").json()] == ["search", "search_exact", "count_mentions"]
    paths = keyed.get("/openapi.json").json()["paths"]
    assert {"/search", "/exact", "/count", "/health", "/tools"} <= set(paths)

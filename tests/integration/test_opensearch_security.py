"""A secured cluster (#64 item 5, korpus's side): KORPUS_OPENSEARCH_USER / _PASSWORD sent as HTTP basic auth, an
https:// cluster's certificate verified against KORPUS_OPENSEARCH_CA, and what a user sees when either is wrong.

The cluster here is the session's real node behind a TLS-terminating proxy that demands the credentials
(tests/integration/fault_proxy.py with `tls` and `credentials`): the TLS handshake and the 401 are the ones a
secured OpenSearch gives, but they come from the proxy, not from OpenSearch's security plugin — which the test
node does not load (the note of session 35 says so).
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from flows.corpus_refresh import run_refresh
from korpus.apps.api import create_app
from korpus.core.settings import Settings
from tasks.runtime.tls import loopback_credentials

from .fault_proxy import Faults, fault_proxy

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]


def _certificates(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA of the test's own and a certificate it signed for 127.0.0.1: (the CA bundle, the server's context)."""
    made = loopback_credentials(folder / "tls")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(made.cert, made.key)
    return made.ca, context


def test_a_cluster_behind_tls_and_a_password(
    models, opensearch_url: str, os_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the CA and the credentials a refresh indexes and /search answers through TLS; the certificate unverified
    (no CA given) or the credentials refused, every search is a 503 that says which — never a 500, never a request
    sent in clear or to an unverified peer. The password comes from the environment: the refresh's flow reads it
    there, never from its parameters (which Prefect stores)."""
    monkeypatch.setenv("KORPUS_OPENSEARCH_PASSWORD", "s3cret-пароль")
    ca, server_side = _certificates(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: o\n  access: public\n", encoding="utf-8")
    (root / "записка.txt").write_text("Служебная записка о ремонте кровли склада.\n", encoding="utf-8")
    faults = Faults(credentials=("korpus", "s3cret-пароль"))
    with fault_proxy(opensearch_url, faults, tls=server_side) as url:
        assert url.startswith("https://")
        settings = Settings(
            data=tmp_path / "data",
            backend="opensearch",
            opensearch_url=url,
            opensearch_prefix=os_prefix,
            opensearch_user="korpus",
            opensearch_ca=ca,
            retry_attempts=1,
            retry_backoff=0.0,
            meta_documents=False,
        )
        summary = run_refresh(root, settings)
        assert summary["chunks_indexed"] > 0 and not summary["opensearch"].get("pending"), summary
        answer = TestClient(create_app(settings)).get("/search", params={"q": "кровли", "mode": "bm25"})
        assert answer.status_code == 200 and [h["source_id"] for h in answer.json()] == ["записка.txt"]
        assert "401" not in faults.seen
        assert "s3cret" not in repr(settings) and "s3cret" not in settings.model_dump_json()

        unverified = settings.model_copy(update={"opensearch_ca": None})  # the system's CAs do not know this one
        refused = TestClient(create_app(unverified)).get("/search", params={"q": "кровли", "mode": "bm25"})
        assert refused.status_code == 503 and "cluster cannot answer" in refused.json()["detail"], refused.text

        for wrong in (
            {"opensearch_password": SecretStr("guess")},
            {"opensearch_user": None, "opensearch_password": None},
        ):
            client = TestClient(create_app(settings.model_copy(update=wrong)))
            refused = client.get("/search", params={"q": "кровли", "mode": "bm25"})
            assert refused.status_code == 503 and "refused korpus's credentials" in refused.json()["detail"]
        assert faults.seen.count("401") >= 2


def test_a_user_without_a_password_or_a_missing_ca_is_a_clear_error(tmp_path: Path) -> None:
    from tasks.index.opensearch import opensearch_index

    base = Settings(data=tmp_path, backend="opensearch", opensearch_url="https://127.0.0.1:1")
    with pytest.raises(ValueError, match="without KORPUS_OPENSEARCH_PASSWORD"):
        opensearch_index(base.model_copy(update={"opensearch_user": "korpus"}))
    with pytest.raises(ValueError, match="no CA bundle"):
        opensearch_index(base.model_copy(update={"opensearch_ca": tmp_path / "missing.pem"}))

"""Credentials korpus handles without a server: a catalog URL recorded without its password, the cluster's basic
auth as UTF-8, and the topology's own secrets made once, readable by their owner only."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from pydantic import SecretStr

from korpus.core.settings import Settings
from tasks.index.opensearch import client_security
from tasks.index.pg_catalog import without_password
from tasks.runtime.topology import Topology

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://korpus:s3cret@db.example:5432/korpus",
        "host=db.example port=5432 dbname=korpus user=korpus password=s3cret",
    ],
)
def test_a_catalog_url_is_recorded_without_its_password(url: str) -> None:
    kept = without_password(url)
    assert "s3cret" not in kept and "db.example" in kept and "korpus" in kept


def test_the_clusters_credentials_go_as_utf8_basic_auth_and_tls_is_verified(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    settings = Settings(
        data=tmp_path,
        opensearch_url="https://a:9200,https://b:9200",
        opensearch_user="архивист",
        opensearch_password=SecretStr("пароль:с двоеточием"),
        opensearch_ca=ca,
    )
    options = client_security(settings)
    scheme, token = options["headers"]["Authorization"].split()
    assert scheme == "Basic"
    assert base64.b64decode(token).decode("utf-8") == "архивист:пароль:с двоеточием"
    assert options["ca_certs"] == str(ca) and options["verify_certs"] is True and options["use_ssl"] is True
    plain = client_security(Settings(data=tmp_path, opensearch_url="http://127.0.0.1:9200"))
    assert plain == {}  # a loopback node without security: nothing sent, nothing verified


def test_the_topologys_secrets_are_made_once_and_kept_from_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PREFECT_SERVER_API_AUTH_STRING", raising=False)
    topology = Topology(tmp_path / "home", tmp_path / "root", tmp_path / "data")
    first = topology.prefect_auth
    assert first.startswith("korpus:") and len(first) > 30
    assert Topology(tmp_path / "home", tmp_path / "root", tmp_path / "data").prefect_auth == first
    assert (tmp_path / "home" / "secrets.json").stat().st_mode & 0o077 == 0
    tls = topology.dask_tls
    assert tls.key.stat().st_mode & 0o077 == 0 and tls.ca.is_file() and tls.cert.is_file()
    assert topology.dask_tls == tls  # made once
    env = topology.env()
    assert env["PREFECT_API_AUTH_STRING"] == first and env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"
    assert topology.dask_address.startswith("tls://")
    monkeypatch.setenv("PREFECT_SERVER_API_AUTH_STRING", "operator:given")
    assert topology.prefect_auth == "operator:given"  # the operator's, when set

"""`korpus reindex --embed-model PATH` on a copy of the session index: a tiny sentence-transformers model built in
the test (random 24-dim BERT, the e5 tokenizer) replaces e5-small's 384-dim vectors from the stored chunk text;
afterwards the old model is refused with a clear message and the new one answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import apsw
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from korpus.apps.api import create_app
from korpus.apps.cli import app

from .conftest import Refreshed

pytestmark = pytest.mark.integration
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_embedder(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    base = tmp_path_factory.mktemp("tiny-embedder")
    hf = base / "hf"
    hf.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(models["embed"] / name, hf / name)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(hf))
    torch.manual_seed(3)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=24, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(str(hf))
    transformer = Transformer(str(hf), max_seq_length=128)
    model = SentenceTransformer(modules=[transformer, Pooling(24, pooling_mode="mean"), Normalize()], device="cpu")
    target = base / "tiny-24"
    model.save(str(target))
    return target


def test_reindex_swaps_the_model_and_the_old_one_is_refused(
    refreshed: Refreshed,
    tiny_embedder: Path,
    models: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = refreshed.copy_index(tmp_path / "data")

    def texts() -> list[str]:
        with apsw.Connection(str(data / "korpus.db")) as conn:
            return [r[0] for r in conn.execute("SELECT text FROM chunks WHERE lifecycle = 'current' ORDER BY rowid")]

    before = texts()
    result = runner.invoke(app, ["reindex", "--embed-model", str(tiny_embedder), "--data", str(data)])
    assert result.exit_code == 0, result.output
    assert f"reindexed {len(before)} chunks: e5-small-onnx (384 dims) → tiny-24 (24 dims)" in result.stdout
    assert "chunks embedded" in result.stderr  # progress
    assert texts() == before  # chunk text reused, nothing re-parsed

    # The configured model is still e5-small-onnx: the CLI refuses to query with it and names the way out.
    refused = runner.invoke(app, ["search", "ремонт кровли", "--data", str(data)])
    assert refused.exit_code == 2 and "24-dim vectors from 'tiny-24'" in refused.output
    assert "korpus reindex" in refused.output

    # So does the API, with a 409 that says why (not a 500).
    client = TestClient(create_app(refreshed.settings.model_copy(update={"data": data})))
    conflict = client.get("/search", params={"q": "ремонт кровли"})
    assert conflict.status_code == 409 and "korpus reindex" in conflict.json()["detail"]

    monkeypatch.setenv("KORPUS_EMBED_MODEL", str(tiny_embedder))
    answered = runner.invoke(app, ["search", "ремонт кровли склада", "--json", "--data", str(data)])
    assert answered.exit_code == 0, answered.output
    hits = json.loads(answered.stdout)
    assert hits and all(h["access"] == "public" and h["lifecycle"] == "current" for h in hits)
    again = runner.invoke(app, ["reindex", "--embed-model", str(tiny_embedder), "--data", str(data)])
    assert again.exit_code == 2 and "already holds 24-dim vectors" in again.output

    # Back to the default (how an index of e5-small-int8 or torch e5-small moves to e5-small-onnx): nothing to set.
    monkeypatch.delenv("KORPUS_EMBED_MODEL")
    back = runner.invoke(app, ["reindex", "--embed-model", str(models["embed"]), "--data", str(data)])
    assert back.exit_code == 0, back.output
    assert "tiny-24 (24 dims) → e5-small-onnx (384 dims)" in back.stdout and "nothing to set" in back.stdout
    answered = runner.invoke(app, ["search", "ремонт кровли склада", "--json", "--data", str(data)])
    assert answered.exit_code == 0 and json.loads(answered.stdout), answered.output


@pytest.mark.opensearch
def test_reindex_on_the_cluster_fills_the_new_models_index_then_moves_the_alias(
    refreshed: Refreshed,
    tiny_embedder: Path,
    opensearch_url: str,
    os_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KORPUS_BACKEND=opensearch: `korpus reindex` embeds the catalog's stored text with the new model (the vectors
    the cluster held are not needed), and the next sync fills the new model's index while the alias still serves the
    old one, then moves the alias and deletes the old index. The catalog keeps no vector of a chunk the new index
    holds but the meta-documents' parts, and a meta part's vector is what its refresh embeds of it."""
    import numpy as np

    from tasks.index.opensearch import opensearch_index
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import Embedder
    from tasks.retrieval.retriever import retrieve
    from tasks.text.passages import dense_text

    data = refreshed.copy_index(tmp_path / "data")
    settings = refreshed.settings.model_copy(
        update={"data": data, "backend": "opensearch", "opensearch_url": opensearch_url, "opensearch_prefix": os_prefix}
    )
    cluster = opensearch_index(settings)
    with SqliteIndex(settings.index_path) as catalog:
        catalog.keep_vectors(False)  # as a refresh on this backend keeps its file
        assert cluster.sync_from(catalog)["indexed"] == catalog.chunk_count()
        old = cluster.serving()
        assert len(old) == 1 and old[0].endswith("-384")
    serving = TestClient(create_app(settings))  # a serving process still on e5, not restarted
    assert serving.get("/search", params={"q": "ремонт кровли"}).status_code == 200
    result = runner.invoke(app, ["reindex", "--embed-model", str(tiny_embedder), "--data", str(data)])
    assert result.exit_code == 0, result.output

    monkeypatch.setenv("KORPUS_EMBED_MODEL", str(tiny_embedder))
    monkeypatch.setenv("KORPUS_OPENSEARCH_URL", opensearch_url)
    monkeypatch.setenv("KORPUS_OPENSEARCH_PREFIX", os_prefix)
    synced = runner.invoke(app, ["sync-opensearch", "--data", str(data)])
    assert synced.exit_code == 0, synced.output
    new = cluster.serving()
    assert len(new) == 1 and new[0].endswith("-tiny-24-24")
    assert not cluster.client.indices.exists(index=old[0])
    tiny = Embedder(tiny_embedder)
    with SqliteIndex(settings.index_path) as catalog:
        assert f"{catalog.chunk_count()} indexed" in synced.stdout
        assert cluster.states() == {c: tuple(s) for c, s in catalog.chunk_states().items() if s[0] == "current"}
        held = catalog.conn.execute(
            f"SELECT c.chunk_id, c.text, c.source_id LIKE 'korpus://meta/%' FROM chunks c "
            f"JOIN {catalog.vector_table()} v ON v.rowid = c.rowid"
        ).fetchall()
        assert held and all(meta for _, _, meta in held)  # only the meta parts' vectors stay in the file
        chunk_id, text, _ = held[0]
        got = cluster.client.get(index=cluster.alias, id=chunk_id, _source_includes=["embedding"])["_source"]
        assert np.allclose(got["embedding"], tiny.embed_passages([dense_text(text)])[0], atol=1e-5)
    # a serving process not restarted with the new model is refused with a message, once the sync landed
    refused = serving.get("/search", params={"q": "ремонт кровли"})
    assert refused.status_code == 409 and "24-dim vectors" in refused.json()["detail"], refused.text
    query = tiny.embed_query("ремонт кровли склада")
    hits = retrieve(opensearch_index(settings), "ремонт кровли склада", query, ["public"], mode="dense", k=5)
    assert hits and all(h["access"] == "public" for h in hits)

"""Cross-encoder rerank of the fused top-N. No reranker weights exist offline here, so the test builds a tiny
BERT CrossEncoder with random weights (the e5 tokenizer, one layer) and checks the code path: what is reranked,
in which order, and that filters and identifier-first still hold. It says nothing about rerank quality."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from corpora.sample_archive import SAMPLE_INN
from korpus.core.model_store import ModelMissingError, embed_model_path
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import shared_embedder
from tasks.retrieval.rerank import Reranker
from tasks.retrieval.retriever import retrieve

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_cross_encoder(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    e5 = models["embed"]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(e5 / name, folder / name)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=1,
        initializer_range=0.5,  # wide weights: scores far apart, so the order is not rounding noise
    )
    BertForSequenceClassification(config).save_pretrained(str(folder))
    return folder


def _search(refreshed, query: str, reranker: Reranker | None, mode: str, scopes: list[str], k: int = 10) -> list:
    vector = shared_embedder(str(embed_model_path(refreshed.settings))).embed_query(query)
    with SqliteIndex(refreshed.settings.index_path) as index:
        return retrieve(index.searcher, query, vector, scopes, k=k, mode=mode, reranker=reranker, rerank_top=6)


def test_rerank_reorders_the_fused_top_n_by_cross_encoder_score(refreshed, tiny_cross_encoder: Path) -> None:
    from sentence_transformers import CrossEncoder

    reranker = Reranker(tiny_cross_encoder)
    query = "Какая пеня за просрочку поставки?"
    fused = _search(refreshed, query, None, "hybrid", ["public"])
    reranked = _search(refreshed, query, reranker, "hybrid+rerank", ["public"])
    # The cross-encoder sees exactly the fused top 6 and orders them by its own scores; the rest keep their place.
    assert {h["chunk_id"] for h in reranked[:6]} == {h["chunk_id"] for h in fused[:6]}
    assert [h["chunk_id"] for h in reranked[6:]] == [h["chunk_id"] for h in fused[6:]]
    independent = CrossEncoder(str(tiny_cross_encoder), device="cpu").predict(
        [(query, h["text"]) for h in reranked[:6]]
    )
    assert list(independent) == sorted(independent, reverse=True)
    assert [h["score"] for h in reranked[:6]] == pytest.approx([float(s) for s in independent], abs=1e-5)


def test_rerank_keeps_filters_and_identifier_first(refreshed, tiny_cross_encoder: Path) -> None:
    reranker = Reranker(tiny_cross_encoder)
    hits = _search(refreshed, "премия Смирновой приказ", reranker, "hybrid+rerank", ["public"], k=20)
    assert hits and all(h["access"] == "public" and h["lifecycle"] == "current" for h in hits)
    pinned = _search(refreshed, f"ИНН {SAMPLE_INN}", reranker, "hybrid+rerank", ["public"])
    assert SAMPLE_INN in pinned[0]["text"]


def test_missing_rerank_model_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ModelMissingError, match="KORPUS_RERANK_MODEL"):
        Reranker(tmp_path / "nowhere").scores("q", ["p"])

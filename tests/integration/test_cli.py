"""The `korpus` command line over the index the session refresh built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from korpus.apps.cli import app

from .conftest import Refreshed

pytestmark = pytest.mark.integration
runner = CliRunner()
HIT_KEYS = {
    "chunk_id",
    "source_id",
    "source_version",
    "page",
    "t_start",
    "t_end",
    "section_path",
    "text",
    "score",
    "lifecycle",
    "access",
    "exception",
    "regions",
}


def test_search_json_prints_cited_hits(refreshed: Refreshed) -> None:
    result = runner.invoke(
        app, ["search", "ремонт кровли склада", "--json", "-k", "3", "--data", str(refreshed.settings.data)]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert 1 <= len(hits) <= 3
    assert all(set(h) == HIT_KEYS for h in hits)
    assert hits[0]["source_id"] == "сканы/протокол_1998.pdf" and hits[0]["page"] == 1
    assert hits[0]["regions"] and all(r["page"] == 1 and r["x1"] > r["x0"] for r in hits[0]["regions"])  # OCR'd
    assert all(h["lifecycle"] == "current" and h["access"] == "public" for h in hits)


def test_scopes_option_widens_only_what_it_names(refreshed: Refreshed) -> None:
    args = ["search", "премия Смирновой", "--json", "--data", str(refreshed.settings.data)]
    default = json.loads(runner.invoke(app, args).stdout)
    assert all(h["access"] == "public" for h in default)
    scoped = json.loads(runner.invoke(app, [*args, "--scopes", "hr"]).stdout)
    assert scoped and all(h["access"] == "hr" for h in scoped)


def test_bad_input_gives_a_clear_error(tmp_path: Path) -> None:
    missing_root = runner.invoke(app, ["refresh", "--root", str(tmp_path / "nowhere"), "--data", str(tmp_path)])
    assert missing_root.exit_code == 2 and "is not a folder" in missing_root.output
    no_index = runner.invoke(app, ["search", "договор", "--data", str(tmp_path / "empty")])
    assert no_index.exit_code == 2 and "no index" in no_index.output


def test_eval_on_the_sample_archive_reports_no_leaks(refreshed: Refreshed) -> None:
    questions = Path(__file__).resolve().parents[2] / "eval" / "sample-archive.jsonl"
    reports = {}
    for retriever in ("bm25", "hybrid"):
        result = runner.invoke(
            app, ["eval", str(questions), "--retriever", retriever, "--json", "--data", str(refreshed.settings.data)]
        )
        assert result.exit_code == 0, result.output
        reports[retriever] = json.loads(result.stdout)
    for report in reports.values():
        # 12 questions: 9 answerable in the overall figures, 2 no-answer and 1 denied-access checked apart
        assert report["n"] == 9 and report["leaks"] == {"denied_access": 0, "superseded": 0}
        assert report["by_type"]["identifier"]["recall@1"] == 1.0
        assert set(report["by_type"]) == {"normal", "identifier", "paraphrase", "table", "boundary"}
        assert report["checks"]["denied-access"] == {"n": 1, "passed": 1.0} and report["checks"]["no-answer"]["n"] == 2
        assert 0.0 <= report["ndcg@10"] <= 1.0
    assert reports["hybrid"]["recall@10"] >= reports["bm25"]["recall@10"]
    # the fusion's decisions: one per searched question of the default (convex) hybrid — BM25 at alpha_low where its
    # best hit covers little of the question — none for BM25 alone
    routing = reports["hybrid"]["routing"]
    assert routing["convex"] >= 9 and 0 <= routing["alpha_low"] < routing["convex"] and routing["routed"] == 0
    assert reports["bm25"]["routing"]["convex"] == 0 and reports["bm25"]["routing"]["routed"] == 0


def test_tune_fusion_fits_on_one_half_and_judges_on_the_other(refreshed: Refreshed) -> None:
    """`korpus tune-fusion` on the sample's labelled questions: the halves partition the answerable ones; the pair in
    force scores on the fitting half what `korpus eval` scores it (remembering the index's answers changes nothing);
    the fitted pair is at least as good there (the grid holds the pair in force); on the checking half the fitted
    pair is recommended only with its paired interval above zero, and the printed settings say which."""
    from korpus.core.model_store import embed_model_path
    from tasks.index.registry import backend_for
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import Embedder
    from tasks.retrieval.evaluation import evaluate, load_questions
    from tasks.retrieval.retriever import Retriever
    from tasks.retrieval.tuning import halves

    questions = Path(__file__).resolve().parents[2] / "eval" / "sample-archive.jsonl"
    result = runner.invoke(app, ["tune-fusion", str(questions), "--json", "--data", str(refreshed.settings.data)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    answerable = [q for q in load_questions(questions) if q.expected]
    fit, check = halves(answerable)
    assert report["questions"] == {"fitting": len(fit), "checking": len(check)} and len(fit) + len(check) == 9
    settings = refreshed.settings
    with SqliteIndex(settings.index_path) as index:
        backend = backend_for(settings, index)
        plain = evaluate(
            fit,
            backend,
            Embedder(embed_model_path(settings)),
            "hybrid",
            settings.default_scopes,
            settings.no_answer_threshold,
            Retriever.from_settings(backend, settings),
        )
    assert report["fitting_ndcg@10"]["in_force"] == plain["ndcg@10"]
    assert report["fitting_ndcg@10"]["fitted"] >= report["fitting_ndcg@10"]["in_force"]
    interval = report["checking_ndcg@10"]["fitted_minus_in_force"]
    assert interval["low"] <= interval["mean"] <= interval["high"]
    assert (report["recommend"] == "fitted") == (interval["low"] > 0)
    chosen = report["fitted"] if report["recommend"] == "fitted" else report["in_force"]
    assert report["settings"] == {
        "KORPUS_HYBRID_ALPHA": chosen["hybrid_alpha"],
        "KORPUS_HYBRID_ALPHA_LOW": chosen["hybrid_alpha_low"],
    }
    printed = runner.invoke(app, ["tune-fusion", str(questions), "--data", str(settings.data)])
    said = "keep the settings in force" if report["recommend"] == "in_force" else "better on the questions it was"
    assert printed.exit_code == 0 and "checked on" in printed.stdout and said in printed.stdout, printed.output


def test_explain_says_how_a_noisy_two_question_message_was_ranked(refreshed: Refreshed) -> None:
    message = (
        "Здравствуйте! Где акт про огнетушитли с истёкшим сроком поверки? "
        "Кто поставляет насосы по договору? Заранее спасибо!"
    )
    result = runner.invoke(app, ["search", message, "--explain", "-k", "4", "--data", str(refreshed.settings.data)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "question: Где акт про огнетушитли с истёкшим сроком поверки?" in out
    assert "question: Кто поставляет насосы по договору?" in out and "Здравствуйте" not in out
    assert "typo? 'огнетушитл' not in the index; also searched: огнетушител" in out
    assert "BM25 joins the fusion" in out or "dense ranks alone" in out
    hits = json.loads(
        runner.invoke(app, ["search", message, "--json", "-k", "4", "--data", str(refreshed.settings.data)]).stdout
    )
    firsts = {h["question"]: h["source_id"] for h in reversed(hits)}
    assert firsts == {0: "сканы/акт_проверки_2001.pdf", 1: "договоры/договор_поставки_45-17.pdf"}

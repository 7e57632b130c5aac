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

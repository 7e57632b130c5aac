"""eval/danetqa (DaNetQA, CC0, converted by eval/danetqa/build.py): two halves of distinct questions that never
overlap, every relevant passage in the corpus, and the reporting half read alone by import_beir."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tasks.retrieval.evaluation import import_beir

pytestmark = pytest.mark.unit
SET = Path(__file__).resolve().parents[2] / "eval" / "danetqa"


def _queries(half: str) -> dict[str, str]:
    lines = (SET / f"queries-{half}.jsonl").read_text(encoding="utf-8").splitlines()
    return {q["_id"]: q["text"] for q in map(json.loads, lines)}


def test_the_halves_split_the_questions_and_every_relevant_passage_exists() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("danetqa_build", SET / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    fit, report = _queries("fit"), _queries("report")
    assert (len(fit), len(report)) == (922, 890) and not set(fit) & set(report)
    assert not set(fit.values()) & set(report.values())
    assert all(build.half(text) == "fit" for text in fit.values())
    assert all(build.half(text) == "report" for text in report.values())
    passages = {json.loads(line)["_id"] for line in (SET / "corpus.jsonl").read_text(encoding="utf-8").splitlines()}
    assert len(passages) == 2212
    for half, queries in (("fit", fit), ("report", report)):
        with open(SET / f"qrels-{half}.tsv", encoding="utf-8") as handle:
            rows = list(csv.reader(handle, delimiter="\t"))[1:]
        assert {r[0] for r in rows} == set(queries) and {r[1] for r in rows} <= passages


def test_import_beir_reads_the_reporting_half_alone(tmp_path: Path) -> None:
    counts = import_beir(SET, tmp_path / "corpus", tmp_path / "report.jsonl", split="-report")
    asked = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text(encoding="utf-8").splitlines()]
    assert counts["passages"] == 2212 and len(asked) == 890
    assert {q["id"] for q in asked} == set(_queries("report"))

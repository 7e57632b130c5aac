"""Retrieval on noisy questions: each question as written, and again the way people send it, side by side.

    .venv/bin/python benchmarks/noisy_questions.py [--xquad eval/xquad-ru] [--json]

`noisy()` rewrites each question deterministically (seeded) with one kind of noise, in turn: a greeting before and
thanks after; a pasted link; zero-width characters inside words; a typo in a content word (a letter swapped or
dropped); a quoted reply chain above it; two questions in one message (the next question appended; the labels of
both are kept, a hit for either counts). Each set is evaluated clean and noisy per retriever, with korpus's query
clean-up (tasks/retrieval/query.py) and without it (the question passed as it came), and noisy without
typo-tolerant lexical matching (tasks/text/typos.py), in one process on one index.
Corpora: the archive-style set (corpora.archive_eval), the sample archive with its eval set
(eval/sample-archive.jsonl), and XQuAD-ru dev (imported with import_beir), when given. A message of two questions
about one page carries that page's label once (tasks/retrieval/evaluation.py counts an item labelled twice once).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from unittest import mock

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpora import archive_eval
from corpora.sample_archive import write_sample_archive
from flows.corpus_refresh import run_refresh
from korpus.core.model_store import embed_model_path, ensure_models
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.index.sqlite_search import SqliteSearch
from tasks.retrieval import evaluation, query
from tasks.retrieval.embedding import Embedder
from tasks.retrieval.evaluation import Question, evaluate, import_beir, load_questions

ROOT = Path(__file__).resolve().parents[1]
GREETINGS = ["Здравствуйте!", "Добрый день.", "Добрый день, коллеги!", "Здравствуйте, подскажите, пожалуйста,"]
THANKS = ["Заранее спасибо!", "Спасибо.", "С уважением, Анна Петрова", "Буду благодарен за ответ."]
KINDS = ["polite", "link", "invisible", "typo", "quoted", "two-questions"]


def _typo(question: str, rng: random.Random) -> str:
    words = question.split()
    long = [i for i, w in enumerate(words) if len(w) >= 6 and w.isalpha()]
    if not long:
        return question
    i = rng.choice(long)
    word = words[i]
    at = rng.randrange(1, len(word) - 2)
    words[i] = (
        word[:at] + word[at + 1] + word[at] + word[at + 2 :] if rng.random() < 0.5 else word[:at] + word[at + 1 :]
    )
    return " ".join(words)


def noisy(questions: list[Question], seed: int = 15) -> list[Question]:
    rng = random.Random(seed)
    out = []
    for n, q in enumerate(questions):
        kind = KINDS[n % len(KINDS)]
        text, expected = q.question, list(q.expected)
        if kind == "polite":
            text = f"{rng.choice(GREETINGS)} {text} {rng.choice(THANKS)}"
        elif kind == "link":
            text = f"{text} (см. https://portal.example.ru/docs/{rng.randrange(10**6)}?ref=mail)"
        elif kind == "invisible":
            text = "".join(ch + ("\u200b" if ch.isalpha() and rng.random() < 0.15 else "") for ch in text)
        elif kind == "typo":
            text = _typo(text, rng)
        elif kind == "quoted":
            text = f"> Добрый день, пересылаю письмо.\n> Отдел кадров, тел. 123-45-67\n{text}"
        else:
            other = questions[(n + 1) % len(questions)]
            text, expected = f"{text} И ещё: {other.question}", expected + list(other.expected)
        out.append(q.model_copy(update={"question": text, "expected": expected, "type": f"{q.type}/{kind}"}))
    return out


def compare(questions: list[Question], data: Path) -> dict:
    settings = Settings(data=data)
    embedder = Embedder(embed_model_path(settings))
    report: dict = {}
    noise = noisy(questions)
    with SqliteIndex(settings.index_path) as index:
        for retriever in ("bm25", "dense", "hybrid-rrf", "hybrid"):
            row = {}
            for label, qs in (("clean", questions), ("noisy", noise)):
                result = evaluate(
                    qs, index.searcher, embedder, retriever, settings.default_scopes, settings.no_answer_threshold
                )
                row[label] = {"R@1": result["recall@1"], "nDCG@10": result["ndcg@10"]}
                if label == "noisy":  # each kind of noise apart (its questions' type is `<type>/<kind>`)
                    row["by kind"] = {
                        kind: round(
                            sum(
                                t["ndcg@10"] * t["n"]
                                for name, t in result["by_type"].items()
                                if name.endswith("/" + kind)
                            )
                            / max(1, sum(t["n"] for name, t in result["by_type"].items() if name.endswith("/" + kind))),
                            4,
                        )
                        for kind in KINDS
                    }
            as_it_came = lambda text: text  # noqa: E731 - the question as it came, in every place that cleans it
            with (
                mock.patch.object(evaluation, "clean_query", as_it_came),
                mock.patch.object(query, "clean_query", as_it_came),
            ):
                result = evaluate(noise, index.searcher, embedder, retriever, settings.default_scopes, 0.8)
            row["noisy, no clean-up"] = {"R@1": result["recall@1"], "nDCG@10": result["ndcg@10"]}
            with mock.patch.object(SqliteSearch, "typo_variants", lambda _self, _terms: {}):  # no typo matching
                result = evaluate(noise, index.searcher, embedder, retriever, settings.default_scopes, 0.8)
            row["noisy, no typo matching"] = {"R@1": result["recall@1"], "nDCG@10": result["ndcg@10"]}
            report[retriever] = row
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xquad", type=Path, default=ROOT / "eval" / "xquad-ru")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ensure_models(Settings())
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        questions = Path(tmp) / "archive.jsonl"
        archive_eval.write_questions(questions)
        archive_eval.write_archive(Path(tmp) / "archive")
        run_refresh(Path(tmp) / "archive", Settings(data=Path(tmp) / "archive-data"))
        archive_eval.apply_changes(Path(tmp) / "archive")
        run_refresh(Path(tmp) / "archive", Settings(data=Path(tmp) / "archive-data"))
        answerable = [q for q in load_questions(questions) if q.expected]
        report["archive-style"] = compare(answerable, Path(tmp) / "archive-data")
        write_sample_archive(Path(tmp) / "sample")
        run_refresh(Path(tmp) / "sample", Settings(data=Path(tmp) / "sample-data"))
        sample = [q for q in load_questions(ROOT / "eval" / "sample-archive.jsonl") if q.expected]
        report["sample-archive"] = compare(sample, Path(tmp) / "sample-data")
        if args.xquad.is_dir():
            corpus, xquad = Path(tmp) / "xquad", Path(tmp) / "xquad.jsonl"
            import_beir(args.xquad, corpus, xquad)
            run_refresh(corpus, Settings(data=Path(tmp) / "xquad-data"))
            report["xquad-ru"] = compare(load_questions(xquad), Path(tmp) / "xquad-data")
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for corpus, rows in report.items():
        print(corpus)
        for retriever, row in rows.items():
            print(
                f"  {retriever:>10}: "
                + "  ".join(f"{k} R@1 {v['R@1']:.3f} nDCG {v['nDCG@10']:.3f}" for k, v in row.items() if "R@1" in v)
                + "\n    noisy nDCG@10 by kind: "
                + ", ".join(f"{k} {v:.3f}" for k, v in row["by kind"].items())
            )


if __name__ == "__main__":
    main()

"""What each line korpus adds to a chunk's text costs or gains the dense side (issue #15: «korpus's own dense side is
a little below the same model used plainly — check what each costs»).

korpus embeds a chunk as `[address line]`, then `§ section path` (headings above it) and any context line, then the
body (tasks/contract/chunking.py). Here the same chunks, cut by the default policy from the XQuAD-ru dev passages,
are embedded four ways with the same e5-small in one process, and dense retrieval (each passage scored by its best
chunk, exact cosine) is evaluated on the 623 dev questions:

- `korpus` — the text as korpus embeds it;
- `without address line` — the same, the first line dropped;
- `body only` — the body alone (no address, section or context line);
- `plain passage` — title and text as the BEIR file gives them, no chunking (e5 used plainly, the issue's row).

    .venv/bin/python benchmarks/chunk_text.py [--xquad eval/xquad-ru] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from korpus.core.model_store import embed_model_path, ensure_models  # noqa: E402
from korpus.core.settings import Settings  # noqa: E402
from tasks.contract.chunking import build_chunks  # noqa: E402
from tasks.parse import read_source  # noqa: E402
from tasks.receive import discover_sources  # noqa: E402
from tasks.retrieval.embedding import Embedder, token_counter  # noqa: E402
from tasks.retrieval.evaluation import _scores, import_beir, load_questions  # noqa: E402


def evaluate(vectors: np.ndarray, owners: list[str], queries: np.ndarray, questions: list) -> dict[str, float]:
    """Dense retrieval of passages (each scored by its best chunk): mean R@1 and nDCG@10."""
    similarity = queries @ vectors.T
    rows = defaultdict(list)
    for column, owner in enumerate(owners):
        rows[owner].append(column)
    names = sorted(rows)
    best = np.stack([similarity[:, rows[name]].max(axis=1) for name in names], axis=1)
    totals = {"recall@1": 0.0, "ndcg@10": 0.0}
    for number, question in enumerate(questions):
        order = np.argsort(-best[number])[:10]
        scores = _scores([{"source_id": names[i], "page": None} for i in order], question.expected)
        for key in totals:
            totals[key] += scores[key]
    return {key: round(value / len(questions), 4) for key, value in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xquad", type=Path, default=ROOT / "eval" / "xquad-ru")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = Settings()
    ensure_models(settings)
    model = embed_model_path(settings)
    embedder, count = Embedder(model), token_counter(str(model))
    with tempfile.TemporaryDirectory(prefix="korpus-chunk-text-") as tmp:
        corpus, eval_file = Path(tmp) / "xquad", Path(tmp) / "xquad.jsonl"
        import_beir(args.xquad, corpus, eval_file)
        questions = load_questions(eval_file)
        chunks, plain, plain_owners = [], [], []
        for source in discover_sources(corpus):
            pages = read_source(source, settings).pages
            cut, _empty = build_chunks(source, pages, settings.chunk_policy, count=count, language="ru")
            chunks += cut
            plain.append(Path(source.path).read_text(encoding="utf-8").strip())
            plain_owners.append(source.source_id)
    owners = [c.source_id for c in chunks]
    variants = {
        "korpus": ([c.text for c in chunks], owners),
        "without address line": ([c.text.split("\n", 1)[1] if "\n" in c.text else c.text for c in chunks], owners),
        "body only": ([c.body for c in chunks], owners),
        "plain passage": (plain, plain_owners),
    }
    queries = embedder.embed_queries([q.question for q in questions])
    report: dict = {"passages": len(plain), "chunks": len(chunks), "questions": len(questions)}
    for name, (texts, who) in variants.items():
        report[name] = evaluate(embedder.embed_passages(texts), who, queries, questions)
    report["example chunk text"] = chunks[0].text[:300]
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for name in variants:
        print(f"{name:>22}: R@1 {report[name]['recall@1']:.4f}  nDCG@10 {report[name]['ndcg@10']:.4f}")


if __name__ == "__main__":
    main()

"""DaNetQA (../shared/data/danetqa: PragmaticsLab/DaNetQA, CC0) as a BEIR-layout retrieval set, split once by question.

    .venv/bin/python eval/danetqa/build.py [--source ../shared/data/danetqa]

Every distinct passage becomes a document (`corpus.jsonl`, `_id` p<n> in order of first appearance over train, val,
test); every distinct question string a query (`_id` q<n>), relevant to every passage it was paired with (qrels
score 1). The questions are split in two halves by a hash of their text — the same split on every run, never by
chance: `queries-fit.jsonl` / `qrels-fit.tsv` may be fitted on; `queries-report.jsonl` / `qrels-report.tsv` are
reported on and never fitted (#66). The files it writes are committed beside it, so a clone needs no ../shared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def half(question: str) -> str:
    """'fit' or 'report', by the first byte of the question's sha256."""
    return "fit" if hashlib.sha256(question.encode("utf-8")).digest()[0] % 2 == 0 else "report"


def build(source: Path, out: Path = HERE) -> dict[str, int]:
    passages: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, set[str]] = {}
    for part in ("train", "val", "test"):
        for line in (source / f"{part}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            passage = passages.setdefault(row["passage"], f"p{len(passages)}")
            query = queries.setdefault(row["question"], f"q{len(queries)}")
            qrels.setdefault(query, set()).add(passage)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as corpus:
        for text, pid in passages.items():
            corpus.write(json.dumps({"_id": pid, "title": "", "text": text}, ensure_ascii=False) + "\n")
    counts = {"passages": len(passages), "queries": len(queries)}
    for name in ("fit", "report"):
        chosen = [(q, text) for text, q in queries.items() if half(text) == name]
        with open(out / f"queries-{name}.jsonl", "w", encoding="utf-8") as handle:
            for q, text in chosen:
                handle.write(json.dumps({"_id": q, "text": text}, ensure_ascii=False) + "\n")
        with open(out / f"qrels-{name}.tsv", "w", encoding="utf-8") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            for q, _text in chosen:
                for pid in sorted(qrels[q], key=lambda p: int(p[1:])):
                    handle.write(f"{q}\t{pid}\t1\n")
        counts[f"queries {name}"] = len(chosen)
    return counts


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=HERE.parents[2] / "shared" / "data" / "danetqa")
    print(build(parser.parse_args().source))

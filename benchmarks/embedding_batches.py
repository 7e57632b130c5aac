"""The default embedder's batches against a plain ONNX Runtime loop, at every length of text korpus embeds (#47).

Texts, all real Russian (XQuAD-ru, eval/xquad-ru) except the letters, which are what benchmarks/scale.py refreshes:

- `queries` — the 623 dev questions (`query: ` prompt; ~15 tokens), what the API and the meta-documents' parts send;
- `letters` — the chunks of 1,000 scale.py letters (~95 tokens; the refresh's ordinary document);
- `sentences` — the first two sentences of each XQuAD paragraph (~60 tokens);
- `paragraphs` — the 240 paragraphs whole (~190 tokens);
- `512-token` — three consecutive paragraphs joined, truncated at the model's 512 tokens.

Rows, each on the same texts with the same model folder (the default `e5-small-onnx`, fp32), cores and threads:

- `korpus` — `Embedder.embed_passages` / `embed_queries` as the refresh and the API call it: length-sorted batches
  of `TOKEN_BUDGET` padded tokens (tasks/retrieval/embedding.py);
- `plain, batches of 32` — what a competent engineer writes without korpus: the folder's fast tokenizer with
  padding, ONNX Runtime, batches of 32 in the order given, mean pooling, L2 normalisation;
- `plain, sorted batches of 32` — the same with the texts sorted by length first (the best count-sized batch here);
- `korpus before #47` — the previous rule (batches of 16 up to 64 tokens, every longer text alone), for the record.

Each row's seconds are the best of `--rounds` rounds run in turn (the machine is shared and drifts). The vectors
of every row are checked against each text embedded alone (the least cosine is printed; ≥ 0.99999 is the bar).
`--budgets` sweeps the budget instead (korpus's policy at each, on every set).

    .venv/bin/python benchmarks/embedding_batches.py [--rounds 3] [--budgets 1024 2048 4096 8192]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.plain_loop import PlainLoop  # noqa: E402
from korpus.core.model_store import embed_model_path  # noqa: E402
from korpus.core.settings import Settings  # noqa: E402
from tasks.retrieval import embedding  # noqa: E402
from tasks.retrieval.embedding import Embedder, length_batches  # noqa: E402


def texts_of_every_length(letters: int = 1000) -> dict[str, tuple[str, list[str]]]:
    """Name → (prompt, texts)."""
    folder = ROOT / "eval" / "xquad-ru"
    corpus = [json.loads(line)["text"] for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [json.loads(line)["text"] for line in (folder / "queries-dev.jsonl").read_text().splitlines()]
    sentences = [" ".join(re.split(r"(?<=[.!?])\s+", p)[:2]) for p in corpus]
    long = [" ".join(corpus[i : i + 3]) for i in range(0, len(corpus) - 2)]
    return {
        "queries": ("query", queries),
        "letters": ("passage", scale_letters(letters)),
        "sentences": ("passage", sentences),
        "paragraphs": ("passage", corpus),
        "512-token": ("passage", long),
    }


def scale_letters(files: int) -> list[str]:
    """The chunk texts korpus's refresh embeds for benchmarks/scale.py's letters (its own archive writer)."""
    from benchmarks.scale import write_archive
    from korpus.core.datamodel import PageResult, Source, SourceKind
    from tasks.contract.chunking import build_chunks
    from tasks.retrieval.embedding import token_counter

    count = token_counter(str(embed_model_path(Settings())))
    texts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        write_archive(Path(tmp) / "letters", files)
        for path in sorted(Path(tmp).rglob("*.txt")):
            source = Source(
                source_id=path.name, version="v", path=str(path), kind=SourceKind.text, owner="o", access="public"
            )
            page = PageResult(source_id=path.name, source_version="v", page=1, text=path.read_text(), method="plain")
            chunks, _ = build_chunks(source, [page], Settings().chunk_policy, count=count, language="ru")
            texts += [c.text for c in chunks]
    return texts


def korpus_rows(embedder: Embedder, budget: int | None = None, before: bool = False) -> Callable:
    """korpus's policy (at `budget`, or the default), or the rule before #47 (`before`)."""

    def embed(texts: list[str], prompt: str) -> np.ndarray:
        saved = embedding.length_batches
        if before:
            embedding.length_batches = _before_47
        elif budget is not None:
            embedding.length_batches = lambda lengths: saved(lengths, budget)
        try:
            return embedder.embed_queries(texts) if prompt == "query" else embedder.embed_passages(texts)
        finally:
            embedding.length_batches = saved

    return embed


def _before_47(lengths: list[int]) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    short = [i for i in order if lengths[i] <= 64]
    return [short[at : at + 16] for at in range(0, len(short), 16)] + [[i] for i in order[len(short) :]]


def padding(embedder: Embedder, texts: list[str], prompt: str, budget: int, size: int | None) -> float:
    """Padded tokens run ÷ tokens read: korpus's budget batches (size None) or plain batches of `size`."""
    model = embedder._model
    lengths = [len(ids) for ids in model.token_ids([model.prompts[prompt] + t for t in texts])]
    if size is None:
        batches = length_batches(lengths, budget)
    else:
        batches = [list(range(at, min(at + size, len(lengths)))) for at in range(0, len(lengths), size)]
    run = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return round(run / sum(lengths), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="cores one run uses (0: every core)")
    parser.add_argument("--budgets", type=int, nargs="*", help="sweep korpus's token budget instead")
    parser.add_argument("--sets", nargs="*", help="only these sets")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import os

    threads = args.threads or len(os.sched_getaffinity(0))
    folder = embed_model_path(Settings())
    embedder = Embedder(folder, threads=threads)
    embedder.warm_up()
    sets = texts_of_every_length()
    if args.sets:
        sets = {k: v for k, v in sets.items() if k in args.sets}
    if args.budgets:
        rows = {f"korpus, budget {b}": korpus_rows(embedder, b) for b in args.budgets}
    else:
        rows = {
            "korpus": korpus_rows(embedder),
            "plain, batches of 32": PlainLoop(folder, threads).embed,
            "plain, sorted batches of 32": PlainLoop(folder, threads, sort=True).embed,
            "korpus before #47": korpus_rows(embedder, before=True),
        }
    report: dict[str, dict] = {}
    for name, (prompt, texts) in sets.items():
        alone = np.stack([korpus_rows(embedder, before=True)([t], prompt)[0] for t in texts[:200]])
        best: dict[str, float] = {}
        cosine: dict[str, float] = {}
        order = list(rows)
        for _ in range(args.rounds):
            random.shuffle(order)
            for row in order:
                start = time.perf_counter()
                vectors = rows[row](texts, prompt)
                best[row] = min(best.get(row, float("inf")), time.perf_counter() - start)
                cosine[row] = float((vectors[:200] * alone).sum(axis=1).min())
        tokens = [len(e.ids) for e in embedder._model._tokenizer.encode_batch(texts)]
        entry = {
            "texts": len(texts),
            "median tokens": int(np.median(tokens)),
            **{
                row: {"texts/s": round(len(texts) / best[row], 1), "least cosine to alone": round(cosine[row], 6)}
                for row in rows
            },
        }
        if not args.budgets:
            plain = min(best["plain, batches of 32"], best["plain, sorted batches of 32"])
            entry["korpus ÷ best plain (speed)"] = round(plain / best["korpus"], 3)
            entry["padding: korpus"] = padding(embedder, texts, prompt, embedding.TOKEN_BUDGET, None)
            entry["padding: plain, batches of 32"] = padding(embedder, texts, prompt, 0, 32)
        report[name] = entry
        print(json.dumps({name: entry}, ensure_ascii=False), flush=True)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()

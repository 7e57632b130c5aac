"""First refresh vs unchanged re-run vs index rebuild from a warm page cache, on the sample archive.

Run side by side in one process so the ratios hold on a shared, noisy machine:

    .venv/bin/python benchmarks/refresh.py [--audio ../shared/data/audio/ru.wav] [--json]

1. first     — empty data directory: text layers, Tesseract, Whisper, embeddings, index.
2. unchanged — the same files again: the catalog says every sha256 is known, so nothing is opened.
3. warm      — a new index over the first run's page cache (as after a chunking or embedding change):
               no OCR or ASR, only chunking, embedding and indexing.
Wall times include Prefect's flow/task bookkeeping and the Dask LocalCluster start, as a user sees them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpora.sample_archive import write_sample_archive
from flows.corpus_refresh import run_refresh
from korpus.core.model_store import ensure_models
from korpus.core.settings import Settings


def _timed(root: Path, settings: Settings) -> tuple[float, dict]:
    started = time.perf_counter()
    summary = run_refresh(root, settings)
    return time.perf_counter() - started, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audio", type=Path, help="an extra real recording to include (e.g. shared ru.wav)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ensure_models(Settings())
    with tempfile.TemporaryDirectory(prefix="korpus-bench-") as tmp:
        root = Path(tmp) / "archive"
        write_sample_archive(root)
        if args.audio:
            shutil.copy(args.audio, root / "записи" / args.audio.name)
        first_data = Settings(data=Path(tmp) / "data")
        t_first, s_first = _timed(root, first_data)
        t_same, s_same = _timed(root, first_data)
        warm_data = Settings(data=Path(tmp) / "data-warm")
        shutil.copytree(first_data.page_cache_dir, warm_data.page_cache_dir)
        t_warm, s_warm = _timed(root, warm_data)
    result = {
        "first_s": round(t_first, 2),
        "unchanged_s": round(t_same, 2),
        "warm_cache_s": round(t_warm, 2),
        "unchanged_over_first": round(t_same / t_first, 3),
        "warm_cache_over_first": round(t_warm / t_first, 3),
        "first_work": {k: s_first[k] for k in ("ocr_engine_calls", "asr_engine_calls", "chunks_embedded")},
        "unchanged_work": {k: s_same[k] for k in ("ocr_engine_calls", "asr_engine_calls", "chunks_embedded")},
        "warm_work": {k: s_warm[k] for k in ("ocr_engine_calls", "asr_engine_calls", "page_cache_hits")},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()

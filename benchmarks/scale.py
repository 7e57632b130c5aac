"""A folder of many small files through `korpus refresh`: time per file and peak memory, documents indexed one by one
against documents embedded and published in groups (issue #14, batched work), side by side in one run.

Generated archive: one-paragraph letters (.txt) and, every tenth file, a one-page born-digital PDF. Each
configuration refreshes the same archive into its own data directory, in a fresh Python process (so peak RSS is
its own), with the same models and cores:

- `per document` — KORPUS_INDEX_GROUP_SOURCES=1: each document embedded and published alone (korpus before #14);
- `grouped` — the default (32 documents or 128 pages per chunk-and-gate, embedding and publish task);
- `plain loop` — the same stages (read, chunk, gate, embed in batches of 32 documents, publish) in one Python loop,
  no Prefect and no Dask: the floor the orchestration is measured against (issue: throughput ≥ 0.8 × this).

    .venv/bin/python benchmarks/scale.py                      # 100 files
    .venv/bin/python benchmarks/scale.py --files 100 300      # time per file at two sizes
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("приказ договор поставка насос протокол заседание комиссия записка отпуск ремонт кровля склад акт сверка "
         "расчёт квартал поставщик оборудование смета архив опись дело фонд письмо ответ запрос справка отдел "
         "кадры премия сотрудник бухгалтерия счёт оплата накладная").split()  # fmt: skip
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\n"


def write_archive(root: Path, files: int, seed: int = 14) -> None:
    import pymupdf

    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for n in range(files):
        text = f"Письмо № {n + 1}. " + " ".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
            for _ in range(rng.randint(2, 5))
        )
        folder = root / f"дела_{n // 100:03d}"
        folder.mkdir(exist_ok=True)
        if n % 10 == 9:
            doc = pymupdf.open()
            doc.new_page(width=595, height=842).insert_textbox(
                pymupdf.Rect(60, 60, 540, 780), text, fontsize=12, fontname="dejavu",
                fontfile="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            )  # fmt: skip
            doc.save(folder / f"письмо_{n + 1:05d}.pdf")
        else:
            (folder / f"письмо_{n + 1:05d}.txt").write_text(text, encoding="utf-8")


RUN = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from flows.corpus_refresh import run_refresh
from korpus.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.embedding import shared_embedder
from korpus.model_store import embed_model_path
settings = Settings(data=Path({data!r}), meta_documents=False)
shared_embedder(str(embed_model_path(settings)), settings.embed_batch_size).embed_passages(["прогрев"])  # warm
from datetime import datetime
began = time.time()
start = time.perf_counter()
summary = run_refresh(Path({archive!r}), settings)
seconds = time.perf_counter() - start
with SqliteIndex(settings.index_path) as index:
    first = index.conn.execute("SELECT min(switched_at) FROM sources").fetchall()[0][0]
print(json.dumps({{"seconds": seconds, "chunks": summary["chunks_indexed"], "sources": summary["sources"],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "first_searchable_s": datetime.fromisoformat(first).timestamp() - began}}))
"""


PLAIN = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import numpy as np
from korpus.settings import Settings
from korpus.model_store import embed_model_path
from tasks.contract.chunking import build_chunks
from tasks.embedding import shared_embedder, token_counter
from tasks.contract.gate import route_chunks
from tasks.index.sqlite import SqliteIndex
from tasks.parse import read_source
from tasks.receive import discover_sources
settings = Settings(data=Path({data!r}), meta_documents=False)
embedder = shared_embedder(str(embed_model_path(settings)), settings.embed_batch_size)
embedder.embed_passages(["прогрев"])  # warm, as the refresh runs are
count = token_counter(str(embed_model_path(settings)))
start = time.perf_counter()
sources = discover_sources(Path({archive!r}))
indexed = 0
with SqliteIndex(settings.index_path) as index:
    for at in range(0, len(sources), 32):  # the same stages, batched the same way, no Prefect and no Dask
        group = []
        for source in sources[at : at + 32]:
            pages = read_source(source, settings).pages
            chunks, _empty = build_chunks(source, pages, settings.chunk_policy, count=count, language="ru")
            passed, _refused = route_chunks(chunks)
            group.append((source, pages, passed))
        texts = [c.text for _s, _p, passed in group for c in passed]
        vectors = embedder.embed_passages(texts) if texts else np.zeros((0, 0), dtype=np.float32)
        offset = 0
        for source, pages, passed in group:
            index.publish_version(source, passed, vectors[offset : offset + len(passed)], pages,
                                  embed_model=embed_model_path(settings).name)
            offset += len(passed)
            indexed += len(passed)
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "chunks": indexed, "sources": len(sources),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "first_searchable_s": None}}))
"""


def plain_loop(archive: Path, data: Path) -> dict:
    """The same stages over the same files in one plain loop: the floor korpus's orchestration is measured against."""
    script = PLAIN.format(root=str(ROOT), data=str(data), archive=str(archive))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=7200,
                          env=dict(os.environ, PREFECT_LOGGING_LEVEL="WARNING"))  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def refresh(archive: Path, data: Path, group: int) -> dict:
    env = dict(os.environ, KORPUS_INDEX_GROUP_SOURCES=str(group), PREFECT_LOGGING_LEVEL="WARNING",
               PREFECT_SERVER_ANALYTICS_ENABLED="false")  # fmt: skip
    script = RUN.format(root=str(ROOT), data=str(data), archive=str(archive))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, nargs="+", default=[100])
    args = parser.parse_args()
    report = {}
    with tempfile.TemporaryDirectory(prefix="korpus-scale-") as tmp:
        for files in args.files:
            archive = Path(tmp) / f"archive-{files}"
            write_archive(archive, files)
            row = {}
            for label, group in (("per document", 1), ("grouped", 32)):
                started = time.perf_counter()
                result = refresh(archive, Path(tmp) / f"data-{files}-{group}", group)
                result["wall_s"] = round(time.perf_counter() - started, 1)
                result["s_per_file"] = round(result["seconds"] / files, 3)
                row[label] = result
            plain = plain_loop(archive, Path(tmp) / f"data-{files}-plain")
            plain["s_per_file"] = round(plain["seconds"] / files, 3)
            row["plain loop"] = plain
            row["grouped ÷ per document, time"] = round(row["grouped"]["seconds"] / row["per document"]["seconds"], 3)
            row["grouped throughput ÷ plain loop"] = round(plain["seconds"] / row["grouped"]["seconds"], 3)
            row["grouped, first searchable ÷ whole refresh"] = round(
                row["grouped"]["first_searchable_s"] / row["grouped"]["seconds"], 3
            )
            report[files] = row
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

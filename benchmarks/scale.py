"""A folder of many small files through `korpus refresh`: time per file and peak memory, documents indexed one by one
against documents embedded and published in groups (issue #14, batched work), side by side in one run.

Generated archive: one-paragraph letters (.txt) and, every tenth file, a one-page born-digital PDF. Each
configuration refreshes the same archive into its own data directory, in a fresh Python process (so peak RSS is
its own), with the same models and cores:

- `per document` — KORPUS_INDEX_GROUP_SOURCES=1: each document embedded and published alone (korpus before #14);
- `grouped` — the default (32 documents or 256 chunks per embedding pass and publish task).

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
from tasks.index_sqlite import SqliteIndex
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
            row["grouped ÷ per document, time"] = round(row["grouped"]["seconds"] / row["per document"]["seconds"], 3)
            row["grouped, first searchable ÷ whole refresh"] = round(
                row["grouped"]["first_searchable_s"] / row["grouped"]["seconds"], 3
            )
            report[files] = row
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

"""The worst document (issue #14, item 6): one scanned volume of many pages through `korpus refresh` — peak memory
and time at two sizes side by side in one run, and a refresh SIGKILLed halfway through the bigger one that resumes
without OCR-ing a finished page again.

The volume is image-only pages (300-dpi greyscale scans with blur, noise and a slight rotation, from
corpora.sample_archive's scan generator), ten distinct page images repeated; every page is OCR'd by Tesseract (the
page cache keys by version and page, so a repeated image is read again). Each run is a fresh Python process (its
peak RSS is its own), the model warmed before the clock starts, meta-documents off.

    .venv/bin/python benchmarks/volume.py                        # 100 and 1000 pages, and the kill at half
    .venv/bin/python benchmarks/volume.py --pages 20 100 --no-kill
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LINES = [
    ["ПРОТОКОЛ № {n}", "заседания комиссии по описи дел", "архивного фонда за 1998 год", "Присутствовали: пять членов"],
    ["ОПИСЬ ДЕЛ № {n}", "Дело 1. Приказы по личному составу", "Дело 2. Переписка с министерством", "Дело 3. Акты"],
    ["АКТ № {n}", "приёмки насосов на склад", "Приняты без замечаний.", "Председатель комиссии"],
    ["СПРАВКА № {n}", "о составе фонда", "Всего дел: сорок два", "Крайние даты: 1985-1998"],
    ["ПРИКАЗ № {n}", "о проведении инвентаризации", "имущества и документов", "Ответственный: отдел кадров"],
]
RUN = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.retrieval.embedding import shared_embedder
from korpus.core.model_store import embed_model_path
settings = Settings(data=Path({data!r}), meta_documents=False)
shared_embedder(str(embed_model_path(settings))).embed_passages(["прогрев"])  # warm
start = time.perf_counter()
summary = run_refresh(Path({archive!r}), settings)
print(json.dumps({{"seconds": round(time.perf_counter() - start, 1), "chunks": summary["chunks_indexed"],
                  "ocr_engine_calls": summary["ocr_engine_calls"], "page_cache_hits": summary["page_cache_hits"],
                  "pages_by_method": summary["pages_by_method"],
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}}))
"""


def write_volume(root: Path, pages: int) -> Path:
    import pymupdf

    from corpora.sample_archive import _scan_pdf

    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text("defaults:\n  access: public\n  owner: Архив\n", encoding="utf-8")
    images = [
        pymupdf.open(stream=_scan_pdf([line.format(n=k + 1) for line in LINES[k % len(LINES)]], seed=k))
        for k in range(10)
    ]
    volume = pymupdf.open()
    for n in range(pages):
        volume.insert_pdf(images[n % len(images)])
    path = root / f"том_{pages}.pdf"
    volume.save(path)
    return path


def refresh(archive: Path, data: Path, kill_after_pages: int | None = None) -> dict:
    """One refresh in a fresh process; with `kill_after_pages`, SIGKILLed once the page cache holds that many
    finished pages (what it had done is then counted from the cache)."""
    script = RUN.format(root=str(ROOT), data=str(data), archive=str(archive))
    env = dict(os.environ, PREFECT_LOGGING_LEVEL="WARNING", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    log = open(data.parent / f"{data.name}.log", "w")  # a file, not a pipe: the Prefect server child may hold it
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    if kill_after_pages is not None:
        cache = data / "cache" / "pages"
        while proc.poll() is None:
            if len(list(cache.rglob("p*-tesseract-*.json"))) >= kill_after_pages:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                log.close()
                return {"killed_with_pages_cached": len(list(cache.rglob("p*-tesseract-*.json")))}
            time.sleep(0.5)
    proc.wait()
    log.close()
    output = (data.parent / f"{data.name}.log").read_text(encoding="utf-8")
    if proc.returncode != 0:
        raise SystemExit(output[-3000:])
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, nargs=2, default=[100, 1000], metavar=("SMALL", "BIG"))
    parser.add_argument("--no-kill", action="store_true", help="skip the SIGKILL-and-resume run")
    args = parser.parse_args()
    small, big = args.pages
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="korpus-volume-") as tmp:
        for pages in (small, big):
            archive = Path(tmp) / f"archive-{pages}"
            write_volume(archive, pages)
            result = refresh(archive, Path(tmp) / f"data-{pages}")
            result["s_per_page"] = round(result["seconds"] / pages, 3)
            report[f"{pages} pages"] = result
        report["peak RSS, big ÷ small"] = round(
            report[f"{big} pages"]["peak_rss_mb"] / report[f"{small} pages"]["peak_rss_mb"], 3
        )
        report["time per page, big ÷ small"] = round(
            report[f"{big} pages"]["s_per_page"] / report[f"{small} pages"]["s_per_page"], 3
        )
        if not args.no_kill:
            archive = Path(tmp) / f"archive-{big}"
            data = Path(tmp) / f"data-{big}-killed"
            killed = refresh(archive, data, kill_after_pages=big // 2)
            resumed = refresh(archive, data)
            report["killed at half, then resumed"] = {
                **killed,
                "resumed": resumed,
                "pages OCR'd again": resumed["ocr_engine_calls"] - (big - killed["killed_with_pages_cached"]),
            }
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

"""Peak memory of the default refresh with page bombs beside ordinary files, against the same refresh without them
(#46 item 2: within 1.5×).

Two folders: the sample archive (`corpora/sample_archive.py`: scans, born-digital PDFs, office files, letters,
a recording) — and the same with the page bombs of tests/integration/test_page_bombs.py beside it (a 200 × 200-inch
PDF page, a PDF page holding a 30,000 × 30,000 image, 5,000 blank pages, a 30,000 × 30,000 DjVu, PNG and JPEG).
Each is refreshed by `korpus refresh` in a fresh process with the default settings (reading children on); the
resident memory of the whole process tree (the refresh, its reading children, Tesseract, ddjvu) is summed every
50 ms and its peak reported, with the wall time. The two runs alternate `--rounds` times.

    .venv/bin/python benchmarks/page_bombs.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from corpora.sample_archive import write_sample_archive  # noqa: E402
from tests.integration.test_page_bombs import page_bombs  # noqa: E402


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:  # ended between the listing and the reading
            continue
    return total


def refresh_peak(archive: Path, work: Path) -> dict:
    data, home = work / "data", work / "prefect"
    shutil.rmtree(data, ignore_errors=True)
    env = dict(
        os.environ, PREFECT_LOGGING_LEVEL="WARNING", PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false"
    )
    env.pop("PREFECT_API_URL", None)
    command = [
        str(Path(sys.executable).parent / "korpus"),
        "refresh",
        "--root",
        str(archive),
        "--data",
        str(data),
        "--json",
    ]
    start, peak = time.perf_counter(), 0
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as run:
        watched = psutil.Process(run.pid)
        while run.poll() is None:
            peak = max(peak, tree_rss(watched))
            time.sleep(0.05)
        out = run.stdout.read() if run.stdout else ""
    if run.returncode != 0:
        raise SystemExit(f"korpus refresh exited {run.returncode}")
    summary = json.loads(out[out.index("{") :])
    return {
        "peak_rss_mb": round(peak / 2**20),
        "seconds": round(time.perf_counter() - start, 1),
        "sources": summary["sources"],
        "quarantined": summary["quarantined"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="korpus-bombs-") as tmp:
        plain, bombs = Path(tmp) / "plain", Path(tmp) / "bombs"
        write_sample_archive(plain)
        shutil.copytree(plain, bombs)
        page_bombs(bombs / "бомбы")
        rows: dict[str, list[dict]] = {"without bombs": [], "with bombs": []}
        for _ in range(args.rounds):
            rows["without bombs"].append(refresh_peak(plain, Path(tmp) / "w1"))
            rows["with bombs"].append(refresh_peak(bombs, Path(tmp) / "w2"))
        report = {
            name: {
                "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                "seconds": min(r["seconds"] for r in runs),
                "sources": runs[0]["sources"],
                "quarantined": runs[0]["quarantined"],
            }
            for name, runs in rows.items()
        }
        report["peak ratio"] = round(report["with bombs"]["peak_rss_mb"] / report["without bombs"]["peak_rss_mb"], 2)
        print(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()

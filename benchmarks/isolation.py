"""What reading in a child process costs the default refresh (#46 item 1: keep it within 10 % of reading in-process).

Two folders, each refreshed with the default settings (`KORPUS_READER_ISOLATION=true`: PDFs, images, DjVu, office
files, spreadsheets, archives and mail read in a reading child per thread) and with isolation off, alternating,
into a fresh data directory each time, models loaded before the clock starts (benchmarks/scale.py's `refresh`):

- 1,000 letters of benchmarks/scale.py (900 `.txt`, read in-process either way, and 100 born-digital PDFs);
- 100 one-page scanned PDFs (corpora/sample_archive.py `_scan_pdf`): each PDF's text layer is read in the child,
  its page then OCR'd by Tesseract as before.

    .venv/bin/python benchmarks/isolation.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scale import MANIFEST, refresh, write_archive

from corpora.sample_archive import _scan_pdf


def write_scans(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for n in range(count):
        lines = [f"АКТ № {n + 1}", "приёмки насосов на склад", f"Насос НД-{n % 7 + 1} принят без замечаний."]
        (root / f"акт_{n + 1:03d}.pdf").write_bytes(_scan_pdf(lines, seed=n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--letters", type=int, default=1000)
    parser.add_argument("--scans", type=int, default=100)
    args = parser.parse_args()
    report: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="korpus-isolation-") as tmp:
        folders = {f"{args.letters} letters": Path(tmp) / "letters", f"{args.scans} scanned PDFs": Path(tmp) / "scans"}
        write_archive(folders[f"{args.letters} letters"], args.letters)
        write_scans(folders[f"{args.scans} scanned PDFs"], args.scans)
        for name, archive in folders.items():
            runs: dict[str, list[float]] = {"isolated (default)": [], "in-process": []}
            for _ in range(args.rounds):
                for label, isolation in (("isolated (default)", "true"), ("in-process", "false")):
                    data = Path(tmp) / "data"
                    shutil.rmtree(data, ignore_errors=True)
                    done = refresh(archive, data, Path(tmp) / "prefect", meta=True, KORPUS_READER_ISOLATION=isolation)
                    runs[label].append(done["seconds"])
            best = {label: min(seconds) for label, seconds in runs.items()}
            report[name] = {f"{label} s": round(s, 1) for label, s in best.items()} | {
                "isolated ÷ in-process": round(best["isolated (default)"] / best["in-process"], 3)
            }
            print(json.dumps({name: report[name]}, ensure_ascii=False), flush=True)
    print(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()

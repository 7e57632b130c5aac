"""What an unchanged refresh costs at the file layer (#32 item 4): discovery of a tree of N small generated files with
the catalog's last readings (the default: stat, no read) against `find ROOT -type f | wc -l` on the same tree, and
against discovery that hashes every file (`korpus refresh --verify`), side by side, each timed `--repeat` times.

    .venv/bin/python benchmarks/unchanged.py --files 100000 [--repeat 3] [--json]

Measures `tasks.receive.discover_sources` — the stage an unchanged refresh spends per file — not a whole refresh: the
rest of an unchanged refresh (the Prefect flow, the catalog diff, the meta-documents' fingerprint check) does not
grow with the bytes on disk (benchmarks/refresh.py times it). The files are 200-400 bytes; `--size` makes them
bigger, which is what makes hashing cost (a scan is megabytes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.receive import SETTLED_NS, discover_sources, reading_of


def write_tree(root: Path, files: int, size: int) -> None:
    """`files` letters in folders of 1,000, each `size` bytes or a little under (a number makes them differ)."""
    body = ("Письмо о поставке угля на склад. " * (size // 40 + 1)).encode()
    for n in range(files):
        folder = root / f"папка_{n // 1000:04d}"
        if n % 1000 == 0:
            folder.mkdir(parents=True)
        (folder / f"письмо_{n:06d}.txt").write_bytes(f"№ {n}\n".encode() + body[: size - 12])
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")


def _timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _medians(root: Path, readings: dict, repeat: int) -> dict[str, float]:
    """Median seconds of each run; the three are interleaved, so a noisy machine slows them alike."""
    runs = {
        "find | wc -l": lambda: subprocess.run(
            f"find '{root}' -type f | wc -l", shell=True, check=True, capture_output=True
        ),
        "korpus (stat)": lambda: discover_sources(root, None, readings),
        "korpus --verify (hash)": lambda: discover_sources(root),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            times[name].append(_timed(run))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[100_000])
    parser.add_argument("--size", type=int, default=300, help="bytes per file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for files in args.files:
        with tempfile.TemporaryDirectory(prefix="korpus-unchanged-") as tmp:
            root = Path(tmp) / "archive"
            write_tree(root, files, args.size)
            time.sleep(SETTLED_NS / 1e9)  # a file changed within the last 2 s is hashed again (tasks/receive.py)
            first = discover_sources(root)  # the first refresh reads everything and keeps the readings
            readings = {s.source_id: r for s in first if (r := reading_of(s)) is not None}
            assert len(readings) == files
            medians = _medians(root, readings, args.repeat)
            again = discover_sources(root, None, readings)
            assert not any(s.hashed for s in again) and [s.version for s in again] == [s.version for s in first]
            base = medians["find | wc -l"]
            rows += [
                {
                    "files": files,
                    "run": name,
                    "seconds": round(seconds, 3),
                    "per_file_us": round(seconds / files * 1e6, 1),
                    "vs_find": round(seconds / base, 1),
                }
                for name, seconds in medians.items()
            ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    print(f"{'files':>8}  {'run':<24} {'seconds':>8} {'µs/file':>8} {'× find':>7}")
    for r in rows:
        print(f"{r['files']:>8}  {r['run']:<24} {r['seconds']:>8} {r['per_file_us']:>8} {r['vs_find']:>7}")


if __name__ == "__main__":
    main()

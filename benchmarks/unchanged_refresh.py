"""A whole unchanged `korpus refresh` of N letters, as a user runs it (#47 item 2), against `find | wc -l` and against
`find` that stats every file, side by side on the same tree.

    .venv/bin/python benchmarks/unchanged_refresh.py --files 10000 [--repeat 3] [--keep DIR] [--json]

The tree is benchmarks/scale.py's letters (a one-page PDF every tenth). The index under it is built once by the
default refresh — discovery, reading, chunking, the gate, publishing, the meta-documents — **with the embedding
model's passages replaced by random unit vectors** (build only, so 100,000 letters take minutes, not the hour and a
half e5-small takes on two cores): an unchanged refresh never embeds a chunk, so what it is measured on is the
catalog, the readings and the meta-documents' fingerprints a real refresh leaves. `--keep DIR` keeps (and reuses) the
tree and index.

Measured, `--repeat` times, interleaved so a noisy machine slows them alike:
- `korpus refresh --root TREE --data DATA --json` in a fresh process: wall time as a user sees it (the interpreter,
  imports, the catalog, discovery, the decision that nothing changed, its record), and the summary's own `seconds`;
- `find TREE -type f | wc -l`;
- `find TREE -type f -printf '%i %s %T@ %C@\\n' | wc -l`: find with a stat of each file (inode, size, both times —
  what korpus compares), the issue's bar being 10x of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scale import write_archive
from tasks.runtime.prefect_server import stop_server

ROOT = Path(__file__).resolve().parents[1]

BUILD = """
import hashlib, json, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import numpy as np
from tasks.retrieval import embedding

def random_vectors(self, texts):  # build only: the unchanged refresh measured after never embeds
    out = np.empty((len(texts), 384), dtype=np.float32)
    for row, text in enumerate(texts):
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        out[row] = np.random.default_rng(seed).standard_normal(384)
    return out / np.linalg.norm(out, axis=1, keepdims=True)

embedding.Embedder.embed_passages = random_vectors
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
start = time.perf_counter()
summary = run_refresh(Path({archive!r}), Settings(data=Path({data!r})))
print(json.dumps({{"seconds": time.perf_counter() - start, "sources": summary["sources"],
                  "chunks": summary["chunks_indexed"], "quarantined": summary["quarantined"]}}))
"""


def _env(home: Path) -> dict[str, str]:
    env = dict(
        os.environ, PREFECT_LOGGING_LEVEL="WARNING", PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_HOME=str(home)
    )
    env.pop("PREFECT_API_URL", None)
    return env


def build(archive: Path, data: Path, home: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", BUILD.format(root=str(ROOT), archive=str(archive), data=str(data))],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=14400,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def korpus_refresh(archive: Path, data: Path, home: Path) -> tuple[float, dict]:
    """`korpus refresh --json` in a fresh process: its wall seconds and its summary."""
    korpus = Path(sys.executable).with_name("korpus")
    started = time.perf_counter()
    done = subprocess.run(
        [str(korpus), "refresh", "--root", str(archive), "--data", str(data), "--json"],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return wall, json.loads(done.stdout[done.stdout.index("{") : done.stdout.rindex("}") + 1])


def shell_seconds(command: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, shell=True, check=True, capture_output=True)
    return time.perf_counter() - started


def measure(files: int, repeat: int, keep: Path | None) -> dict:
    work = keep or Path(tempfile.mkdtemp(prefix="korpus-unchanged-"))
    archive, data, home = work / "archive", work / "data", work / "prefect"
    row: dict = {"files": files}
    if not archive.exists():
        write_archive(archive, files)
    try:
        if not (data / "korpus.db").exists():
            row["build"] = build(archive, data, home)
        korpus_refresh(archive, data, home)  # the server up and the page cache warm, as for the find runs
        walls, bodies, finds, stats = [], [], [], []
        for _ in range(repeat):
            wall, summary = korpus_refresh(archive, data, home)
            if set(summary["changes"]) - {"unchanged"} or summary["chunks_indexed"] or summary["relabelled"]:
                raise SystemExit(f"the tree was not unchanged: {summary}")
            walls.append(wall)
            bodies.append(summary["seconds"])
            finds.append(shell_seconds(f"find '{archive}' -type f | wc -l"))
            stats.append(shell_seconds(f"find '{archive}' -type f -printf '%i %s %T@ %C@\\n' | wc -l"))
    finally:
        stop_server(home)
    wall, find, stat = statistics.median(walls), statistics.median(finds), statistics.median(stats)
    row.update(
        {
            "korpus_wall_s": round(wall, 3),
            "korpus_flow_s": round(statistics.median(bodies), 3),
            "find_s": round(find, 4),
            "find_stat_s": round(stat, 4),
            "x_find": round(wall / find, 1),
            "x_find_stat": round(wall / stat, 1),
            "per_file_ms": round(1000 * wall / files, 4),
        }
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the tree and index here, one folder per size")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(n, args.repeat, args.keep / str(n) if args.keep else None) for n in args.files]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    print("| files | korpus refresh (wall) | its flow | find \\| wc -l | find + stat | × find | × find + stat |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['files']:,} | {r['korpus_wall_s']} s | {r['korpus_flow_s']} s | {r['find_s']} s | "
            f"{r['find_stat_s']} s | {r['x_find']} | {r['x_find_stat']} |"
        )


if __name__ == "__main__":
    main()

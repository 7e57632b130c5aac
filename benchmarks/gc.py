"""Disk use of a real archive refreshed with every file changed three times, before and after `korpus gc`.

    .venv/bin/python benchmarks/gc.py [ROOT] [--json]

ROOT defaults to ../shared/data/real-archive, else the repository's tests/fixtures/real-archive (both dedoc's real
documents, Apache-2.0). It is copied into a temporary root with a manifest and refreshed by the real flow with the
default settings (meta-documents on, gc after each refresh on, retention 30 days); then every file is changed and
refreshed again, three times — a change that keeps each file readable: a text file gets a line, a DOCX a new zip
comment, every other file bytes after its end (PDF, image, DjVu and audio readers stop at their own end marker;
a reader that does not is quarantined like any damaged file, and is counted). Measured: the data directory's size
and the catalog's row counts after the four refreshes, then `korpus gc --older-than 0` (everything superseded),
then `--vacuum` (the index file rewritten to its size), then a refresh with nothing changed (the index must answer as
before: same current chunks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.retention import collect_garbage, disk_use
from tasks.index.sqlite import SqliteIndex

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "real-archive"
FIXTURE = REPO / "tests" / "fixtures" / "real-archive"
MANIFEST = "defaults:\n  owner: Архив\n  access: public\n"


def change(path: Path, round_: int) -> None:
    """A new version of the file that its reader still reads."""
    if path.suffix.lower() in (".txt", ".md", ".csv"):
        with path.open("ab") as handle:
            handle.write(f"\nПравка {round_}.\n".encode())
    elif path.suffix.lower() in (".docx", ".odt", ".xlsx"):
        with zipfile.ZipFile(path, "a") as archive:
            archive.comment = f"правка {round_}".encode()
    else:
        with path.open("ab") as handle:
            handle.write(f"\n%korpus-benchmark-change-{round_}\n".encode())


def counts(settings: Settings) -> dict[str, int]:
    with SqliteIndex(settings.index_path) as index:
        one = lambda sql: index.conn.execute(sql).fetchall()[0][0]  # noqa: E731
        return {
            "versions": one("SELECT count(*) FROM sources"),
            "superseded_versions": one("SELECT count(*) FROM sources WHERE lifecycle != 'current'"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "current_chunks": one("SELECT count(*) FROM chunks WHERE lifecycle = 'current'"),
            "fts_rows": one("SELECT count(*) FROM chunk_terms_docsize"),
            "pages": one("SELECT count(*) FROM pages"),
            "quarantine_open": one("SELECT count(*) FROM quarantine WHERE status = 'open'"),
        }


def sizes(settings: Settings) -> dict[str, float]:
    data = settings.data
    parts = {
        "index": data / "korpus.db",
        "page_cache": data / "cache" / "pages",
        "converted": data / "converted",
        "searchable": data / "searchable",
        "evidence": data / "evidence",
    }
    out = {"total_mb": round(disk_use(data) / 1e6, 2)}
    for name, path in parts.items():
        size = (
            (path.stat().st_size + sum(p.stat().st_size for p in data.glob("korpus.db-*")))
            if name == "index"
            else disk_use(path)
        )
        out[f"{name}_mb"] = round(size / 1e6, 2) if path.exists() else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=SHARED if SHARED.is_dir() else FIXTURE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="korpus-gc-"))
    root = work / "archive"
    shutil.copytree(args.root, root, ignore=shutil.ignore_patterns("LICENSE", "README.md", "*.json"))
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    settings = Settings(data=work / "data")
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "korpus.yaml")
    report: dict = {"root": str(args.root), "files": len(files), "refreshes": []}
    for round_ in range(4):
        if round_:
            for path in files:
                change(path, round_)
        started = time.perf_counter()
        summary = run_refresh(root, settings)
        report["refreshes"].append(
            {
                "round": round_,
                "seconds": round(time.perf_counter() - started, 1),
                "changes": summary["changes"],
                "quarantined": summary["quarantined"],
            }
        )
    report["before_gc"] = {**counts(settings), **sizes(settings)}
    started = time.perf_counter()
    collected = collect_garbage(settings, retention_days=0)
    report["gc"] = {
        **{k: collected[k] for k in ("versions", "chunks", "files", "file_bytes")},
        "seconds": round(time.perf_counter() - started, 2),
    }
    report["after_gc"] = {**counts(settings), **sizes(settings)}
    started = time.perf_counter()
    collect_garbage(settings, retention_days=0, vacuum=True)  # the index file rewritten to its size
    report["after_gc_vacuum"] = {**sizes(settings), "seconds": round(time.perf_counter() - started, 2)}
    again = run_refresh(root, settings)
    report["refresh_after_gc"] = {
        "changes": again["changes"],
        "chunks_embedded": again["chunks_embedded"],
        **counts(settings),
    }
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print(f"{report['files']} files from {report['root']}, every file changed three times")
    for row in report["refreshes"]:
        print(f"  refresh {row['round']}: {row['seconds']} s, {row['changes']}, {row['quarantined']} quarantined")
    for label in ("before_gc", "after_gc", "after_gc_vacuum"):
        print(f"  {label}: {report[label]}")
    print(f"  gc: {report['gc']}")
    print(f"  refresh after gc: {report['refresh_after_gc']}")


if __name__ == "__main__":
    main()

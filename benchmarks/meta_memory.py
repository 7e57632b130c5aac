"""Peak memory and time of the meta-documents' build alone, at a size a whole refresh takes an hour to reach (#32).

scale.py's letters are written and indexed once by its plain loop (no meta-documents); their catalog rows and chunks
are then repeated `--repeat` times under folders `k1/`, `k2/` … (the same letters, other sources: the facts,
registers and table of contents grow as with that many letters); then, in a fresh process per build, the models are
loaded (embedder, tokenizer, NER tagger) and `build_meta_documents` runs as the flow runs it, on a fresh copy of that
data directory. The kernel's high-water mark of resident memory (VmHWM) is read once the models are loaded and
again after the build, so what the build adds is their difference. Run it from two checkouts to compare two versions.

    .venv/bin/python benchmarks/meta_memory.py --letters 20000 --repeat 5       # 100,000 letters' meta-documents
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import ROOT, in_fresh_process, plain_loop, write_archive

BUILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
def peak():  # the kernel's high-water mark of this process's resident memory, in MB
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))
from korpus.core.settings import Settings
from korpus.core.model_store import embed_model_path
from flows.refresh_tasks import embed_threads
from flows.after_documents import build_meta_documents
from tasks.retrieval.embedding import shared_embedder, token_counter
from tasks.meta.ner import ner_spans
settings = Settings(data=Path({data!r}))
shared_embedder(str(embed_model_path(settings)), threads=embed_threads(settings)).embed_passages(["прогрев"])
token_counter(str(embed_model_path(settings)))
ner_spans(["Иванов Иван Иванович пришёл."])
models = peak()
start = time.perf_counter()
done = build_meta_documents.fn(settings)
seconds, top = time.perf_counter() - start, peak()
print(json.dumps({{"seconds": round(seconds, 1), "models_peak_mb": round(models), "peak_rss_mb": round(top),
                  "added_mb": round(top - models), "parts_embedded": done.get("parts_embedded"),
                  "facts_extracted": done.get("facts_extracted")}}))
"""


def repeat_letters(data: Path, times: int) -> int:
    """The letters' catalog rows and chunks repeated under `k1/` … `k{times-1}/`; returns the current sources."""
    connection = sqlite3.connect(data / "korpus.db")
    source_columns = [row[1] for row in connection.execute("PRAGMA table_info(sources)")]
    chunk_columns = [row[1] for row in connection.execute("PRAGMA table_info(chunks)") if row[1] != "rowid"]
    renamed = lambda columns, prefix, names: ", ".join(  # noqa: E731
        f"'{prefix}' || {c}" if c in names else c for c in columns
    )
    with connection:
        for n in range(1, times):
            prefix = f"k{n}/"
            connection.execute(
                f"INSERT INTO sources ({', '.join(source_columns)}) SELECT "
                f"{renamed(source_columns, prefix, ('source_id', 'path'))} FROM sources WHERE source_id LIKE 'дела_%'"
            )
            connection.execute(
                f"INSERT INTO chunks ({', '.join(chunk_columns)}) SELECT "
                f"{renamed(chunk_columns, prefix, ('source_id', 'chunk_id'))} FROM chunks WHERE source_id LIKE 'дела_%'"
            )
    count = connection.execute("SELECT count(*) FROM sources WHERE lifecycle = 'current'").fetchone()[0]
    connection.close()
    return int(count)


def build(data: Path, work: Path) -> dict:
    """The build on a fresh copy of `data`, in a fresh process."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(data, work)
    return in_fresh_process(BUILD.format(root=str(ROOT), data=str(work)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--letters", type=int, default=1000, help="letters written and indexed once")
    parser.add_argument("--repeat", type=int, default=1, help="the letters' rows repeated this many times in all")
    parser.add_argument("--builds", type=int, default=1, help="builds, each in a fresh process (the machine drifts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="korpus-meta-memory-") as tmp:
        archive, data = Path(tmp) / "archive", Path(tmp) / "data"
        write_archive(archive, args.letters)
        indexed = plain_loop(archive, data)
        sources = repeat_letters(data, args.repeat)
        runs = [build(data, Path(tmp) / "work") for _ in range(args.builds)]
    print(
        json.dumps(
            {"letters": args.letters, "sources": sources, "plain_loop_s": round(indexed["seconds"], 1), "builds": runs},
            ensure_ascii=False,
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

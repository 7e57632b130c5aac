"""A folder of many small files through `korpus refresh`: time per file, peak memory and time to the first searchable
document, against the same stages in a plain loop (issue #14, #32 item 1), side by side in one run.

Generated archive: one-paragraph letters (.txt) and, every tenth file, a one-page born-digital PDF. Since session 15
each letter names what real letters name — an addressee (an organisation and a person with initials), a date, and
the person who wrote it in full — so the registers' NER has real work (the letters before were word salad alone). Each
configuration refreshes the same archive into its own data directory, in a fresh Python process (so peak RSS is
its own), with the same models and cores:

- `default` — what `korpus refresh` does with no settings: documents streamed to the index (32 documents or 128
  pages a group, embedded while later files are read) and then the meta-documents (table of contents, chronology,
  registers) built and indexed; `meta_s` is their share;
- `meta off` — the same with KORPUS_META_DOCUMENTS=false (a labelled row, not the headline);
- `default, NER on every sentence` — KORPUS_NER_ALL_SENTENCES=1: the registers' NER tags every sentence, not only
  those that may name someone (tasks/meta/ner.py; a labelled row);
- `per document, meta off` — KORPUS_INDEX_GROUP_SOURCES=1: each document embedded and published alone (korpus
  before #14); only up to `--per-document-max` files;
- `default into OpenSearch` (with `--opensearch`) — the default with KORPUS_BACKEND=opensearch on a real node korpus
  starts for the run (infra/opensearch/node): the same refresh, then the catalog mirrored to the node (a labelled row);
- `plain loop` — what a competent engineer writes without korpus (#47 item 3): every file read and cut into the same
  chunks by korpus's reader and chunker (so the same text is embedded), then the model folder's fast tokenizer with
  padding, ONNX Runtime in batches of 32, mean pooling, and one SQLite transaction into an FTS5 table and a vector
  table. No gate, no catalog, no quarantine, no Prefect, no Dask, no meta-documents: the floor (issue: the default
  refresh ≥ 0.85 × its throughput). Its first searchable chunk is at its end (one transaction). It runs before and
  after the refreshes and the two are averaged: this machine's speed drifts by ±15 %. Until session 25 this loop
  embedded through korpus's own `Embedder` in batches of 32 documents — it inherited korpus's slow batches and
  flattered the ratio.

Every refresh talks to korpus's local Prefect server, as a user's does (tasks/runtime/prefect_server.py): a
two-file refresh starts it first, so no measured run pays for its start; it is stopped at the end.

    .venv/bin/python benchmarks/scale.py                                # 100 files
    .venv/bin/python benchmarks/scale.py --files 1000 10000
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tasks.runtime.prefect_server import stop_server

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "приказ договор поставка насос протокол заседание комиссия записка отпуск ремонт кровля склад акт сверка "
    "расчёт квартал поставщик оборудование смета архив опись дело фонд письмо ответ запрос справка отдел "
    "кадры премия сотрудник бухгалтерия счёт оплата накладная"
).split()
MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\n"
SURNAMES = (
    "Смирнов Иванов Кузнецов Попов Васильев Петров Соколов Михайлов Новиков Фёдоров Морозов Волков Алексеев "
    "Лебедев Семёнов Егоров Павлов Козлов Степанов Николаев"
).split()
WOMEN, MEN = "Анна Ольга Елена Мария Наталья".split(), "Сергей Игорь Павел Андрей Дмитрий".split()
PATRONYMICS = ("Иванов", "Петров", "Сергеев", "Андреев", "Николаев", "Олегов", "Викторов", "Юрьев")
ORGS = (
    "ООО «Северный склад»",
    "АО «Волга-Снаб»",
    "ООО «Кровля-Сервис»",
    "ГБУ «Городской архив»",
    "Администрация города Твери",
    "ФНС России",
    "ООО «Насосные системы»",
    "ПАО «Региональная сеть»",
)


def _person(rng: random.Random, full: bool) -> str:
    """«Елена Викторовна Алексеева» or «Петров С. О.»: a name, patronymic and surname of one gender."""
    woman = rng.random() < 0.5
    first = rng.choice(WOMEN if woman else MEN)
    middle = rng.choice(PATRONYMICS) + ("на" if woman else "ич")
    surname = rng.choice(SURNAMES) + ("а" if woman else "")
    return f"{first} {middle} {surname}" if full else f"{surname} {first[0]}. {middle[0]}."


def write_archive(root: Path, files: int, seed: int = 14) -> None:
    import pymupdf

    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for n in range(files):
        date = f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.{rng.randint(2015, 2024)}"
        text = (
            f"Кому: {rng.choice(ORGS)}, {_person(rng, False)}\nПисьмо № {n + 1} от {date}.\n"
            + " ".join(
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
                for _ in range(rng.randint(2, 5))
            )
            + f"\nИсполнитель: {_person(rng, True)}"
        )
        folder = root / f"дела_{n // 100:03d}"
        folder.mkdir(exist_ok=True)
        if n % 10 == 9:
            doc = pymupdf.open()
            doc.new_page(width=595, height=842).insert_textbox(
                pymupdf.Rect(60, 60, 540, 780),
                text,
                fontsize=12,
                fontname="dejavu",
                fontfile="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            )
            doc.save(folder / f"письмо_{n + 1:05d}.pdf")
        else:
            (folder / f"письмо_{n + 1:05d}.txt").write_text(text, encoding="utf-8")


RUN = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.embedding import shared_embedder
from korpus.core.model_store import embed_model_path
from flows.refresh_tasks import embed_threads
settings = Settings(data=Path({data!r}))  # KORPUS_META_DOCUMENTS / KORPUS_INDEX_GROUP_SOURCES from the environment
# models loaded before the clock starts, as the plain loop's are: the embedder the refresh's tasks use (one per
# thread count) and the tokenizer that measures chunks
from tasks.retrieval.embedding import token_counter
model = str(embed_model_path(settings))
shared_embedder(model, threads=embed_threads(settings)).embed_passages(["прогрев"])
token_counter(model)
from datetime import datetime
began = time.time()
start = time.perf_counter()
summary = run_refresh(Path({archive!r}), settings)
seconds = time.perf_counter() - start
with SqliteIndex(settings.index_path) as index:
    first = index.conn.execute("SELECT min(switched_at) FROM sources").fetchall()[0][0]
meta = summary["meta_documents"] or {{}}
print(json.dumps({{"seconds": seconds, "flow_body_s": summary["seconds"], "chunks": summary["chunks_indexed"],
                  "sources": summary["sources"], "meta_s": meta.get("seconds"),
                  "meta_parts_embedded": meta.get("parts_embedded"),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "first_searchable_s": datetime.fromisoformat(first).timestamp() - began}}))
"""


PLAIN = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from benchmarks.plain_loop import PlainLoop, store
from korpus.core.settings import Settings
from korpus.core.model_store import embed_model_path
from tasks.contract.chunking import build_chunks
from tasks.parse import read_source
from tasks.receive import discover_sources
from tasks.retrieval.embedding import token_counter
settings = Settings(data=Path({data!r}), meta_documents=False)
folder = embed_model_path(settings)
loop = PlainLoop(folder, sort=True)  # length-sorted batches of 32: the best count-sized batch here
count = token_counter(str(folder))
loop.embed(["прогрев"])  # warm, as the refresh runs are
start = time.perf_counter()
texts, names = [], []
for source in discover_sources(Path({archive!r})):
    pages = read_source(source, settings).pages
    chunks, _empty = build_chunks(source, pages, settings.chunk_policy, count=count, language="ru")
    texts += [c.text for c in chunks]
    names += [source.source_id] * len(chunks)
store(Path({data!r}) / "plain.db", names, texts, loop.embed(texts))
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "chunks": len(texts), "sources": len(set(names)),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "first_searchable_s": seconds}}))
"""


def in_fresh_process(script: str, env: dict[str, str] | None = None) -> dict:
    """Runs `script` in a fresh Python process (so its peak RSS is its own) and returns the JSON of its last line;
    `env` defaults to this process's with Prefect's logging at WARNING."""
    env = env if env is not None else dict(os.environ, PREFECT_LOGGING_LEVEL="WARNING")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=14400)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def plain_loop(archive: Path, data: Path) -> dict:
    """The same stages over the same files in one plain loop: the floor korpus's orchestration is measured against."""
    return in_fresh_process(PLAIN.format(root=str(ROOT), data=str(data), archive=str(archive)))


def refresh(
    archive: Path, data: Path, prefect_home: Path, group: int | None = None, meta: bool = True, **extra: str
) -> dict:
    """One refresh in a fresh process on korpus's local server under `prefect_home`; `group` sets
    KORPUS_INDEX_GROUP_SOURCES (None: korpus's default), `meta` KORPUS_META_DOCUMENTS, `extra` more variables."""
    env = dict(
        os.environ,
        PREFECT_LOGGING_LEVEL="WARNING",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_HOME=str(prefect_home),
        KORPUS_META_DOCUMENTS=str(meta).lower(),
        **extra,
    )
    env.pop("KORPUS_INDEX_GROUP_SOURCES", None)
    env.pop("PREFECT_API_URL", None)
    if group is not None:
        env["KORPUS_INDEX_GROUP_SOURCES"] = str(group)
    return in_fresh_process(RUN.format(root=str(ROOT), data=str(data), archive=str(archive)), env)


def unchanged_refresh(archive: Path, data: Path, home: Path) -> dict:
    """The default refresh again over the same, unchanged tree into the data directory the default filled (#32 item
    4: nothing is read, hashed or embedded again), against `find ARCHIVE -type f | wc -l` on the same tree."""
    started = time.perf_counter()
    again = refresh(archive, data, home)
    wall = time.perf_counter() - started
    started = time.perf_counter()
    found = subprocess.run(f"find '{archive}' -type f | wc -l", shell=True, capture_output=True, text=True, check=True)
    find_s = time.perf_counter() - started
    return {
        "seconds": round(again["seconds"], 2),
        "wall_s": round(wall, 1),
        "chunks": again["chunks"],
        "find_wc_l_s": round(find_s, 3),
        "files_found": int(found.stdout.strip()),
        "÷ find | wc -l": round(again["seconds"] / find_s, 1),
    }


def _measure(
    tmp: Path,
    files: int,
    home: Path,
    per_document_max: int,
    without: tuple[str, ...] = (),
    plain_files: int = 0,
    unchanged: bool = False,
    opensearch: str | None = None,
) -> dict:
    """One archive of `files` letters through every configuration; `plain_files` runs the plain loop on the archive's
    first that many letters (the same files: one seed; 0: all) and compares seconds per file, `unchanged` times a
    second default refresh over the unchanged tree."""
    archive = tmp / f"archive-{files}"
    write_archive(archive, files)
    plain_files = min(plain_files or files, files)
    plain_archive = archive
    if plain_files < files:
        plain_archive = tmp / f"archive-{files}-first-{plain_files}"
        write_archive(plain_archive, plain_files)
    row: dict = {}
    before = plain_loop(plain_archive, tmp / f"data-{files}-plain-before")  # the machine drifts: the baseline runs
    configs = [
        ("default", None, True, {}),
        ("meta off", None, False, {}),
        ("default, NER on every sentence", None, True, {"KORPUS_NER_ALL_SENTENCES": "1"}),
    ]
    if files <= per_document_max:
        configs.append(("per document, meta off", 1, False, {}))
    if opensearch:
        configs.append(
            (
                "default into OpenSearch",
                None,
                True,
                {
                    "KORPUS_BACKEND": "opensearch",
                    "KORPUS_OPENSEARCH_URL": opensearch,
                    "KORPUS_OPENSEARCH_PREFIX": f"scale{files}",
                },
            )
        )
    configs = [c for c in configs if c[0] not in without or c[0] == "default"]
    for label, group, meta, extra in configs:
        started = time.perf_counter()
        result = refresh(archive, tmp / f"data-{files}-{label}", home, group, meta, **extra)
        result["wall_s"] = round(time.perf_counter() - started, 1)
        result["s_per_file"] = round(result["seconds"] / files, 4)
        row[label] = result
        if label == "default" and unchanged:
            row["unchanged refresh (default, again)"] = unchanged_refresh(archive, tmp / f"data-{files}-{label}", home)
    after = plain_loop(plain_archive, tmp / f"data-{files}-plain-after")  # before and after, and is averaged
    plain = {
        **after,
        "seconds": (before["seconds"] + after["seconds"]) / 2,
        "files": plain_files,
        "runs_s": [round(before["seconds"], 2), round(after["seconds"], 2)],
        "peak_rss_mb": max(before["peak_rss_mb"], after["peak_rss_mb"]),
    }
    per_file = plain["seconds"] / plain_files  # the ratios use the unrounded seconds a file
    plain["s_per_file"] = round(per_file, 4)
    row["plain loop" if plain_files == files else f"plain loop, first {plain_files} files"] = plain
    default = row["default"]
    row["default throughput ÷ plain loop (s/file)"] = round(per_file / (default["seconds"] / files), 3)
    row["meta-documents share of the default refresh"] = round((default["meta_s"] or 0) / default["seconds"], 3)
    if "meta off" in row:
        off = row["meta off"]["seconds"] / files
        row["meta off throughput ÷ plain loop"] = round(per_file / off, 3)
        row["orchestration share, meta off (1 − plain ÷ refresh)"] = round(1 - per_file / off, 3)
    else:  # no meta-off row: the default's documents part is the refresh less its meta-documents
        documents = (default["seconds"] - (default["meta_s"] or 0)) / files
        row["orchestration share, default less meta (1 − plain ÷ refresh)"] = round(1 - per_file / documents, 3)
    row["first searchable ÷ whole refresh (default)"] = round(default["first_searchable_s"] / default["seconds"], 3)
    if opensearch:
        row["default into OpenSearch ÷ default into SQLite (s)"] = round(
            row["default into OpenSearch"]["seconds"] / default["seconds"], 3
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, nargs="+", default=[100])
    parser.add_argument(
        "--per-document-max",
        type=int,
        default=300,
        help="run the per-document configuration only up to this many files (it is slow)",
    )
    parser.add_argument(
        "--without",
        nargs="*",
        default=[],
        metavar="ROW",
        help='labelled rows to leave out (e.g. "default, NER on every sentence"); never the default',
    )
    parser.add_argument(
        "--plain-files",
        type=int,
        default=0,
        help="run the plain loop on the archive's first N files only and compare seconds per file (a 100,000-file "
        "plain loop run twice does not fit beside the refresh); 0: all files",
    )
    parser.add_argument(
        "--unchanged",
        action="store_true",
        help="after the default, refresh the unchanged tree again and time it against find | wc -l (#32 item 4)",
    )
    parser.add_argument(
        "--opensearch",
        action="store_true",
        help="add the default refresh into a real OpenSearch node started for the run",
    )
    args = parser.parse_args()
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="korpus-scale-") as tmp:
        home = Path(tmp) / "prefect-home"
        node = None
        try:
            if args.opensearch:
                from tasks.runtime.opensearch_node import start

                (node,) = start(Path(tmp) / "opensearch", port=None, heap_mb=2048, detach=False, log=sys.stderr)
            write_archive(Path(tmp) / "warm-up", 2)  # starts korpus's local server: no measured run pays for it
            refresh(Path(tmp) / "warm-up", Path(tmp) / "data-warm-up", home)
            for files in args.files:
                report[files] = _measure(
                    Path(tmp),
                    files,
                    home,
                    args.per_document_max,
                    tuple(args.without),
                    plain_files=args.plain_files,
                    unchanged=args.unchanged,
                    opensearch=node.url if node else None,
                )
        finally:
            stop_server(home)
            from tasks.runtime.opensearch_node import stop_leashed

            stop_leashed()
        if len(args.files) >= 2:
            small, big = report[args.files[0]]["default"], report[args.files[-1]]["default"]
            report["time per file, largest ÷ smallest"] = round(big["s_per_file"] / small["s_per_file"], 3)
            report["peak RSS, largest ÷ smallest"] = round(big["peak_rss_mb"] / small["peak_rss_mb"], 3)
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

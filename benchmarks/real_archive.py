"""A real Russian archive through `korpus refresh`: what was indexed, what was refused, and whether any born-digital
layer was replaced or any broken one missed.

    .venv/bin/python benchmarks/real_archive.py [ROOT] [--json]

ROOT defaults to ../shared/data/real-archive (third-party documents from dedoc's tests, Apache-2.0): folders
digital/ (born-digital PDFs), broken-layer/, office/, text/, scans/. It is copied into a temporary root with a
manifest (owner and access for everything), refreshed once by the real flow, and read back from the catalog:
- per file: kind, pages, how each page was read (text layer kept / layer kept after an OCR check / OCR), chunks,
  and quarantine reasons;
- born-digital pages (digital/, office/) whose layer was replaced by OCR — target 0;
- broken-layer pages caught (read by OCR instead of the layer) — target all;
- for born-digital PDF pages, the word F1 between the text korpus keeps for the page and `pdftotext` of it —
  target ≥ 0.98;
- the Cyrillic phrases dedoc's own tests assert for these files (headings, table cells), found in korpus's text;
- the refresh's wall time;
- `--part rotation`: real upright scans turned 90/180/270°, read with orientation detection: word F1 to the
  upright reading (target ≥ 0.9);
- `--part broken-layers`: `korpus ocr` on each broken-layer PDF — old words left in pdftotext of the output
  (target 0), Cyrillic share of its letters (≥ 0.9), size growth (≤ 2 %), and the copy's words against the words
  indexed for each page, both ways (target 0);
- `--part office` (ROOT defaults to ../shared/data/real-archive-2: letters, spreadsheets, web pages, e-books, Word
  97): the refresh in the default configuration, then for every source — files on disk and the child sources
  letters and archives gave — kind, pages, chunks and reasons, and a **probe**: a phrase taken from the source's own
  text (the first eight words of its longest line of at least six words), searched as a user does (hybrid, the
  default scopes); found when a hit of that source is at rank ≤ 3 and its citation starts with the source's name.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import apsw

from flows.corpus_refresh import run_refresh
from korpus.core.datamodel import PageResult
from korpus.core.settings import Settings
from tasks.text.quality import word_f1

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "real-archive"
FIXTURE_ROOT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real-archive"  # a subset, same licence
MANIFEST = "defaults:\n  owner: Архив\n  access: public\n"
BORN_DIGITAL = ("digital/", "office/")


def pdftotext_page(path: Path, page: int) -> str:
    done = subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), str(path), "-"], capture_output=True)
    return done.stdout.decode("utf-8", "replace")


def read_catalog(db: Path) -> tuple[dict[str, list[PageResult]], dict[str, int], dict[str, list[str]]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    pages: dict[str, list[PageResult]] = {}
    for source_id, raw in conn.execute(
        "SELECT p.source_id, p.page FROM pages p JOIN sources s ON s.source_id = p.source_id "
        "AND s.version = p.version WHERE s.lifecycle = 'current' ORDER BY p.source_id, p.ordinal"
    ):
        pages.setdefault(source_id, []).append(PageResult.model_validate_json(raw))
    chunks = dict(conn.execute("SELECT source_id, count(*) FROM chunks WHERE lifecycle = 'current' GROUP BY source_id"))
    reasons: dict[str, list[str]] = {}
    for source_id, codes in conn.execute("SELECT source_id, reasons FROM quarantine"):
        reasons.setdefault(source_id, []).extend(json.loads(codes))
    return pages, chunks, reasons


_QUOTED = re.compile(r'"([^"]*[А-Яа-яЁё][^"]*)"')


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("ё", "е").split())


def expected_phrases(root: Path, files: list[str], pages: dict[str, list[PageResult]]) -> dict[str, list[int]]:
    """Cyrillic strings dedoc's own tests assert for these files (`expected-from-dedoc-tests.json`): how many
    are found in the text korpus keeps for the file, by folder — [found, total]."""
    listing = root / "expected-from-dedoc-tests.json"
    if not listing.is_file():
        return {}
    by_name = {Path(f).name: f for f in files}
    found: dict[str, list[int]] = {}
    for entry in json.loads(listing.read_text(encoding="utf-8")):
        for name in entry["files"]:
            source_id = by_name.get(Path(name).name)
            if source_id is None:
                continue
            text = _normal(" ".join(p.text for p in pages.get(source_id, [])))
            for assertion in entry.get("cyrillic_assertions", []):
                for phrase in _QUOTED.findall(assertion):
                    tally = found.setdefault(source_id.split("/")[0], [0, 0])
                    tally[0] += _normal(phrase) in text
                    tally[1] += 1
    return found


def how_read(page: PageResult) -> str:
    if page.layer_check is not None:
        return page.layer_check.decision
    return {"text-layer": "layer", "plain-text": "text"}.get(page.method, page.method)


def refreshed_copy(root: Path) -> tuple[Path, Settings, dict, float]:
    """The folder copied into a temporary root with a manifest (owner and access for everything) and refreshed
    once by the real flow in the default configuration: (root, settings, the refresh's summary, its seconds)."""
    work = Path(tempfile.mkdtemp(prefix="korpus-real-"))
    archive = work / "archive"
    shutil.copytree(root, archive, ignore=shutil.ignore_patterns("LICENSE*", "README.md", "*.json"))
    (archive / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    settings = Settings(data=work / "data")
    started = time.perf_counter()
    summary = run_refresh(archive, settings)
    return archive, settings, summary, time.perf_counter() - started


def run(root: Path) -> dict:
    archive, settings, summary, seconds = refreshed_copy(root)
    pages, chunks, reasons = read_catalog(settings.index_path)
    files = sorted(p.relative_to(archive).as_posix() for p in archive.rglob("*") if p.is_file())
    files = [f for f in files if f != "korpus.yaml"]
    rows, replaced, sims, broken = [], [], [], Counter()
    for source_id in files:
        read = Counter(how_read(p) for p in pages.get(source_id, []))
        rows.append(
            {
                "file": source_id,
                "pages": len(pages.get(source_id, [])),
                "read": dict(read),
                "chunks": chunks.get(source_id, 0),
                "quarantine": dict(Counter(reasons.get(source_id, []))),
            }
        )
        for page in pages.get(source_id, []):
            if source_id.startswith(BORN_DIGITAL) and (page.tier or 0) >= 1:
                replaced.append(f"{source_id} p{page.page}")
            if source_id.startswith("broken-layer/"):
                broken["caught" if (page.tier or 0) >= 1 else "missed"] += 1
            if source_id.startswith("digital/") and source_id.endswith(".pdf") and page.tier == 0:
                sims.append(word_f1(page.text, pdftotext_page(archive / source_id, page.page or 1)))
    indexed = [r for r in rows if r["chunks"]]
    return {
        "files": len(files),
        "indexed": len(indexed),
        "not_indexed": [(r["file"], r["quarantine"]) for r in rows if not r["chunks"]],
        "born_digital_pages_replaced": replaced,
        "broken_layer_pages": dict(broken),
        "born_digital_similarity_min": round(min(sims), 4) if sims else None,
        "born_digital_similarity_mean": round(sum(sims) / len(sims), 4) if sims else None,
        "born_digital_pages_compared": len(sims),
        "dedoc_expected_phrases_found": expected_phrases(root, files, pages),
        "refresh_seconds": round(seconds, 1),
        "summary": {
            k: summary[k]
            for k in ("pages_by_method", "layers_checked", "ocr_engine_calls", "chunks_indexed", "quarantine_reasons")
        },
        "rows": rows,
    }


OFFICE_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "real-archive-2"
_WORDS = re.compile(r"[^\W\d_][\w.,%№-]*", re.UNICODE)


def probe_phrase(pages: list[PageResult]) -> str | None:
    """Eight words from the source's longest line of six words or more (header lines of a letter skipped)."""
    lines = [
        line
        for p in pages
        for line in p.text.splitlines()
        if not line.startswith(("От:", "Кому:", "Копия:", "Дата:", "Тема:", "Вложения:"))
    ]
    lines = [line for line in lines if len(_WORDS.findall(line)) >= 6]
    if not lines:
        return None
    return " ".join(max(lines, key=len).replace("|", " ").split()[:8])


def office(root: Path) -> dict:
    """Letters, spreadsheets and the rest through the default refresh, with a phrase probe per source."""
    from korpus.core.datamodel import Source
    from korpus.core.model_build import set_offline_switches
    from korpus.core.model_store import embed_model_path
    from tasks.index.registry import backend_for
    from tasks.index.sqlite import SqliteIndex
    from tasks.retrieval.embedding import Embedder
    from tasks.retrieval.retriever import Retriever

    archive, settings, summary, seconds = refreshed_copy(root)
    pages, chunks, reasons = read_catalog(settings.index_path)
    set_offline_switches()
    embedder = Embedder(embed_model_path(settings))
    rows, probes = [], []
    with SqliteIndex(settings.index_path) as index:
        index.bind_embedding(embedder.name, embedder.dims)
        retriever = Retriever.from_settings(backend_for(settings, index), settings)
        catalog = [r for r in index.sources() if r["lifecycle"] == "current" and r["kind"] != "meta"]
        refused_only = sorted(set(reasons) - {r["source_id"] for r in catalog})
        for row in catalog:
            source_id = row["source_id"]
            rows.append(
                {
                    "source": source_id,
                    "kind": row["kind"],
                    "pages": row["pages"],
                    "chunks": chunks.get(source_id, 0),
                    "quarantine": dict(Counter(reasons.get(source_id, []))),
                }
            )
            phrase = probe_phrase(pages.get(source_id, []))
            if phrase is None or not chunks.get(source_id):
                continue
            name = Source(source_id=source_id, version="-", path="-").file_name
            hits = retriever.search(phrase, embedder.embed_queries([phrase])[0], settings.default_scopes, k=3)
            rank = next(
                (n for n, h in enumerate(hits, 1) if h["source_id"] == source_id and h["text"].startswith(f"[{name}")),
                None,
            )
            probes.append({"source": source_id, "phrase": phrase, "rank": rank})
    files = [p for p in archive.rglob("*") if p.is_file() and p.name != "korpus.yaml"]
    return {
        "files_on_disk": len(files),
        "sources": len(rows) + len(refused_only),
        "child_sources": sum(" › " in r["source"] for r in rows) + sum(" › " in s for s in refused_only),
        "indexed": sum(1 for r in rows if r["chunks"]),
        "refused": {s: dict(Counter(reasons[s])) for s in refused_only},
        "unsupported_type": sorted(s for s, codes in reasons.items() if "unsupported-type" in codes),
        "chunks": sum(r["chunks"] for r in rows),
        "probes_found_rank_le_3": f"{sum(1 for p in probes if p['rank'])}/{len(probes)}",
        "probes_missed": [p for p in probes if not p["rank"]],
        "refresh_seconds": round(seconds, 1),
        "summary": {k: summary[k] for k in ("chunks_indexed", "quarantine_reasons", "meta_documents")},
        "rows": rows,
    }


def broken_layers(root: Path) -> list[dict]:
    """`korpus ocr` on each broken-layer PDF: old words left in pdftotext of the output (target 0), Cyrillic
    share of its letters (≥ 0.9), size growth (≤ 2 %), and, page by page, the words pdftotext reads in the copy
    against the words korpus indexed for the page (each page's multiset difference, both ways, by
    `tasks.pdf.validate.layer_differences`; target 0)."""
    from tasks.parse import read_pdf
    from tasks.pdf.searchable import write_searchable_pdf
    from tasks.pdf.validate import layer_differences
    from tasks.text.quality import PageFacts, measure

    out = []
    work = Path(tempfile.mkdtemp(prefix="korpus-broken-"))
    for pdf in sorted((root / "broken-layer").glob("*.pdf")):
        target = work / pdf.name
        first, done = read_pdf(pdf, Settings(data=work / "data"))
        pages = first.pages + [p for outcome in done for p in outcome.pages]
        summary = write_searchable_pdf(str(pdf), pages, target)
        old = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
        new = subprocess.run(["pdftotext", str(target), "-"], capture_output=True, text=True).stdout
        old_words = {w for w in old.split() if len(w) >= 3 and any(ch.isalpha() for ch in w)}
        indexed = not_indexed = missing = 0
        for page in pages:
            if not page.page:
                continue
            args = ["pdftotext", "-f", str(page.page), "-l", str(page.page), str(target), "-"]
            extra, lacking = layer_differences(subprocess.run(args, capture_output=True, text=True).stdout, page.text)
            indexed += len(re.findall(r"\w+", page.text))
            not_indexed += sum(extra.values())
            missing += sum(lacking.values())
        out.append(
            {
                "file": pdf.name,
                "old_words_left": len(old_words & set(new.split())),
                "old_words": len(old_words),
                "cyrillic_share": round(measure(new, PageFacts())["cyrillic_share"], 3),
                "size_growth": summary["size_growth"],
                "indexed_words": indexed,
                "copy_words_not_indexed": not_indexed,
                "indexed_words_not_in_copy": missing,
            }
        )
    return out


ROTATION_PAGES = ("scans/law_image.png", "scans/platezhka.jpg", "scans/invoice.jpg", "scans/example_2_columns.png")


def rotations(root: Path) -> list[dict]:
    """Real upright scans turned 90/180/270°: word F1 of korpus's reading (orientation on) against its reading of
    the upright page (target ≥ 0.9), and whether the turn was found."""
    import io

    from PIL import Image

    from tasks.ocr.engine import PageImage
    from tasks.ocr.tesseract_engine import TesseractEngine

    engine = TesseractEngine()

    def page(image: Image.Image) -> PageImage:
        buffer = io.BytesIO()
        image.save(buffer, "PPM")
        return PageImage(buffer.getvalue(), 300, image.width * 0.24, image.height * 0.24)

    out = []
    for name in ROTATION_PAGES:
        upright = Image.open(root / name).convert("L")
        reference = engine.read(lambda dpi, fmt, im=upright: page(im), None).text
        for degrees in (90, 180, 270):
            turned = upright.rotate(-degrees, expand=True)
            read = engine.read(lambda dpi, fmt, im=turned: page(im), None)
            out.append(
                {
                    "file": name,
                    "turned": degrees,
                    "found": read.rotation == (360 - degrees) % 360,
                    "f1_to_upright": round(word_f1(read.text, reference), 3),
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--part", choices=["refresh", "broken-layers", "rotation", "office", "all"], default="all")
    args = parser.parse_args()
    if args.part == "office":
        result = office(args.root or (OFFICE_ROOT if OFFICE_ROOT.is_dir() else FIXTURE_ROOT.parent / "real-archive-2"))
        if not args.json:
            print("| source | kind | pages | chunks | quarantine |\n|---|---|---|---|---|")
            for r in result["rows"]:
                quarantine = ", ".join(f"{k} {v}" for k, v in r["quarantine"].items())
                print(f"| {r['source']} | {r['kind']} | {r['pages']} | {r['chunks']} | {quarantine} |")
            result = {k: v for k, v in result.items() if k != "rows"}
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return
    args.root = args.root or (DEFAULT_ROOT if DEFAULT_ROOT.is_dir() else FIXTURE_ROOT)  # a plain clone: the fixtures
    if args.part in ("broken-layers", "all"):
        for row in broken_layers(args.root):
            print(json.dumps(row, ensure_ascii=False))
    if args.part in ("rotation", "all"):
        for row in rotations(args.root):
            print(json.dumps(row, ensure_ascii=False))
    if args.part in ("broken-layers", "rotation"):
        return
    result = run(args.root)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return
    print("| file | pages | read as | chunks | quarantine |\n|---|---|---|---|---|")
    for r in result["rows"]:
        read = ", ".join(f"{k} {v}" for k, v in r["read"].items())
        quarantine = ", ".join(f"{k} {v}" for k, v in r["quarantine"].items())
        print(f"| {r['file']} | {r['pages']} | {read} | {r['chunks']} | {quarantine} |")
    print()
    for key, value in result.items():
        if key != "rows":
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()

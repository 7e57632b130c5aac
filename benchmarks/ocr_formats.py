"""OCR cost side by side: Tesseract `rus+eng` against `rus` alone, and a page as an image or DjVu against the same
page as a scanned PDF.

    .venv/bin/python benchmarks/ocr_formats.py [--pages 6] [--json]

Pages are XQuAD-ru paragraphs scanned at 300 dpi (benchmarks/ocr.py `scan_image`), interleaved run by run so both
sides of each ratio see the same machine load:
- languages: the Tesseract tier (`tasks/ocr/tesseract_engine.py`, orientation check off) on the same page images
  with `rus` and with `rus+eng` — seconds per page and the ratio (the cost of keeping Latin as printed);
- formats: the whole tier-1 path (the reader makes the page image, Tesseract reads it) for the page inside a PDF
  (JPEG), as a PNG file, and as a DjVu (c44) — seconds per page and each format's ratio to the PDF (target ≤ ~1).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ocr import _jpeg, paragraphs, scan_image
from korpus.core.datamodel import Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.tesseract_engine import TesseractEngine
from tasks.readers.registry import reader_for


def make_pages(folder: Path, count: int) -> list[dict[SourceKind, Path]]:
    pages = []
    for i, text in enumerate(paragraphs(count)):
        image = scan_image(text, seed=i)
        pdf, png, pgm, djvu = (folder / f"p{i}.{ext}" for ext in ("pdf", "png", "pgm", "djvu"))
        doc = pymupdf.open()
        doc.new_page(width=595, height=842).insert_image(pymupdf.Rect(0, 0, 595, 842), stream=_jpeg(image))
        doc.save(pdf)
        image.save(png, dpi=(300, 300))
        image.save(pgm)
        subprocess.run(["c44", "-dpi", "300", str(pgm), str(djvu)], check=True, capture_output=True)
        pages.append({SourceKind.pdf: pdf, SourceKind.image: png, SourceKind.djvu: djvu})
    return pages


def _read(kind: SourceKind, path: Path, engine: TesseractEngine, settings: Settings) -> float:
    source = Source(source_id=path.name, version="0" * 64, path=str(path), kind=kind)
    started = time.perf_counter()
    engine.read(reader_for(kind).page_image(source, 1, settings), None)
    return time.perf_counter() - started


def run(count: int) -> dict:
    settings = Settings()
    with tempfile.TemporaryDirectory(prefix="korpus-ocr-formats-") as tmp:
        pages = make_pages(Path(tmp), count)
        engines = {lang: TesseractEngine(language=lang, orientation=False) for lang in ("rus", "rus+eng")}
        lang_time = dict.fromkeys(engines, 0.0)
        kind_time = dict.fromkeys(pages[0], 0.0)
        for page in pages:
            for lang, engine in engines.items():
                lang_time[lang] += _read(SourceKind.pdf, page[SourceKind.pdf], engine, settings)
            for kind, path in page.items():
                kind_time[kind] += _read(kind, path, engines["rus+eng"], settings)
    return {
        "pages": count,
        "s_per_page": {k: round(v / count, 3) for k, v in lang_time.items()},
        "rus_eng_over_rus": round(lang_time["rus+eng"] / lang_time["rus"], 3),
        "format_s_per_page": {k.value: round(v / count, 3) for k, v in kind_time.items()},
        "format_over_pdf": {k.value: round(v / kind_time[SourceKind.pdf], 3) for k, v in kind_time.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.pages)
    print(json.dumps(result, ensure_ascii=False, indent=None if args.json else 1))


if __name__ == "__main__":
    main()

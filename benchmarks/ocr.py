"""PDF ingestion: OCR throughput, the tier-0 saving, unchanged re-runs, searchable-PDF writing, CER, detector.

    .venv/bin/pip install -e ".[bench]"        # ocrmypdf, for the side-by-side runs
    .venv/bin/python benchmarks/ocr.py [--part NAME ...] [--json]

Parts (all by default), each measured side by side in this one process on the same pages and cores:
  throughput  korpus (per-page Tesseract, 2 threads) vs a plain sequential loop of `tesseract` calls on the same
              rendered pages (target ≥ 0.9× its speed) and vs `ocrmypdf -j 2 --redo-ocr` (target ≥ 2× faster)
  mixed       70 % of pages with a good text layer: korpus vs `ocrmypdf -j 2 --force-ocr` (target ≤ 0.35×)
  rerun       corpus_refresh on 100 pages (70 % good layers), then again unchanged (target ≤ 2 % of the first)
  writer      searchable-PDF write time and size growth for 100 / 300 / 1000-page scans (linear in pages?)
  cer         character error rate of korpus vs Tesseract alone on XQuAD-ru paragraphs scanned at 300 dpi with
              rising noise, blur and rotation (korpus must lose nothing against the engine it wraps)
  detector    precision / recall of the text-layer detector on generated good and bad layers
Pages are XQuAD-ru paragraphs (`eval/xquad-ru/corpus.jsonl`) typeset in DejaVu Serif.

Over 400 lines because its six parts share one process, one set of rendered pages and one report; each part is
a function of its own.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image, ImageFilter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from corpora.sample_archive import FONT_SERIF
from korpus.core.datamodel import PageWord, Source, SourceKind
from korpus.core.model_store import ensure_models
from korpus.core.settings import Settings
from tasks.parse import ocr_document, ocr_pdf_page
from tasks.pdf.pages import render_page
from tasks.pdf.searchable import write_searchable_pdf
from tasks.receive import file_sha256
from tasks.text.quality import text_layer_quality

LANGUAGE = Settings().ocr_language  # rus+eng: every contender reads with the same languages
XQUAD = Path(__file__).resolve().parents[1] / "eval" / "xquad-ru" / "corpus.jsonl"


def paragraphs(limit: int) -> list[str]:
    docs = [json.loads(line)["text"] for line in XQUAD.read_text(encoding="utf-8").splitlines()]
    return [d for d in docs if 500 < len(d) < 1400][:limit]


def _typeset(page: pymupdf.Page, text: str, size: float = 11) -> None:
    page.insert_font(fontname="dvs", fontfile=str(FONT_SERIF))
    y = 70.0
    for line in textwrap.wrap(text, 78):
        page.insert_text((60, y), line, fontsize=size, fontname="dvs")
        y += size * 1.6


def scan_image(text: str, noise: float = 10, blur: float = 0.5, angle: float = 0.7, dpi: int = 300, seed: int = 0):
    """A typeset paragraph as a greyscale scan: rotation, blur, noise."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    _typeset(page, text)
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    image = image.rotate(angle, resample=Image.BICUBIC, fillcolor=255).filter(ImageFilter.GaussianBlur(blur))
    rng = np.random.default_rng(seed)
    pixels = np.asarray(image, dtype=np.int16) + rng.normal(0, noise, (image.height, image.width)).astype(np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")


def _jpeg(image: Image.Image, quality: int = 75) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def scan_pdf(texts: list[str], path: Path, **kwargs: float) -> Path:
    doc = pymupdf.open()
    for i, text in enumerate(texts):
        page = doc.new_page(width=595, height=842)
        page.insert_image(page.rect, stream=_jpeg(scan_image(text, seed=i, **kwargs)))
    doc.save(path)
    return path


def born_digital_pdf(texts: list[str], path: Path) -> Path:
    doc = pymupdf.open()
    for text in texts:
        _typeset(doc.new_page(width=595, height=842), text)
    doc.subset_fonts()
    doc.save(path)
    return path


def _source(path: Path) -> Source:
    return Source(
        source_id=path.name, version=file_sha256(path), path=str(path), kind=SourceKind.pdf, owner="b", access="public"
    )


def _ocrmypdf(args: list[str], src: Path, out: Path) -> float | None:
    exe = shutil.which("ocrmypdf") or str(Path(sys.executable).with_name("ocrmypdf"))
    if not Path(exe).exists():
        return None
    started = time.perf_counter()
    subprocess.run([exe, "-q", "-l", LANGUAGE, "-j", "2", *args, str(src), str(out)], check=True)
    return time.perf_counter() - started


def part_throughput(tmp: Path, pages: int = 12) -> dict:
    pdf = scan_pdf(paragraphs(pages), tmp / "scans.pdf")
    started = time.perf_counter()
    summary = ocr_document(pdf, tmp / "korpus.pdf", Settings(data=tmp / "tp-data"))
    t_korpus = time.perf_counter() - started
    loops = {}
    for name, env in (("defaults", dict(os.environ)), ("omp1", dict(os.environ, OMP_THREAD_LIMIT="1"))):
        started = time.perf_counter()
        for page in range(1, pages + 1):
            image, dpi = render_page(str(pdf), page, 300, fmt="pnm")
            subprocess.run(
                ["tesseract", "stdin", "stdout", "-l", LANGUAGE, "--dpi", str(dpi)],
                input=image,
                capture_output=True,
                check=True,
                env=env,
            )
        loops[name] = time.perf_counter() - started
    t_loop = min(loops.values())
    t_ocrmypdf = _ocrmypdf(["--redo-ocr"], pdf, tmp / "ocrmypdf.pdf")
    return {
        "pages": pages,
        "korpus_s_per_page": round(t_korpus / pages, 3),
        "tesseract_loop_s_per_page": round(loops["defaults"] / pages, 3),
        "tesseract_loop_omp1_s_per_page": round(loops["omp1"] / pages, 3),
        "korpus_speed_over_best_loop": round(t_loop / t_korpus, 2),
        "ocrmypdf_s_per_page": round(t_ocrmypdf / pages, 3) if t_ocrmypdf else None,
        "ocrmypdf_time_over_korpus": round(t_ocrmypdf / t_korpus, 2) if t_ocrmypdf else None,
        "korpus_refused_pages": summary["refused_pages"],
    }


def mixed_corpus(folder: Path, files: int = 5, pages_per_file: int = 4) -> Path:
    """`files` PDFs of `pages_per_file` pages, 70 % born-digital pages, 30 % scans, interleaved."""
    texts = paragraphs(files * pages_per_file)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "korpus.yaml").write_text("defaults:\n  owner: bench\n  access: public\n", encoding="utf-8")
    rng = random.Random(7)
    kinds = ["digital"] * int(len(texts) * 0.7) + ["scan"] * (len(texts) - int(len(texts) * 0.7))
    rng.shuffle(kinds)
    for f in range(files):
        doc = pymupdf.open()
        for p in range(pages_per_file):
            i = f * pages_per_file + p
            page = doc.new_page(width=595, height=842)
            if kinds[i] == "digital":
                _typeset(page, texts[i])
            else:
                page.insert_image(page.rect, stream=_jpeg(scan_image(texts[i], seed=i)))
        doc.subset_fonts()
        doc.save(folder / f"том_{f + 1}.pdf")
    return folder


def part_mixed(tmp: Path) -> dict:
    folder = mixed_corpus(tmp / "mixed")
    files = sorted(folder.glob("*.pdf"))
    started = time.perf_counter()
    ocr_pages = 0
    for f in files:
        ocr_pages += ocr_document(f, tmp / "mixed-out" / f.name, Settings(data=tmp / "mixed-data"))["ocr_pages"]
    t_korpus = time.perf_counter() - started
    started = time.perf_counter()
    for f in files:
        if _ocrmypdf(["--force-ocr"], f, tmp / f"force-{f.name}") is None:
            return {"korpus_s": round(t_korpus, 2), "ocrmypdf": "not installed"}
    t_force = time.perf_counter() - started
    return {
        "pages": 20,
        "korpus_ocr_pages": ocr_pages,
        "korpus_s": round(t_korpus, 2),
        "ocrmypdf_force_ocr_s": round(t_force, 2),
        "korpus_over_ocrmypdf": round(t_korpus / t_force, 3),
    }


def part_rerun(tmp: Path) -> dict:
    """First refresh vs unchanged re-run on a 100-page volume set (10 PDFs × 10 pages, 70 % born-digital). Prefect
    costs a constant ~1 s per flow run (its heartbeat thread is joined in 1-s steps), so the ratio shrinks with the
    corpus; the flow body's own time is reported beside the wall time."""
    from flows.corpus_refresh import run_refresh

    folder = mixed_corpus(tmp / "rerun", files=10, pages_per_file=10)
    settings = Settings(data=tmp / "rerun-data")
    started = time.perf_counter()
    first = run_refresh(folder, settings)
    t_first = time.perf_counter() - started
    started = time.perf_counter()
    second = run_refresh(folder, settings)
    t_second = time.perf_counter() - started
    return {
        "first_s": round(t_first, 2),
        "unchanged_s": round(t_second, 2),
        "unchanged_over_first": round(t_second / t_first, 4),
        "unchanged_flow_body_s": second["seconds"],
        "unchanged_flow_body_over_first": round(second["seconds"] / t_first, 4),
        "pages": 100,
        "first_pages_by_tier": first["pages_by_tier"],
        "unchanged_ocr_calls": second["ocr_engine_calls"],
    }


def part_writer(tmp: Path) -> dict:
    """OCR four distinct 150-dpi scan pages once, then write searchable copies of 100/300/1000-page volumes made
    of them (every page's JPEG bytes made unique, so nothing is shared between pages)."""
    base = [scan_image(t, dpi=150, seed=i) for i, t in enumerate(paragraphs(4))]
    probe = scan_pdf(paragraphs(4), tmp / "probe.pdf")
    settings = Settings(data=tmp / "writer-data")
    words: list[list[PageWord]] = [ocr_pdf_page(_source(probe), p, settings).pages[0].words for p in range(1, 5)]
    report = {}
    for pages in (100, 300, 1000):
        doc = pymupdf.open()
        for i in range(pages):
            image = base[i % 4].copy()
            image.putpixel((i % image.width, 0), i % 256)
            page = doc.new_page(width=595, height=842)
            page.insert_image(page.rect, stream=_jpeg(image, quality=60 + i % 5))
        volume = tmp / f"volume-{pages}.pdf"
        doc.save(volume)
        doc.close()
        from korpus.core.datamodel import PageResult

        results = [
            PageResult(source_id="v", source_version="v", page=i + 1, text="", method="tesseract", words=words[i % 4])
            for i in range(pages)
        ]
        started = time.perf_counter()
        summary = write_searchable_pdf(str(volume), results, tmp / f"volume-{pages}-searchable.pdf")
        seconds = time.perf_counter() - started
        report[str(pages)] = {
            "write_s": round(seconds, 2),
            "ms_per_page": round(1000 * seconds / pages, 1),
            "size_growth": summary["size_growth"],
            "volume_mb": round(volume.stat().st_size / 1e6, 1),
        }
        volume.unlink()
        (tmp / f"volume-{pages}-searchable.pdf").unlink()
    return report


def _cer(truth: str, got: str) -> float:
    a, b = " ".join(truth.split()), " ".join(got.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(1, len(a))


def part_cer(tmp: Path) -> dict:
    texts = paragraphs(24)[16:24]
    levels = {"clean": (4, 0.3, 0.3), "noisy": (18, 0.7, 0.8), "blurred": (25, 1.1, 1.2), "rough": (35, 1.4, 2.0)}
    report = {}
    for name, (noise, blur, angle) in levels.items():
        pdf = scan_pdf(texts, tmp / f"cer-{name}.pdf", noise=noise, blur=blur, angle=angle)
        settings = Settings(data=tmp / f"cer-data-{name}")
        korpus, plain, refused = [], [], 0
        for page, truth in enumerate(texts, start=1):
            outcome = ocr_pdf_page(_source(pdf), page, settings)
            if outcome.pages:
                korpus.append(_cer(truth, outcome.pages[0].text))
            else:
                refused += 1
                korpus.append(1.0)
            image, dpi = render_page(str(pdf), page, 300, fmt="pnm")
            text = subprocess.run(
                ["tesseract", "stdin", "stdout", "-l", LANGUAGE, "--dpi", str(dpi)],
                input=image,
                capture_output=True,
                check=True,
            ).stdout.decode()
            plain.append(_cer(truth, text))
        report[name] = {
            "korpus_cer": round(float(np.mean(korpus)), 4),
            "tesseract_cer": round(float(np.mean(plain)), 4),
            "korpus_refused_pages": refused,
        }
    return report


LOOKALIKE = str.maketrans(
    dict(zip("АВЕКМНОРСТХаеорсухЗзИиПп", "ABEKMHOPCTXaeopcyx33NnNn", strict=True))
    | {"Л": "JI", "л": "JI", "Д": "D", "д": "g"}
)


def labelled_layers() -> list[tuple[str, str, bool]]:
    """(kind, text, should_refuse) for generated page texts."""
    good = paragraphs(200)
    rng = random.Random(11)
    out = [("good", t, False) for t in good]
    out += [
        ("good-with-latin", t + " См. также: Moscow State University, ISBN 978-5-02-034567-1.", False)
        for t in good[:40]
    ]
    out += [("lookalike", t.translate(LOOKALIKE), True) for t in good[:50]]
    half = [t[: len(t) // 2] + t[len(t) // 2 :].translate(LOOKALIKE) for t in good[180:200]]
    out += [("half-lookalike", t, True) for t in half]
    out += [("good-title-page", t[:60].rsplit(" ", 1)[0], False) for t in good[:20]]
    out += [
        ("good-dates-numbers", f"{t[:300]} 12.03.2023 № 45-17/2023 ИНН 7708123450 1 250 000,00 руб.", False)
        for t in good[20:40]
    ]
    out += [("mojibake", t.encode("utf-8").decode("cp1252", errors="replace"), True) for t in good[50:90]]
    out += [("mojibake-1251", t.encode("cp1251", errors="replace").decode("latin-1"), True) for t in good[90:120]]
    cjk = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(400))
    out += [("cjk-noise", t[:200] + " " + cjk[i : i + 150], True) for i, t in enumerate(good[120:150])]
    out += [("empty", rng.choice(["", " ", "\n\n", "12", "- 3 -"]), True) for _ in range(30)]
    out += [
        ("repeated", "\n".join(["ОАО «Северный ветер» — конфиденциально"] * 15 + [t[:80]]), True) for t in good[150:180]
    ]
    return out


def part_detector() -> dict:
    settings = Settings()
    tp = fp = fn = tn = 0
    by_kind: dict[str, list[bool]] = {}
    for kind, text, bad in labelled_layers():
        refused = not text_layer_quality(text, settings).ok
        by_kind.setdefault(kind, []).append(refused == bad)
        tp += refused and bad
        fp += refused and not bad
        fn += (not refused) and bad
        tn += (not refused) and not bad
    return {
        "pages": tp + fp + fn + tn,
        "precision": round(tp / max(1, tp + fp), 4),
        "recall": round(tp / max(1, tp + fn), 4),
        "accuracy_by_kind": {k: round(sum(v) / len(v), 3) for k, v in by_kind.items()},
    }


def _ocrmypdf_layer(words: list[PageWord], out: Path) -> None:
    """ocrmypdf's own renderer (fpdf2, its glyphless font) fed with korpus's words: a text-only page."""
    import ocrmypdf
    from ocrmypdf.fpdf_renderer import Fpdf2PdfRenderer
    from ocrmypdf.fpdf_renderer.renderer import MultiFontManager
    from ocrmypdf.hocrtransform import BoundingBox, OcrClass, OcrElement

    lines: dict[int, list[PageWord]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)

    def box(ws: list[PageWord]) -> BoundingBox:
        return BoundingBox(
            left=min(w.x0 for w in ws),
            top=min(w.y0 for w in ws),
            right=max(w.x1 for w in ws),
            bottom=max(w.y1 for w in ws),
        )

    children = [
        OcrElement(
            ocr_class=OcrClass.LINE,
            bbox=box(ws),
            children=[OcrElement(ocr_class=OcrClass.WORD, bbox=box([w]), text=w.text) for w in ws],
        )
        for ws in lines.values()
    ]
    page = OcrElement(
        ocr_class=OcrClass.PAGE, bbox=BoundingBox(left=0, top=0, right=595, bottom=842), dpi=72, children=children
    )
    fonts = MultiFontManager(Path(ocrmypdf.__file__).parent / "data")
    Fpdf2PdfRenderer(page=page, dpi=72, multi_font_manager=fonts, invisible_text=True).render(out)


def part_renderer(tmp: Path, pages: int = 20) -> dict:
    """The same OCR words written as a text layer by korpus (PyMuPDF) and by ocrmypdf's renderer grafted on."""
    texts = paragraphs(pages)
    volume = scan_pdf(texts, tmp / "render-volume.pdf")
    settings = Settings(data=tmp / "render-data")
    results = [ocr_pdf_page(_source(volume), p, settings).pages[0] for p in range(1, pages + 1)]
    started = time.perf_counter()
    write_searchable_pdf(str(volume), results, tmp / "render-korpus.pdf")
    t_korpus = time.perf_counter() - started
    started = time.perf_counter()
    with pymupdf.open(volume) as doc:
        for number, result in enumerate(results):
            layer = tmp / f"layer-{number}.pdf"
            _ocrmypdf_layer(result.words, layer)
            with pymupdf.open(layer) as text_page:
                doc[number].show_pdf_page(doc[number].rect, text_page, 0, overlay=False)
        doc.save(tmp / "render-ocrmypdf.pdf", garbage=3, deflate=True)
    t_ocrmypdf = time.perf_counter() - started
    out = {}
    for name, path, seconds in (
        ("pymupdf", tmp / "render-korpus.pdf", t_korpus),
        ("ocrmypdf_fpdf2", tmp / "render-ocrmypdf.pdf", t_ocrmypdf),
    ):
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
        flat = " ".join(text.split())
        hits = sum(" ".join(t.split()[3:5]) in flat for t in texts)
        with pymupdf.open(path) as doc:
            found = sum(bool(doc[i].search_for(" ".join(t.split()[3:5]))) for i, t in enumerate(texts))
        out[name] = {
            "ms_per_page": round(1000 * seconds / pages, 1),
            "size_growth": round(path.stat().st_size / volume.stat().st_size - 1, 4),
            "pdftotext_phrases_found": f"{hits}/{pages}",
            "viewer_search_found": f"{found}/{pages}",
        }
    return out


PARTS = {
    "detector": lambda tmp: part_detector(),
    "throughput": part_throughput,
    "mixed": part_mixed,
    "rerun": part_rerun,
    "cer": part_cer,
    "writer": part_writer,
    "renderer": part_renderer,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", action="append", choices=sorted(PARTS), help="run only these parts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ensure_models(Settings())
    report = {}
    with tempfile.TemporaryDirectory(prefix="korpus-ocr-bench-") as tmp:
        for name in args.part or list(PARTS):
            report[name] = PARTS[name](Path(tmp))
            if not args.json:
                print(f"{name}: {json.dumps(report[name], ensure_ascii=False)}", flush=True)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

"""A mixed office folder — born-digital PDFs, scanned PDFs, Word files — through the default `korpus refresh`,
against what a competent engineer would run without korpus (#47 item 3): `ocrmypdf --output-type auto --pdfa-backend
internal --skip-text -j 2` on every PDF (OCR where a page has no text, the text layer kept where it has; PDF/A-2b out
where OCRmyPDF's pikepdf path can confirm it, else regular PDF — `--output-type pdfa` cannot run here: OCRmyPDF 17
refuses its Ghostscript backend with --skip-text on Debian's Ghostscript 10.0.0, whose regressions corrupt existing
text, and its internal backend refuses the born-digital files it cannot confirm), the text of every page read back
with PyMuPDF, each `.docx`'s paragraphs read from its XML, and the plain embedding loop of benchmarks/plain_loop.py
(the same chunker, the fast tokenizer, ONNX Runtime in batches of 32, one SQLite transaction).

Pages are XQuAD-ru paragraphs typeset in DejaVu Serif (benchmarks/ocr.py); a scan is that page rendered at 300 dpi,
rotated, blurred and noised. Each side runs in a fresh process with its models loaded before the clock; korpus on
its local Prefect server (started by a warm-up refresh first, as a user's server is already up). Best of `--rounds`.
After the runs, the archival copies of the last round are compared (#65): korpus's searchable copies (the scans: a
born-digital PDF needs none) against OCRmyPDF's outputs of the same files — total size — and veraPDF's PDF/A-2b
verdict on every copy either side wrote (infra/verapdf, `make verapdf`).

    .venv/bin/pip install -e ".[bench]"      # ocrmypdf
    .venv/bin/python benchmarks/mixed_folder.py [--digital 20 --scans 10 --docx 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
import pymupdf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ocr import _jpeg, _typeset, paragraphs, scan_image  # noqa: E402
from benchmarks.scale import in_fresh_process, refresh  # noqa: E402
from tasks.runtime.prefect_server import stop_server  # noqa: E402

MANIFEST = "defaults:\n  access: public\n  owner: Канцелярия\n"
PLAIN_ROW = "ocrmypdf --output-type auto --pdfa-backend internal --skip-text -j 2 + plain loop"


def docx(path: Path, paragraphs_: list[str]) -> None:
    """A minimal Word document: the parts Word and LibreOffice need, one `w:p` a paragraph."""
    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs_)
    ns = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/'
            'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/'
            'xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.'
            'openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
            "</Relationships>",
        )
        z.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{ns}"><w:body>{body}</w:body></w:document>',
        )


def phone_photo(text: str, seed: int) -> bytes:
    """A page photographed with a phone: colour (warm paper, uneven light), held sideways — stored turned, upright
    by its EXIF orientation 6 as phones write it — no resolution stated, JPEG quality 90."""
    from PIL import Image

    grey = scan_image(text, noise=6, blur=0.8, angle=1.5, dpi=200, seed=seed)
    light = np.linspace(1.0, 0.82, grey.width)[None, :]  # a lamp on one side
    paper = np.asarray(grey, dtype=np.float32)[:, :, None] * np.array([1.0, 0.96, 0.88]) * light[:, :, None]
    photo = Image.fromarray(np.clip(paper, 0, 255).astype(np.uint8), "RGB").rotate(90, expand=True)
    exif = Image.Exif()
    exif[0x0112] = 6  # show it turned 90° clockwise
    buffer = io.BytesIO()
    photo.save(buffer, "JPEG", quality=90, exif=exif.tobytes())
    return buffer.getvalue()


def write_folder(root: Path, digital: int, scans: int, words: int, photos: int = 0) -> dict[str, int]:
    """`digital` two-page born-digital PDFs, `scans` one-page scanned PDFs, `words` Word files of three paragraphs,
    `photos` phone photos of a page (JPEG)."""
    texts = paragraphs(2 * digital + scans + 3 * words + photos)
    root.mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    at = 0
    for n in range(digital):
        doc = pymupdf.open()
        for text in texts[at : at + 2]:
            _typeset(doc.new_page(width=595, height=842), text)
        doc.subset_fonts()
        doc.save(root / f"договор_{n:03}.pdf")
        at += 2
    for n in range(scans):
        doc = pymupdf.open()
        page = doc.new_page(width=595, height=842)
        page.insert_image(page.rect, stream=_jpeg(scan_image(texts[at], seed=n)))
        doc.save(root / f"скан_{n:03}.pdf")
        at += 1
    for n in range(words):
        docx(root / f"записка_{n:03}.docx", texts[at : at + 3])
        at += 3
    for n in range(photos):
        (root / f"фото_{n:03}.jpg").write_bytes(phone_photo(texts[at], seed=n))
        at += 1
    return {
        "born-digital PDFs": digital,
        "scanned PDFs": scans,
        "Word files": words,
        "phone photos (JPEG)": photos,
        "pages": 2 * digital + scans + photos,
    }


PLAIN = """
import json, re, resource, subprocess, sys, time, zipfile
sys.path.insert(0, {root!r})
from pathlib import Path
import pymupdf
from benchmarks.plain_loop import PlainLoop, store
from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.contract.chunking import build_chunks
from tasks.retrieval.embedding import token_counter
settings = Settings()
folder, work = Path({folder!r}), Path({work!r})
loop = PlainLoop(embed_model_path(settings))
count = token_counter(str(embed_model_path(settings)))
loop.embed(["прогрев"])
work.mkdir(parents=True, exist_ok=True)
start = time.perf_counter()
texts, names = [], []
for path in sorted(folder.iterdir()):
    if path.suffix in (".pdf", ".jpg"):  # a photo states no resolution: OCRmyPDF needs one (--image-dpi)
        out = work / (path.name if path.suffix == ".pdf" else path.name + ".pdf")
        photo = ["--image-dpi", "200", "--rotate-pages"] if path.suffix == ".jpg" else []
        subprocess.run(["ocrmypdf", "-q", "-l", {language!r}, "--output-type", "auto", "--pdfa-backend", "internal",
                        "--skip-text", "-j", "2", *photo, str(path), str(out)], check=True)
        pages = [page.get_text() for page in pymupdf.open(out)]
    elif path.suffix == ".docx":
        xml = zipfile.ZipFile(path).read("word/document.xml").decode("utf-8")
        pages = ["\\n\\n".join(re.sub("<[^>]+>", "", p) for p in xml.split("</w:p>"))]
    else:
        continue
    source = Source(source_id=path.name, version="v", path=str(path), kind=SourceKind.text, owner="o",
                    access="public")
    read = [PageResult(source_id=path.name, source_version="v", page=n + 1, text=t, method="plain")
            for n, t in enumerate(pages)]
    chunks, _ = build_chunks(source, read, settings.chunk_policy, count=count, language="ru")
    texts += [c.text for c in chunks]
    names += [path.name] * len(chunks)
store(work / "plain.db", names, texts, loop.embed(texts))
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "chunks": len(texts), "sources": len(set(names)),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def _copies(data: Path, plain: Path) -> dict:
    """korpus's searchable copies against OCRmyPDF's outputs of the same sources: count, total size, PDF/A-2b."""
    from tasks.pdf.validate import validate

    korpus = sorted((data / "searchable").rglob("*.pdf"))
    same = [plain / path.name for path in korpus]
    every = sorted(plain.glob("*.pdf"))
    verdicts = validate([*korpus, *every], "2b")
    passed = lambda paths: sum(verdicts[str(p)]["compliant"] for p in paths)  # noqa: E731
    megabytes = lambda paths: round(sum(p.stat().st_size for p in paths) / 2**20, 2)  # noqa: E731
    photos = [p for p in korpus if p.name.endswith(".jpg.pdf")]
    return {
        "korpus copies": len(korpus),
        "korpus copies MB": megabytes(korpus),
        "ocrmypdf outputs of the same files MB": megabytes(same),
        "of which phone photos: korpus MB": megabytes(photos),
        "of which phone photos: ocrmypdf MB": megabytes([plain / p.name for p in photos]),
        "korpus PDF/A-2b valid": f"{passed(korpus)}/{len(korpus)}",
        "ocrmypdf PDF/A-2b valid (every output)": f"{passed(every)}/{len(every)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--digital", type=int, default=20)
    parser.add_argument("--scans", type=int, default=10)
    parser.add_argument("--docx", type=int, default=10)
    parser.add_argument("--photos", type=int, default=5, help="phone photos of a page (JPEG, EXIF-turned)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"  # the venv's ocrmypdf first
    if not shutil.which("ocrmypdf", path=path):
        raise SystemExit('ocrmypdf is not installed: .venv/bin/pip install -e ".[bench]"')
    from korpus.core.settings import Settings

    env = dict(os.environ, PATH=path, PREFECT_LOGGING_LEVEL="WARNING")
    with tempfile.TemporaryDirectory(prefix="korpus-mixed-") as tmp:
        folder = Path(tmp) / "folder"
        report: dict = {"folder": write_folder(folder, args.digital, args.scans, args.docx, args.photos)}
        home = Path(tmp) / "prefect-home"
        try:
            warm = Path(tmp) / "warm-up"
            write_folder(warm, 1, 0, 0)
            refresh(warm, Path(tmp) / "data-warm-up", home)
            runs: dict[str, list[dict]] = {"korpus refresh (default)": [], PLAIN_ROW: []}
            for n in range(args.rounds):
                runs["korpus refresh (default)"].append(refresh(folder, Path(tmp) / f"data-{n}", home))
                script = PLAIN.format(
                    root=str(ROOT),
                    folder=str(folder),
                    work=str(Path(tmp) / f"plain-{n}"),
                    language=Settings().ocr_language,
                )
                runs[PLAIN_ROW].append(in_fresh_process(script, env))
        finally:
            stop_server(home)
        for name, results in runs.items():
            best = min(results, key=lambda r: r["seconds"])
            report[name] = {
                "seconds": round(best["seconds"], 2),
                "runs_s": [round(r["seconds"], 2) for r in results],
                "chunks": best["chunks"],
                "peak_rss_mb": round(best["peak_rss_mb"]),
            }
        report["archival copies"] = _copies(
            Path(tmp) / f"data-{args.rounds - 1}", Path(tmp) / f"plain-{args.rounds - 1}"
        )
        korpus = report["korpus refresh (default)"]["seconds"]
        plain = report[PLAIN_ROW]["seconds"]
        report["korpus speed ÷ ocrmypdf + plain loop"] = round(plain / korpus, 3)
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()

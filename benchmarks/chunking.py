"""Chunking throughput (units/s) and chunk size distribution, structure-v1 beside page-v1.

    .venv/bin/python benchmarks/chunking.py [--xquad eval/xquad-ru/corpus.jsonl] [--json]

Two corpora: the sample archive's pages (PDF text layers and OCR'd scans, the HR order, the letter), and the
240 paragraphs of XQuAD-ru, each as one page. Sizes are in tokens of the embedding model (e5-small's tokenizer,
which is what the embedder reads), text including the address and context lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpora.sample_archive import write_sample_archive
from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.model_store import embed_model_path, ensure_models
from korpus.core.settings import Settings
from tasks.contract.chunking import build_chunks
from tasks.parse import ocr_pdf_page, parse_pdf_text_layers, read_plain_text
from tasks.receive import discover_sources
from tasks.retrieval.embedding import token_counter
from tasks.text.structure import text_structure

DEFAULT_XQUAD = Path(__file__).resolve().parents[1] / "eval" / "xquad-ru" / "corpus.jsonl"


def sample_pages(settings: Settings) -> list[tuple[Source, list[PageResult]]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "archive"
        write_sample_archive(root)
        for source in discover_sources(root):
            source = source.model_copy(update={"owner": source.owner or "bench", "access": source.access or "x"})
            if source.kind is SourceKind.pdf:
                outcome = parse_pdf_text_layers(source, settings)
                for page in outcome.ocr_pending:
                    outcome.pages += ocr_pdf_page(source, page, settings).pages
                out.append((source, sorted(outcome.pages, key=lambda p: p.page)))
            elif source.kind is SourceKind.text:
                out.append((source, read_plain_text(source).pages))
    return out


def xquad_pages(path: Path) -> list[tuple[Source, list[PageResult]]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        source = Source(
            source_id=f"{doc['_id']}.txt",
            version=doc["_id"],
            path="-",
            kind=SourceKind.text,
            owner="xquad",
            access="public",
        )
        text = doc["text"]
        out.append(
            (
                source,
                [
                    PageResult(
                        source_id=source.source_id,
                        source_version=source.version,
                        page=1,
                        text=text,
                        method="plain-text",
                        units=text_structure(text),
                    )
                ],
            )
        )
    return out


def measure(docs: list[tuple[Source, list[PageResult]]], policy: str, count) -> dict:
    units = sum(len(p.units) for _, pages in docs for p in pages)
    started = time.perf_counter()
    chunks = [c for source, pages in docs for c in build_chunks(source, pages, policy, count=count)[0]]
    seconds = time.perf_counter() - started
    sizes = sorted(count(c.text) for c in chunks)
    return {
        "chunks": len(chunks),
        "units": units,
        "units_per_s": round(units / seconds),
        "tokens_min": sizes[0],
        "tokens_p50": int(statistics.median(sizes)),
        "tokens_p90": sizes[int(len(sizes) * 0.9)],
        "tokens_max": sizes[-1],
        "over_512": sum(s > 512 for s in sizes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xquad", type=Path, default=DEFAULT_XQUAD)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = Settings(data=Path(tempfile.mkdtemp(prefix="korpus-chunk-bench-")))
    ensure_models(settings)
    count = token_counter(str(embed_model_path(settings)))
    report = {}
    for name, docs in (("sample", sample_pages(settings)), ("xquad", xquad_pages(args.xquad))):
        for policy in ("structure-v1", "page-v1"):
            report[f"{name}/{policy}"] = measure(docs, policy, count)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, row in report.items():
        print(f"{key:>22}: " + "  ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()

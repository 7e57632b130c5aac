"""Searchable copies of DjVu pages: korpus's page images against what it wrote before, side by side (#65).

    .venv/bin/python benchmarks/djvu_copies.py [DJVU ...]

For each DjVu — the real ones under ../shared/data (or those given) and three pages made by djvulibre's own encoders
(labelled as generated: `cjb2` bilevel, `c44` colour photo, `cpaldjvu` few colours; tests/integration/test_pdfa.py's)
— the copy of every page is written as PDF/A-2b twice: with korpus's page image (tasks/readers/djvu.djvu_frame: the
fewest colours that hold the page exactly, a background-only page at its layer's resolution) and with the one it
wrote before (the page composed in grey at the page's resolution). Reported per file: source size, each copy's size,
the modes, and veraPDF's verdict on both.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from korpus.core.datamodel import PageResult  # noqa: E402
from tasks.pdf.searchable import PageFrame, write_searchable_images  # noqa: E402
from tasks.pdf.validate import validate  # noqa: E402
from tasks.readers.djvu import djvu_frame, djvu_page_image, page_count, page_dpi  # noqa: E402
from tests.integration.test_pdfa import _djvu_pages  # noqa: E402


def before(path: str, page: int) -> PageFrame:
    """The page image korpus wrote before: composed by djvulibre in grey at the page's own resolution."""
    _width, _height, own = page_dpi(path, page)
    rendered = djvu_page_image(path, page, own, "pnm")
    image = Image.open(io.BytesIO(rendered.data))
    image.load()
    return PageFrame(image.width, image.height, rendered.dpi, image=image)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {p.name: p for p in args.files or sorted((ROOT.parent / "shared" / "data").rglob("*.djvu"))}
        files |= {f"{kind} (generated)": p for kind, p in _djvu_pages(folder).items()}
        rows, copies = [], []
        for name, path in files.items():
            pages = [
                PageResult(source_id=name, source_version="v", page=n, text="", method="tesseract")
                for n in range(1, page_count(str(path)) + 1)
            ]
            row = {"file": name, "source": path.stat().st_size}
            for label, frame in (("korpus", djvu_frame), ("before", before)):
                out = folder / f"{len(copies)}.pdf"
                write_searchable_images(lambda n, path=path, frame=frame: frame(str(path), n), pages, out, 0)
                row[label] = out.stat().st_size
                row[f"{label} modes"] = "/".join(sorted({frame(str(path), p.page or 1).image.mode for p in pages}))
                copies.append((name, label, out))
            rows.append(row)
        verdicts = validate([out for *_, out in copies], "2b")
    valid = {(name, label): verdicts[str(out)]["compliant"] for name, label, out in copies}
    print("| DjVu | pages' source | korpus's copy | before | korpus ÷ before | modes (korpus / before) | PDF/A-2b |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ok = "yes" if valid[r["file"], "korpus"] and valid[r["file"], "before"] else "NO"
        print(
            f"| {r['file']} | {r['source'] / 1e3:.0f} KB | {r['korpus'] / 1e3:.0f} KB | {r['before'] / 1e3:.0f} KB | "
            f"{r['korpus'] / r['before']:.2f} | {r['korpus modes']} / {r['before modes']} | {ok} |"
        )


if __name__ == "__main__":
    main()

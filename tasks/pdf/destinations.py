"""A searchable copy links back to the index: each chunk id is a named destination at its first word, so
`протокол.pdf#nameddest=<chunk_id>` opens in a PDF viewer where the hit is (tasks/text/regions.py gives the place).

Names go into the catalog's /Dests dictionary (PDF 1.1's form, which every viewer still resolves) rather than the
/Names tree, so a document's own named destinations, wherever it keeps them, are left as they are. Written as an
incremental update of the copy korpus made — never of a source file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pymupdf

from korpus.core.datamodel import Chunk, PageResult, Region
from tasks.text.regions import Box, unturn


def _upright(region: Region, page: PageResult) -> tuple[float, float]:
    """The top-left of a region of the page as stored, on the page as a searchable image PDF shows it: turned
    upright (the whole box is turned: its top-left corner is another corner of the stored box)."""
    if not page.rotation or page.size is None:
        return region.x0, region.y0
    quarter = page.rotation in (90, 270)
    width, height = (page.size[1], page.size[0]) if quarter else page.size
    box = unturn(Box("", region.x0, region.y0, region.x1, region.y1, 0), (360 - page.rotation) % 360, width, height)
    return box.x0, box.y0


def name_chunks(path: Path, chunks: Sequence[Chunk], pages: Sequence[PageResult], turned: bool = False) -> int:
    """Add a named destination per chunk with regions to the PDF at `path` (a searchable copy); `turned`: its pages
    show the page images upright through their /Rotate (an image source). Returns how many were written."""
    by_page = {p.page: p for p in pages if p.page is not None}
    place = {n: i for i, n in enumerate(sorted(by_page))} if turned else {n: n - 1 for n in by_page}  # doc index
    with pymupdf.open(path) as doc:
        catalog = doc.pdf_catalog()
        kind, value = doc.xref_get_key(catalog, "Dests")
        if kind == "xref":
            dests = int(value.split()[0])
        else:
            dests = doc.get_new_xref()
            doc.update_object(dests, value if kind == "dict" else "<<>>")
            doc.xref_set_key(catalog, "Dests", f"{dests} 0 R")
        named = 0
        for chunk in chunks:
            first = next((r for r in chunk.regions if not r.whole_page), None)
            if first is None or not 0 <= place.get(first.page, -1) < doc.page_count:
                continue
            page = doc[place[first.page]]
            if turned:  # the upright page is what the copy shows: through its /Rotate to the page as stored
                at = pymupdf.Point(*_upright(first, by_page[first.page])) * page.derotation_matrix
            else:
                at = pymupdf.Point(first.x0, first.y0)
            at = at * ~page.transformation_matrix  # MuPDF's page space → the PDF's own
            doc.xref_set_key(dests, chunk.chunk_id, f"[{page.xref} 0 R /XYZ {at.x:.1f} {at.y:.1f} null]")
            named += 1
        if named:
            doc.saveIncr()
    return named

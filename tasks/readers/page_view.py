"""A page as a person checks a citation against it: rendered from the file as stored (a PDF page, an office file's
converted PDF, a scan or photo frame, a DjVu page) with a chunk's regions drawn over it."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from PIL import Image, ImageDraw

from korpus.core.datamodel import Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.registry import reader_for

FILL = (255, 214, 0, 96)
FRAME = (214, 40, 40, 255)


def page_png(
    source: Source, page: int, settings: Settings, regions: Sequence[dict[str, Any]] = (), dpi: int = 110
) -> tuple[bytes, tuple[int, int]]:
    """The page at `dpi` as PNG, each region of this page filled translucent yellow in a red frame; and the
    image's size in pixels. Raises ValueError for a source without pages."""
    kind = SourceKind(source.kind) if source.kind else None
    if kind is None or not kind.paged:
        raise ValueError(f"{source.source_id}: a {kind or 'file'} source has no page images")
    image = reader_for(kind).page_image(source, page, settings)(dpi, "png")
    with Image.open(io.BytesIO(image.data)) as opened:
        canvas = opened.convert("RGBA")
    sx, sy = canvas.width / image.width_pt, canvas.height / image.height_pt
    overlay = Image.new("RGBA", canvas.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for region in regions:
        if region["page"] == page and not region.get("whole_page"):
            box = (region["x0"] * sx - 2, region["y0"] * sy - 2, region["x1"] * sx + 2, region["y1"] * sy + 2)
            draw.rectangle(box, fill=FILL, outline=FRAME, width=2)
    out = io.BytesIO()
    Image.alpha_composite(canvas, overlay).convert("RGB").save(out, "PNG", optimize=True)
    return out.getvalue(), canvas.size

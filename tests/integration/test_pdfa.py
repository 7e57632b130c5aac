"""Every searchable copy the tests' real corpora produce is PDF/A-2b by veraPDF (infra/verapdf, from Maven Central;
tasks/pdf/validate.py), its text what korpus indexed; stripping what PDF/A needs fails it (the validator really
checks); a born-digital page drawing with a font the source did not embed gets a substitute of the same widths, and
a copy whose font has none is plain PDF with a reason."""

from __future__ import annotations

import io
import subprocess
from collections import Counter
from pathlib import Path

import pikepdf
import pymupdf
import pytest

from corpora.sample_archive import _scan_pdf
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.pdf.validate import layer_differences, validate
from tests.unit.test_pdfa import born_digital_page

pytestmark = pytest.mark.integration


def test_every_searchable_copy_of_the_real_archive_is_pdfa_and_holds_the_indexed_text(real_refreshed: tuple) -> None:
    """Real scans (PNG, a photo taken sideways, a DjVu page) and a PDF whose broken text layer was replaced."""
    _root, settings, _summary = real_refreshed
    copies = sorted((settings.data / "searchable").rglob("*.pdf"))
    names = {str(c.relative_to(settings.data / "searchable")) for c in copies}
    assert {"scans/orient_3.png.pdf", "scans/law_image.png.pdf", "broken-layer/ukodeksrf.pdf"} <= names, names
    assert "scans/example_with_table7.djvu.pdf" in names, names
    verdicts = validate(copies, "2b")
    assert len(verdicts) == len(copies) and all(v["compliant"] for v in verdicts.values()), verdicts
    checked = 0
    with SqliteIndex(settings.index_path) as index:
        for copy in copies:
            source_id = str(copy.relative_to(settings.data / "searchable"))
            found = index.current_source(source_id) or index.current_source(source_id.removesuffix(".pdf"))
            assert found is not None, source_id
            for page in found[1]:
                if page.method in ("tesseract", "vlm") and page.page:  # a page korpus read: its layer is that text
                    args = ["pdftotext", "-f", str(page.page), "-l", str(page.page), str(copy), "-"]
                    layer = subprocess.run(args, capture_output=True, text=True, check=True).stdout
                    # the same words (in any order); the broken layer's own glyphs read as nothing
                    assert layer_differences(layer, page.text) == (Counter(), Counter()), (source_id, page.page)
                    checked += 1
    assert checked >= 6  # every page of the three scans' copies and both of the broken layer's


def _mixed(path: Path, font: str) -> Path:
    """A born-digital page (an embedded TrueType font, or Helvetica as old tools wrote it: not embedded) and a
    scanned one, with the document information an archive keeps."""
    doc = pymupdf.open()
    born_digital_page(doc, "dvs" if font == "embedded" else "helv")
    doc.insert_pdf(pymupdf.open(stream=_scan_pdf(["АКТ № 7", "приёмки задвижек", "Принято без замечаний."], seed=3)))
    doc.set_metadata({"title": "Акт приёмки", "author": "Канцелярия", "creationDate": "D:20010203040506+03'00'"})
    doc.save(path)
    return path


def test_a_mixed_pdf_becomes_pdfa_with_its_document_information(models, tmp_path: Path) -> None:
    from tasks.parse import ocr_document

    source = _mixed(tmp_path / "акт.pdf", "embedded")
    out = tmp_path / "акт-searchable.pdf"
    summary = ocr_document(source, out, Settings(data=tmp_path / "data"))
    assert summary["pdfa"] == "2b" and summary["ocr_pages"] >= 1
    assert validate([out], "2b")[str(out)] == {"compliant": True, "failed": []}
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert "ремонте кровли" in text and "задвижек" in text
    with pikepdf.open(out) as pdf:
        meta = pdf.open_metadata()
        assert meta["dc:title"] == "Акт приёмки" and "Канцелярия" in meta["dc:creator"]
        assert meta["xmp:CreateDate"].startswith("2001-02-03")

    # What PDF/A needs, stripped: veraPDF says so (a check that cannot fail would pass these too).
    for strip in ("intent", "identification"):
        broken = tmp_path / f"без-{strip}.pdf"
        with pikepdf.open(out) as pdf:
            if strip == "intent":
                del pdf.Root["/OutputIntents"]
            else:
                with pdf.open_metadata(set_pikepdf_as_editor=False) as meta:
                    del meta["pdfaid:part"]
                    del meta["pdfaid:conformance"]
            pdf.save(broken)
        verdict = validate([broken], "2b")[str(broken)]
        assert not verdict["compliant"] and verdict["failed"], (strip, verdict)

    # A source that is PDF/A-2u already: its copy keeps 2u (every glyph with its Unicode), not the default 2b.
    from tasks.pdf.pdfa import make_pdfa

    archival = _mixed(tmp_path / "архивный.pdf", "embedded")
    assert make_pdfa(archival, "2u") is None and validate([archival], "2u")[str(archival)]["compliant"]
    kept = ocr_document(archival, tmp_path / "архивный-searchable.pdf", Settings(data=tmp_path / "data"))
    assert kept["pdfa"] == "2u"
    assert validate([tmp_path / "архивный-searchable.pdf"], "2u")[str(tmp_path / "архивный-searchable.pdf")] == {
        "compliant": True,
        "failed": [],
    }

    # Helvetica as old tools wrote it, not embedded: Liberation Sans in its place, the copy PDF/A-2b all the same.
    memo = _mixed(tmp_path / "memo.pdf", "helvetica")
    substituted = ocr_document(memo, tmp_path / "memo-searchable.pdf", Settings(data=tmp_path / "data"))
    assert substituted["pdfa"] == "2b" and "pdfa_refused" not in substituted
    assert validate([tmp_path / "memo-searchable.pdf"], "2b")[str(tmp_path / "memo-searchable.pdf")]["compliant"]
    assert "Memo about the roof repair." in _page_text(tmp_path / "memo-searchable.pdf", 1)

    # A font no substitute has the widths of: plain PDF, and the summary says which.
    with pikepdf.open(memo, allow_overwriting_input=True) as pdf:
        for font in (
            o for o in pdf.objects if isinstance(o, pikepdf.Dictionary) and o.get("/BaseFont") == "/Helvetica"
        ):
            font.BaseFont = pikepdf.Name("/PTSans-Regular")
        pdf.save(memo)
    refused = ocr_document(memo, tmp_path / "memo-plain.pdf", Settings(data=tmp_path / "data"))
    assert refused["pdfa"] is None and "PTSans-Regular" in refused["pdfa_refused"]
    with pikepdf.open(tmp_path / "memo-plain.pdf") as pdf:
        assert "/OutputIntents" not in pdf.Root and "pdfaid:part" not in pdf.open_metadata()


def _page_text(path: Path, page: int) -> str:
    args = ["pdftotext", "-layout", "-f", str(page), "-l", str(page), str(path), "-"]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def test_a_word_pdf_with_a_scanned_page_becomes_pdfa_its_typeset_text_unchanged(models, tmp_path: Path) -> None:
    """A real Word PDF (the real-archive fixture gost_multipage_table_2.pdf) draws its spaces and Latin with Times
    New Roman and Arial it did not embed, beside embedded CID fonts for its Cyrillic. With a scanned page appended,
    its copy is PDF/A-2b by veraPDF, and the typeset pages read back as the source's do."""
    from tasks.parse import ocr_document

    source = Path(__file__).parents[1] / "fixtures" / "real-archive" / "digital" / "gost_multipage_table_2.pdf"
    mixed = tmp_path / "гост-с-приложением.pdf"
    with pymupdf.open(source) as doc:
        pages = doc.page_count
        doc.insert_pdf(pymupdf.open(stream=_scan_pdf(["ПРИЛОЖЕНИЕ", "Акт сверки расчётов"], seed=4)))
        doc.save(mixed)
    with pikepdf.open(mixed) as pdf:
        from tasks.pdf.font_substitutes import unembedded_fonts

        assert {"Times New Roman", "Arial"} <= unembedded_fonts(pdf)
    out = tmp_path / "гост-searchable.pdf"
    summary = ocr_document(mixed, out, Settings(data=tmp_path / "data"))
    assert summary["pdfa"] == "2b" and summary["ocr_pages"] >= 1, summary
    assert validate([out], "2b")[str(out)] == {"compliant": True, "failed": []}
    for page in range(1, pages + 1):
        assert _page_text(out, page) == _page_text(mixed, page), page
    assert "ПРИЛОЖЕНИЕ" in _page_text(out, pages + 1)


def test_every_standard_font_drawing_every_winansi_character_becomes_pdfa(tmp_path: Path) -> None:
    """The twelve standard fonts a page may draw with unembedded, each drawing every WinAnsi character: the copy
    passes veraPDF (each glyph present, dictionary and program widths in agreement) and reads back the same."""
    from tasks.pdf.pdfa import make_pdfa

    chars = "".join(bytes([c]).decode("cp1252", errors="ignore") for c in range(0x21, 0x100) if c != 0x7F)
    path = tmp_path / "стандартные.pdf"
    doc = pymupdf.open()
    page = doc.new_page(width=842, height=595)
    for i, font in enumerate(
        ("helv", "hebo", "heit", "hebi", "tiro", "tibo", "tiit", "tibi", "cour", "cobo", "coit", "cobi")
    ):
        page.insert_text((20, 30 + 40 * i), chars[:110], fontname=font, fontsize=7)
        page.insert_text((20, 45 + 40 * i), chars[110:], fontname=font, fontsize=7)
    doc.save(path)
    before = _page_text(path, 1)
    assert make_pdfa(path, "2b") is None
    assert validate([path], "2b")[str(path)] == {"compliant": True, "failed": []}
    assert _page_text(path, 1) == before


def _djvu_pages(folder: Path) -> dict[str, Path]:
    """Three DjVu pages as djvulibre's own encoders make them: bilevel (cjb2: a JB2 mask alone), a colour photo
    (c44: an IW44 background alone) and a few-colour page (cpaldjvu: a JB2 mask, its colours and a background)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 36)
    text = Image.new("L", (1275, 1650), 255)
    draw = ImageDraw.Draw(text)
    colour = Image.new("RGB", (1275, 1650), (250, 245, 230))
    tint = ImageDraw.Draw(colour)
    for i in range(12):
        draw.text((100, 120 + 90 * i), f"Приказ № {i} о поставке насосов", font=font, fill=0)
        tint.text((100, 120 + 90 * i), f"Накладная № {i} на задвижки", font=font, fill=(20, 30, 120))
    tint.ellipse((700, 1100, 1100, 1500), fill=(200, 40, 40))
    text.point(lambda v: 0 if v < 128 else 255).convert("1").save(folder / "bw.pbm")
    colour.save(folder / "colour.ppm")
    made = {"bilevel": "cjb2", "photo": "c44", "few colours": "cpaldjvu"}
    out = {}
    for kind, encoder in made.items():
        out[kind] = folder / f"{encoder}.djvu"
        source = folder / ("bw.pbm" if encoder == "cjb2" else "colour.ppm")
        subprocess.run([encoder, "-dpi", "150", str(source), str(out[kind])], check=True, capture_output=True)
    return out


def test_djvu_pages_are_kept_losslessly_in_as_few_colours_as_they_hold_and_become_pdfa(tmp_path: Path) -> None:
    """#65: a bilevel DjVu page goes into its copy as 1 bit a pixel, the same pixels as djvulibre draws; a colour page
    stays in colour (the copy held it grey before); a page whose picture is all background keeps that layer at its
    own resolution, not upscaled to the page's. Every copy is PDF/A-2b, its page the source's size."""
    from PIL import Image

    from korpus.core.datamodel import PageResult
    from tasks.pdf.searchable import write_searchable_images
    from tasks.readers.djvu import djvu_frame, djvu_page_image

    pages = _djvu_pages(tmp_path)
    frames = {kind: djvu_frame(str(path), 1) for kind, path in pages.items()}
    assert frames["bilevel"].image.mode == "1"
    drawn = Image.open(io.BytesIO(djvu_page_image(str(pages["bilevel"]), 1, 150, "pnm").data)).convert("L")
    assert frames["bilevel"].image.convert("L").tobytes() == drawn.point(lambda v: 255 if v >= 128 else 0).tobytes()
    assert frames["photo"].image.mode == frames["few colours"].image.mode == "RGB"
    real = Path(__file__).parents[1] / "fixtures" / "real-archive" / "scans" / "example_with_table7.djvu"
    photo_page = djvu_frame(str(real), 1)  # 2483 × 3508 at 300 dpi; its picture a 828 × 1170 background layer
    assert (photo_page.width, photo_page.dpi) == (828, 100) and photo_page.points == pytest.approx((595.92, 841.92))
    copies = []
    for kind, path in [*pages.items(), ("real", real)]:
        out = tmp_path / f"{path.stem}.pdf"
        page = PageResult(source_id=kind, source_version="v", page=1, text="", method="tesseract")
        write_searchable_images(lambda n, path=path: djvu_frame(str(path), n), [page], out, path.stat().st_size)
        width, height, dpi = djvu_page_dpi(path)
        with pymupdf.open(out) as doc:
            assert (doc[0].rect.width, doc[0].rect.height) == pytest.approx((width * 72 / dpi, height * 72 / dpi)), kind
        copies.append(out)
    verdicts = validate(copies, "2b")
    assert all(v["compliant"] for v in verdicts.values()), verdicts


def djvu_page_dpi(path: Path) -> tuple[int, int, int]:
    from tasks.readers.djvu import page_dpi

    return page_dpi(str(path), 1)


def test_export_writes_the_visible_copies_with_a_manifest(real_refreshed: tuple, tmp_path: Path) -> None:
    """`korpus export --pdfa DIR --validate`: the copies in a tree that mirrors the archive, a manifest with each
    source's and copy's sha256, the pages OCR'd and the engine, veraPDF's verdict; the scopes decide what goes."""
    import hashlib
    import json

    from typer.testing import CliRunner

    from korpus.apps.cli import app

    _root, settings, _summary = real_refreshed
    runner = CliRunner()
    out = tmp_path / "архив-pdfa"
    done = runner.invoke(
        app, ["export", str(out), "--pdfa", "--scopes", "public", "--validate", "--data", str(settings.data)]
    )
    assert done.exit_code == 0, done.output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    copies = {c["copy"]: c for c in manifest["copies"]}
    assert {"scans/law_image.png.pdf", "scans/example_with_table7.djvu.pdf", "broken-layer/ukodeksrf.pdf"} <= set(
        copies
    )
    for name, entry in copies.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == entry["copy_sha256"]
        assert entry["pdfa"] == "2b" and entry["valid"] and entry["engines"] == ["tesseract"]
        assert entry["pages_ocr"] and len(entry["source_sha256"]) == 64
    law = copies["scans/law_image.png.pdf"]
    assert law["source_sha256"] == hashlib.sha256((_root / "scans" / "law_image.png").read_bytes()).hexdigest()

    hidden = runner.invoke(
        app, ["export", str(tmp_path / "hr"), "--pdfa", "--scopes", "hr", "--data", str(settings.data)]
    )
    assert hidden.exit_code == 0 and "0 copies exported" in hidden.output, hidden.output
    assert json.loads((tmp_path / "hr" / "manifest.json").read_text())["not_visible"] == len(copies)
    assert not [p for p in (tmp_path / "hr").rglob("*.pdf")]

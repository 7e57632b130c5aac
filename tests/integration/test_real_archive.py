"""Real third-party Russian documents (tests/fixtures/real-archive, Apache-2.0, from dedoc's test data) through a
real refresh — Prefect, Dask, Tesseract, LibreOffice, djvulibre, e5 — and per file, what happened to it."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from flows.corpus_refresh import run_refresh
from korpus.core.datamodel import PageResult, Source
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.ocr.engine import PageImage
from tasks.ocr.tesseract_engine import TesseractEngine
from tasks.parse import ocr_document
from tasks.receive import file_sha256, source_kind
from tasks.text.quality import PageFacts, measure, word_f1

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive"


@pytest.fixture
def refreshed(real_refreshed: tuple[Path, Settings, dict]) -> tuple[Path, Settings, dict]:
    """The fixtures through one real refresh (tests/integration/conftest.py), shared with test_regions.py."""
    return real_refreshed


def _pages(settings: Settings, source_id: str) -> list[PageResult]:
    with SqliteIndex(settings.index_path) as index:
        rows = index.conn.execute(
            "SELECT p.page FROM pages p JOIN sources s ON s.source_id = p.source_id AND s.version = p.version "
            "WHERE p.source_id = ? AND s.lifecycle = 'current' ORDER BY p.ordinal",
            (source_id,),
        ).fetchall()
    return [PageResult.model_validate_json(r[0]) for r in rows]


def _chunks(settings: Settings, source_id: str) -> list[tuple[str, str]]:
    with SqliteIndex(settings.index_path) as index:
        return index.conn.execute(
            "SELECT text, language FROM chunks WHERE source_id = ? AND lifecycle = 'current'", (source_id,)
        ).fetchall()


def test_every_file_is_indexed(refreshed: tuple[Path, Settings, dict]) -> None:
    root, settings, summary = refreshed
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != "korpus.yaml")
    assert len(files) == 13
    missing = [f for f in files if not _chunks(settings, f)]
    assert missing == [], summary
    assert "unsupported-type" not in summary["quarantine_reasons"]
    assert "oversized" not in summary["quarantine_reasons"]


def test_born_digital_layers_are_kept_even_when_flagged(refreshed: tuple[Path, Settings, dict]) -> None:
    _root, settings, _summary = refreshed
    for source_id in ("digital/alpaca_tz.pdf", "digital/short_lines.pdf", "digital/multipage_table.pdf"):
        pages = _pages(settings, source_id)
        assert pages and all(p.tier == 0 and p.method == "text-layer" for p in pages), source_id
    checked = [p for p in _pages(settings, "digital/short_lines.pdf") if p.layer_check]
    assert checked and all(c.layer_check.decision == "layer-kept" and c.layer_check.similarity >= 0.75 for c in checked)


def test_a_layer_of_glyph_codes_is_caught_and_replaced(refreshed: tuple[Path, Settings, dict]) -> None:
    _root, settings, _summary = refreshed
    pages = _pages(settings, "broken-layer/ukodeksrf.pdf")
    assert len(pages) == 2 and all(p.layer_check and p.layer_check.decision == "ocr-replaced-layer" for p in pages)
    assert "glyph-codes" in pages[0].layer_check.layer_reasons
    assert "Уголовный кодекс" in pages[0].text
    searchable = settings.data / "searchable" / "broken-layer" / "ukodeksrf.pdf"
    text = subprocess.run(["pdftotext", str(searchable), "-"], capture_output=True, text=True).stdout
    assert "Уголовный" in text and "M]heh" not in text


def test_a_stamp_frame_is_found_by_exact_and_never_outranks_the_documents(
    refreshed: tuple[Path, Settings, dict],
) -> None:
    """#29 item 4 through a real refresh: the GOST document's frame labels are a furniture chunk of their own —
    found by `korpus exact`, behind every document hit in a search, in no other chunk."""
    from korpus.core.datamodel import FURNITURE_SECTION
    from tasks.retrieval.retriever import retrieve

    _root, settings, _summary = refreshed
    with SqliteIndex(settings.index_path) as index:
        found = index.searcher.exact_occurrences("Взам. инв. №", ["public"])
        assert found["by_source"] == {"digital/gost_multipage_table_2.pdf": 2}, found["by_source"]
        for query in ("Подпись и дата", "Взам. инв. № подпись", "общая часть sample text"):
            hits = retrieve(index.searcher, query, None, ["public"], k=20, mode="bm25")
            furniture = [n for n, h in enumerate(hits) if h["section_path"] == [FURNITURE_SECTION]]
            documents = [n for n, h in enumerate(hits) if n not in furniture and "://" not in h["source_id"]]
            assert min(furniture, default=99) > max(documents, default=-1), (query, furniture, documents)
            assert furniture or query != "Подпись и дата"  # the frame's own words do list it, after the documents
        chunks = index.source_chunks("digital/gost_multipage_table_2.pdf")
        bodies = [c["body"] for c in chunks if c["section_path"] != [FURNITURE_SECTION]]
        assert bodies and len(bodies) < len(chunks)
        assert not any("Взам. инв" in b or "Подпись и дата" in b for b in bodies)


def test_office_text_and_encodings(refreshed: tuple[Path, Settings, dict]) -> None:
    _root, settings, _summary = refreshed
    docx = _pages(settings, "office/alpaca_tz.docx")
    assert docx and docx[0].engine == "libreoffice+pymupdf" and "альпак" in docx[0].text.lower()
    assert any("Уголовный кодекс" in p.text for p in _pages(settings, "office/ukrf.doc"))
    cp1251 = _pages(settings, "text/cp1251.txt")
    assert cp1251[0].engine == "cp1251" and "Сэр Джон Монтегю" in cp1251[0].text
    assert {lang for _t, lang in _chunks(settings, "text/football.txt")} == {"en"}
    law = _chunks(settings, "text/Pr_2013.02.18_21.txt")
    assert len(law) >= 10 and max(len(t) for t, _ in law) < 2500


def test_images_and_djvu_are_read_upright(refreshed: tuple[Path, Settings, dict]) -> None:
    _root, settings, _summary = refreshed
    turned = _pages(settings, "scans/orient_3.png")
    assert turned[0].rotation == 90 and "МЕДВЕДЬ" in turned[0].text
    djvu = _pages(settings, "scans/example_with_table7.djvu")
    assert [p.page for p in djvu] == [1, 2] and "Техническое задание" in djvu[0].text
    searchable = settings.data / "searchable" / "scans" / "orient_3.png.pdf"
    text = subprocess.run(["pdftotext", str(searchable), "-"], capture_output=True, text=True).stdout
    assert "МЕДВЕДЬ" in text


def test_rotated_page_reads_like_the_upright_one(tmp_path: Path) -> None:
    """orient_3.png turned upright by hand is the reference; turned 90/180/270° it must read the same."""
    upright = Image.open(FIXTURE / "scans" / "orient_3.png").convert("L").rotate(-90, expand=True)
    engine = TesseractEngine(orientation=True)

    def as_image(img: Image.Image) -> PageImage:
        buffer = io.BytesIO()
        img.save(buffer, "PPM")
        return PageImage(buffer.getvalue(), 300, img.width * 0.24, img.height * 0.24)

    reference = engine.read(lambda dpi, fmt: as_image(upright), None)
    for degrees in (90, 180, 270):
        turned = engine.read(lambda dpi, fmt, d=degrees: as_image(upright.rotate(-d, expand=True)), None)
        assert turned.rotation == (360 - degrees) % 360
        assert word_f1(turned.text, reference.text) >= 0.9, degrees


def test_korpus_ocr_leaves_none_of_the_broken_layer(tmp_path: Path) -> None:
    source = FIXTURE / "broken-layer" / "ukodeksrf.pdf"
    out = tmp_path / "out.pdf"
    summary = ocr_document(source, out, Settings(data=tmp_path / "data"))
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True).stdout
    old = subprocess.run(["pdftotext", str(source), "-"], capture_output=True, text=True).stdout
    old_words = {w for w in old.split() if len(w) >= 4 and any(ch in w for ch in "]\\^[")}
    assert old_words and not old_words & set(text.split())
    assert measure(text, PageFacts())["cyrillic_share"] >= 0.9
    assert summary["size_growth"] <= 0.02
    with pymupdf.open(out) as doc, pymupdf.open(source) as original:
        assert doc.page_count == original.page_count


def test_source_kinds_come_from_the_reader_registry() -> None:
    kinds = {
        name: source_kind(Path(name)) for name in ("a.PDF", "b.jpeg", "c.tif", "d.djvu", "e.doc", "f.rtf", "g.txt")
    }
    assert [k.value if k else None for k in kinds.values()] == [
        "pdf",
        "image",
        "image",
        "djvu",
        "office",
        "office",
        "text",
    ]
    assert source_kind(Path("x.xyz")) is None
    sha = file_sha256(FIXTURE / "text" / "cp1251.txt")
    assert Source(source_id="t", version=sha, path="/t", kind=source_kind(Path("t.txt"))).kind.paged is False


def test_damaged_files_of_each_new_kind_are_refused_with_a_reason(tmp_path: Path) -> None:
    from tasks.parse import read_source

    (tmp_path / "zero.jpg").write_bytes(b"")
    (tmp_path / "not_an_image.png").write_text("просто текст", encoding="utf-8")
    (tmp_path / "cut.djvu").write_bytes((FIXTURE / "scans" / "example_with_table7.djvu").read_bytes()[:5000])
    (tmp_path / "cut.docx").write_bytes((FIXTURE / "office" / "alpaca_tz.docx").read_bytes()[:3000])
    (tmp_path / "noise.txt").write_bytes(bytes(range(128, 256)) * 8)
    settings = Settings(data=tmp_path / "data")
    for path in sorted(tmp_path.glob("*.*")):
        source = Source(source_id=path.name, version=file_sha256(path), path=str(path), kind=source_kind(path))
        outcome = read_source(source, settings)
        assert [p.reasons[0].value for p in outcome.problems] == ["unreadable-file"], path.name
        assert outcome.problems[0].detail and not outcome.pages, path.name
    assert not (tmp_path / "data" / "converted").exists() or not list((tmp_path / "data" / "converted").rglob("*.pdf"))


def test_web_pages_an_ebook_and_a_macro_word_file_are_refreshed_and_found(models: dict, tmp_path: Path) -> None:
    """tests/fixtures/real-archive-2/office: two real HTML pages, a FictionBook, a .docm (LibreOffice reads it like
    any .docx) and an XLS budget — each indexed, found by its own words, cited by its file."""
    from tasks.retrieval.retriever import retrieve

    root = tmp_path / "archive"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "real-archive-2" / "office", root)
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    summary = run_refresh(root, settings)
    assert summary["quarantined"] == 0, summary["quarantine_reasons"]
    with SqliteIndex(settings.index_path) as index:
        chunks = {s["source_id"]: s["chunks"] for s in index.sources() if s["lifecycle"] == "current"}
        assert set(chunks) == {
            "tika_resume.html",
            "dedoc_example.html",
            "tika_test.fb2",
            "poi_45690_wikipedia.docm",
            "poi_57925_budget.xls",
        }
        assert all(chunks.values()), chunks
        for query, source_id in (
            ("зарегистрированных компаний просмотрели резюме", "tika_resume.html"),
            ("Поясним за непонятное", "dedoc_example.html"),
            ("тестовый файл FictionBook", "tika_test.fb2"),
            ("внутреннего финансирования бюджетов", "poi_57925_budget.xls"),
        ):
            hits = retrieve(index.searcher, query, None, ["public"], k=1, mode="bm25")
            assert hits and hits[0]["source_id"] == source_id, (query, hits[:1])
            assert hits[0]["text"].startswith(f"[{source_id}"), hits[0]["text"][:80]
        (page,) = index.current_source("poi_45690_wikipedia.docm")[1][:1]
        assert page.engine == "libreoffice+pymupdf" and sum("а" <= ch <= "я" for ch in page.text.lower()) > 200

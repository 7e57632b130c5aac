"""A real procurement estimate writes its coefficients with a Latin K inside Cyrillic words («Kзпл=0,2»). As a Word
file's own text (LibreOffice → PDF layer → the detector) it is indexed, not refused `text-quality`; the same words
in a plain text file of unknown origin are still judged (tasks/contract/gate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.corpus_refresh import run_refresh
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.retrieval.retriever import retrieve
from tests.builders import zipped

pytestmark = pytest.mark.integration
LINES = [
    "Смета на ремонт кровли склада № 3.",
    "Kзпл=0,2 — коэффициент к заработной плате рабочих.",
    "Kмат=1,1 — коэффициент к стоимости материалов.",
    "Kтр=0,05 — транспортные расходы подрядчика.",
    "Hp=0,94 — накладные расходы по смете.",
    "Итого по смете с учётом коэффициентов: 1 204 500 рублей.",
]


def odt(lines: list[str]) -> bytes:
    """A minimal OpenDocument text file: the paragraphs as LibreOffice would store them."""
    body = "".join(f"<text:p>{line}</text:p>" for line in lines)
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
        f"<office:body><office:text>{body}</office:text></office:body></office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
        '<manifest:file-entry manifest:full-path="/" '
        'manifest:media-type="application/vnd.oasis.opendocument.text"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
        "</manifest:manifest>"
    )
    return zipped(
        {
            "mimetype": b"application/vnd.oasis.opendocument.text",
            "content.xml": content.encode(),
            "META-INF/manifest.xml": manifest.encode(),
        }
    )


def test_a_word_files_own_mixed_script_text_is_indexed(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults: {owner: снабжение, access: public}\n", encoding="utf-8")
    (root / "смета.odt").write_bytes(odt(LINES))
    (root / "выгрузка_ocr.txt").write_text("\n".join(LINES), encoding="utf-8")
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    summary = run_refresh(root, settings)
    with SqliteIndex(settings.index_path) as index:
        items = index.quarantine_items("open")
        hits = retrieve(index.searcher, "коэффициент к заработной плате", None, ["public"], k=3, mode="bm25")
    assert {i["source_id"] for i in items} == {"выгрузка_ocr.txt"}, items  # the .txt: judged, refused
    assert items[0]["reasons"] == ["text-quality"]
    assert [h["source_id"] for h in hits] == ["смета.odt"] and "Kзпл=0,2" in hits[0]["text"]
    assert summary["quarantine_reasons"] == {"text-quality": 1}

"""Web pages and e-books as text with their structure (tasks/readers/markup.py), on real third-party files
(tests/fixtures/real-archive-2, Apache-2.0) and on pages built here for what the real ones do not show."""

from __future__ import annotations

from pathlib import Path

import pytest

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.readers.markup import MarkupReader, fb2_text, html_text
from tasks.readers.registry import kind_of, reader_for
from tasks.text.structure import text_structure

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-archive-2" / "office"


def test_html_headings_lists_and_tables_become_structure() -> None:
    text, encoding = html_text((FIXTURES / "dedoc_example.html").read_bytes())
    assert encoding == "utf-8"
    assert text.startswith("# Пример документа\n\n## Глава 1")
    assert "### Статья 1" in text and "- 1.2.1. Поясним за непонятное" in text
    assert "Фамилия | Имя | Отчество\nИванов | Иван | Иванович" in text
    headings = [u for u in text_structure(text, markdown=True) if u.kind == "heading"]
    assert [text[u.start : u.end].lstrip("# ") for u in headings][:3] == ["Пример документа", "Глава 1", "Статья 1"]


def test_a_real_job_site_page_keeps_its_text_and_drops_its_markup() -> None:
    text, _ = html_text((FIXTURES / "tika_resume.html").read_bytes())
    assert "Предлагаем Вам ознакомиться со списком зарегистрированных компаний" in text
    assert "<" not in text and "{" not in text and "function" not in text


def test_a_legacy_encoding_and_scripts() -> None:
    page = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
            "<title>Приказ № 5</title><style>p {color: red}</style><script>var x = '<p>не текст</p>';</script>"
            "</head><body><h2>О премировании</h2><p>Премировать&nbsp;сотрудников&nbsp;склада.<br>Подписал "
            "директор.</p><noscript>включите JavaScript</noscript></body></html>").encode("cp1251")  # fmt: skip
    text, encoding = html_text(page)
    assert encoding == "windows-1251"
    assert text == "# Приказ № 5\n\n## О премировании\n\nПремировать сотрудников склада. Подписал директор."


def test_fictionbook_titles_sections_and_paragraphs() -> None:
    text, encoding = fb2_text((FIXTURES / "tika_test.fb2").read_bytes())
    assert encoding.lower() == "utf-8" and text.startswith("# Война и мир\n\n")
    assert "Это тестовый файл FictionBook 2.0." in text
    assert len(text) > 5000 and "<p>" not in text and "<section" not in text and "<binary" not in text


def test_a_broken_fictionbook_and_an_empty_page_are_quarantined(tmp_path: Path) -> None:
    reader = MarkupReader()
    broken, empty = tmp_path / "книга.fb2", tmp_path / "пусто.html"
    broken.write_bytes(b"<?xml version='1.0'?><FictionBook><body><p>\xd0\x9e")
    empty.write_text("<html><head><script>x()</script></head><body> </body></html>", encoding="utf-8")
    for path, reason in ((broken, ReasonCode.unreadable_file), (empty, ReasonCode.empty_text)):
        source = Source(source_id=path.name, version="ab" * 32, path=str(path), kind=SourceKind.markup)
        outcome = reader.read(source, Settings(data=tmp_path))
        assert not outcome.pages and [p.reasons for p in outcome.problems] == [[reason]]


def test_the_registry_gives_web_pages_ebooks_and_macro_word_files_their_readers() -> None:
    assert {kind_of(f"a{s}") for s in (".html", ".HTM", ".xhtml", ".fb2")} == {SourceKind.markup}
    assert {kind_of(f"a{s}") for s in (".docm", ".dotm", ".dotx", ".dot")} == {SourceKind.office}
    assert isinstance(reader_for(SourceKind.markup), MarkupReader)

"""Chunking on real layouts, built in the test: one paragraph per line, over-long paragraphs, running headers and
footers, lines that PDF generators write as separate blocks."""

from __future__ import annotations

import pytest

from korpus.core.datamodel import PageResult, Source, SourceKind, UnitKind
from tasks.contract.chunking import build_chunks, chars_as_tokens
from tasks.contract.furniture import running_lines
from tasks.contract.gate import route_chunks
from tasks.text.structure import _continues, text_structure

pytestmark = pytest.mark.unit
SOURCE = Source(source_id="закон.txt", version="ab" * 32, path="/r", kind=SourceKind.text, owner="А", access="public")


def _page(text: str, number: int = 1) -> PageResult:
    return PageResult(
        source_id=SOURCE.source_id,
        source_version=SOURCE.version,
        page=number,
        text=text,
        method="plain-text",
        units=text_structure(text),
    )


def test_a_law_written_one_paragraph_per_line_is_not_one_giant_item() -> None:
    paragraph = "Оператор обеспечивает защиту персональных данных в информационной системе. " * 6
    text = "\n".join(
        [
            "8. В состав мер по обеспечению безопасности входят:",
            "идентификация и аутентификация субъектов доступа;",
            "управление доступом субъектов доступа к объектам доступа;",
            "регистрация событий безопасности.",
            *[paragraph.strip() for _ in range(12)],
            "9. Меры защиты выбираются оператором.",
        ]
    )
    units = text_structure(text)
    items = [u for u in units if u.kind is UnitKind.list_item]
    assert [text[u.start : u.end][:12] for u in items[:4]] == [
        "8. В состав ",
        "идентификаци",
        "управление д",
        "регистрация ",
    ]
    assert max(u.end - u.start for u in units) < 600
    chunks, _ = build_chunks(SOURCE, [_page(text)], "structure-v2", count=chars_as_tokens)
    passed, refused = route_chunks(chunks)
    assert not refused and max(len(c.body) for c in passed) <= 350 * 4 + 200


def test_an_over_long_paragraph_is_split_at_sentences_never_refused() -> None:
    sentence = "Настоящий порядок применяется ко всем подразделениям организации без исключения и изъятий"
    text = ". ".join([sentence] * 120) + "."  # one line of ~11 000 characters
    chunks, _ = build_chunks(SOURCE, [_page(text)], "structure-v2", count=chars_as_tokens)
    passed, refused = route_chunks(chunks)
    assert not refused and len(passed) >= 8
    assert all(c.body.endswith(".") for c in passed)
    assert all(text[c.locator.start : c.locator.end] == c.body for c in passed)


def test_one_endless_sentence_is_cut_at_spaces() -> None:
    text = " ".join(["слово"] * 3000)
    chunks, _ = build_chunks(SOURCE, [_page(text)], "structure-v2", count=chars_as_tokens)
    assert len(chunks) >= 10 and all(not c.body.startswith(" ") and len(c.body) <= 1500 for c in chunks)


def test_running_headers_and_page_numbers_start_no_chunk() -> None:
    body = "Глава {n}. Требования к системе\n\nСистема должна обеспечивать учёт документов номер {n} в архиве."
    pages = [_page(f"41327606.425000.462-01 33 01\n\n{body.format(n=n)}\n\n{n + 1}", number=n) for n in range(1, 6)]
    assert running_lines(pages) == {"#.#.#-# # #", "#"}
    chunks, _ = build_chunks(
        SOURCE.model_copy(update={"kind": SourceKind.pdf}), pages, "structure-v2", count=chars_as_tokens
    )
    assert chunks and not any(c.body.startswith("41327606") or c.body.rstrip().endswith("\n2") for c in chunks)
    assert not any("41327606" in " ".join(c.section_path) for c in chunks)


def test_pdf_line_blocks_continue_a_paragraph_only_mid_sentence_and_close_below() -> None:
    """Generators that write every line as its own block: the block just below continues the paragraph when the
    one before stops mid-sentence or this one starts in lowercase — not after a full stop, not across a gap."""
    before = {"bbox": (72.0, 100.0, 540.0, 112.0)}
    below = {"bbox": (72.0, 114.0, 540.0, 126.0)}
    far = {"bbox": (72.0, 140.0, 540.0, 152.0)}
    indented = {"bbox": (300.0, 114.0, 540.0, 126.0)}
    mid = (before, "Документы хранятся в архиве не позднее трёх лет после")
    assert _continues(mid, below, "их создания, в порядке,", 11.0)
    assert _continues((before, "Документы хранятся в архиве."), below, "и передаются в архив.", 11.0)
    assert not _continues((before, "Документы хранятся в архиве."), below, "За исключением документов.", 11.0)
    assert not _continues(mid, far, "их создания", 11.0)
    assert not _continues(mid, indented, "их создания", 11.0)


def test_an_exception_line_is_never_a_heading() -> None:
    text = "Документы хранятся три года.\n\nЗа исключением документов по личному составу\n\nПравила хранения"
    kinds = [(u.kind, text[u.start : u.end][:6]) for u in text_structure(text)]
    assert (UnitKind.sentence, "За иск") in kinds and (UnitKind.heading, "Правил") in kinds

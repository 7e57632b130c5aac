import pytest

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind, timecode
from tasks.audio.decode import SpeechSegment, group_speech, transcript_text
from tasks.contract.chunking import page_chunks

pytestmark = pytest.mark.unit

SOURCE = Source(
    source_id="тома/том_2.pdf",
    version="ab" * 32,
    path="/r/тома/том_2.pdf",
    kind=SourceKind.pdf,
    owner="Архив",
    access="public",
    tenant="default",
)


def _page(n: int, text: str) -> PageResult:
    return PageResult(source_id=SOURCE.source_id, source_version=SOURCE.version, page=n, text=text, method="x")


def test_chunk_text_starts_with_its_address_and_body_is_exact_substring() -> None:
    text = "\n  «Ёлочки» и ё — не трогать:  два  пробела.\n\n"
    chunks, empty = page_chunks(SOURCE, [_page(147, text)])
    assert not empty
    chunk = chunks[0]
    assert chunk.text.startswith("[том_2.pdf · лист 147]\n")
    assert chunk.text.endswith(chunk.body)
    assert text[chunk.locator.start : chunk.locator.end] == chunk.body
    assert "«Ёлочки» и ё" in chunk.body and "два  пробела" in chunk.body
    assert (chunk.owner, chunk.access_rule, chunk.locator.page) == ("Архив", "public", 147)


def test_neighbours_are_linked_and_ids_stable() -> None:
    first, _ = page_chunks(SOURCE, [_page(1, "один"), _page(2, "два"), _page(3, "три")])
    again, _ = page_chunks(SOURCE, [_page(1, "один"), _page(2, "два"), _page(3, "три")])
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]
    assert first[0].previous_id is None and first[0].next_id == first[1].chunk_id
    assert first[2].previous_id == first[1].chunk_id and first[2].next_id is None


def test_empty_page_is_a_quarantine_item_not_a_silent_drop() -> None:
    chunks, empty = page_chunks(SOURCE, [_page(1, "текст"), _page(2, " \n ")])
    assert len(chunks) == 1
    assert empty[0].page == 2 and empty[0].reasons == [ReasonCode.empty_text]


def test_a_blank_page_is_no_item_and_headings_nothing_follows_are_a_chunk() -> None:
    """A page with nothing drawn on it (method `blank`, tasks/readers/pdf.py) is neither a chunk nor an item; a
    document that ends in headings only — a title page before a blank back side — keeps them as its last chunk
    (before, they waited for a page that never came: no chunk, no item, the document silently gone)."""
    from tasks.contract.chunking import build_chunks
    from tasks.text.structure import text_structure

    title = "# Протокол заседания комиссии\n"
    pages = [
        _page(1, title).model_copy(update={"units": text_structure(title, markdown=True)}),
        _page(2, "").model_copy(update={"method": "blank"}),
    ]
    chunks, empty = build_chunks(SOURCE, pages)
    assert empty == [] and [c.locator.page for c in chunks] == [1] and "Протокол заседания" in chunks[0].body
    chunks, empty = build_chunks(SOURCE, [*pages, _page(3, "Слушали: о поставке насосов.")])
    assert empty == [] and [c.locator.page for c in chunks] == [3] and chunks[0].section_path[0].startswith("Протокол")


def test_speech_chunk_address_is_a_timecode() -> None:
    audio = SOURCE.model_copy(update={"source_id": "записи/допрос_03.mp3", "kind": SourceKind.audio})
    stretch = PageResult(
        source_id=audio.source_id,
        source_version=audio.version,
        t_start=754.2,
        t_end=790.0,
        text="[00:12:34] Показания свидетеля.",
        method="whisper",
    )
    chunks, _ = page_chunks(audio, [stretch])
    assert chunks[0].text.startswith("[допрос_03.mp3 · 00:12:34]\n")
    assert (chunks[0].locator.t_start, chunks[0].locator.t_end) == (754.2, 790.0)


def test_timecode_format() -> None:
    assert timecode(0) == "00:00:00"
    assert timecode(754.9) == "00:12:34"
    assert timecode(3 * 3600 + 5) == "03:00:05"


def test_speech_groups_never_cut_a_segment() -> None:
    segments = [SpeechSegment(start=s, end=s + 20, text=f"фраза {i}") for i, s in enumerate((0, 25, 50, 80, 130))]
    groups = group_speech(segments, 60)
    assert [len(g) for g in groups] == [2, 2, 1]
    assert [s for g in groups for s in g] == segments
    assert all(g[-1].end - g[0].start <= 60 for g in groups)
    assert transcript_text(groups[1]).splitlines()[0] == "[00:00:50] фраза 2"

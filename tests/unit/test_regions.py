"""Word boxes and chunk regions (tasks/text/regions.py) as properties: whatever order a text's builder put the
reader's words in, every word is found at a token of its own spelling; boxes survive their compact form; a box
turned with the page and back is where it was; a text edited after reading has no boxes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from korpus.core.datamodel import PageResult
from tasks.text.regions import Box, align, decode, encode, page_boxes, regions, unturn

pytestmark = pytest.mark.unit
WORD = st.text(alphabet="абвгдежзиклмнопрстуфхцчшщыэюяАБВ0123456789.,«»-", min_size=1, max_size=8)


def _layout(lines: list[list[str]]) -> list[Box]:
    return [
        Box(w, 10 + 40 * i, 20 * n, 10 + 40 * i + 30, 20 * n + 12, n)
        for n, line in enumerate(lines)
        for i, w in enumerate(line)
    ]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(WORD, min_size=1, max_size=6), min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_every_word_lands_on_a_token_of_its_spelling_whatever_the_block_order(
    lines: list[list[str]], rnd: random.Random
) -> None:
    words = _layout(lines)
    blocks = ["\n".join(" ".join(line) for line in lines[i : i + 2]) for i in range(0, len(lines), 2)]
    rnd.shuffle(blocks)  # the text's builder moved blocks (tables to rows, furniture to the page end)
    text = "\n\n".join(blocks)
    aligned = align(text, words)
    assert sorted((b.x0, b.y0) for _s, _e, b in aligned) == sorted((b.x0, b.y0) for b in words)
    assert all(text[s:e] == b.text for s, e, b in aligned)
    page = PageResult(
        source_id="a",
        source_version="v",
        page=1,
        text=text,
        method="tesseract",
        size=(400.0, 600.0),
        boxes=encode(text, aligned),
    )
    whole = regions(page, 0, len(text))
    assert len(whole) == len(lines)  # one rectangle per line
    assert {(r.y0, r.y1) for r in whole} == {(20 * n, 20 * n + 12) for n in range(len(lines))}


def test_hyphenated_halves_and_case_blind_matches_are_found() -> None:
    words = [Box("Догово-", 0, 0, 50, 10, 0), Box("ром", 0, 12, 20, 22, 1), Box("«ООО»", 30, 12, 60, 22, 1)]
    aligned = align("Договором ооо", words)
    assert [(s, e, b.text) for s, e, b in aligned] == [(0, 9, "Догово-"), (0, 9, "ром"), (10, 13, "«ООО»")]


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_a_box_read_on_the_turned_page_comes_back_where_it_is_on_the_page(degrees: int) -> None:
    width, height = 40, 60
    page = Image.new("L", (width, height), 255)
    page.paste(0, (5, 7, 15, 12))  # a dark word at x 5..15, y 7..12 of the page as stored
    turned = page.rotate(-degrees, expand=True)  # what OCR read: turned clockwise
    dark = [(x, y) for x in range(turned.width) for y in range(turned.height) if turned.getpixel((x, y)) == 0]
    xs, ys = [x for x, _ in dark], [y for _, y in dark]
    read = Box("слово", min(xs), min(ys), max(xs) + 1, max(ys) + 1, 0)
    back = unturn(read, degrees, width, height)
    assert (back.x0, back.y0, back.x1, back.y1) == (5, 7, 15, 12)


def test_boxes_are_kept_compactly_and_only_for_their_own_text() -> None:
    text = "Акт приёмки работ"
    words = [Box("Акт", 10, 10, 30, 20, 0), Box("приёмки", 35, 10, 80, 20, 0), Box("работ", 85, 10, 120.04, 20, 0)]
    kept = page_boxes(text, words)
    assert decode(text, kept).tolist()[2] == [12, 17, 850, 100, 1200, 200, 0]
    page = PageResult(
        source_id="a.pdf", source_version="v", page=1, text=text, method="tesseract", size=(200.0, 300.0), boxes=kept
    )
    assert [(r.x0, r.x1) for r in regions(page, 4, 11)] == [(35.0, 80.0)]
    edited = page.model_copy(update={"text": "Акт приёмки работ (исправлено)"})
    assert decode(edited.text, kept) is None and regions(edited, 4, 11) == []  # an edit has no boxes


def test_a_page_read_without_word_boxes_is_the_whole_page_marked_as_such() -> None:
    vlm = PageResult(source_id="a.pdf", source_version="v", page=2, text="Текст", method="vlm", size=(100.0, 200.0))
    assert [(r.whole_page, r.x1, r.y1) for r in regions(vlm, 0, 5)] == [(True, 100.0, 200.0)]
    speech = PageResult(source_id="a.ogg", source_version="v", t_start=0.0, text="Текст", method="whisper")
    assert regions(speech, 0, 5) == []

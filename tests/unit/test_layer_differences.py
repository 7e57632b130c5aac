"""`layer_differences`: a copy's page against the text korpus indexed for it — the same words in any order, a word
hyphenated at a line's end counted once whether pdftotext joined its halves or not, and anything else reported."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.pdf.validate import layer_differences

pytestmark = pytest.mark.unit

WORD = st.text(alphabet="абвгдеёжзийклмнопрстуфхцчшщъыьэюяABCxyz0123456789", min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.lists(WORD, min_size=1, max_size=6), min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_the_same_words_in_any_order_and_either_reading_of_a_hyphen_differ_in_nothing(
    lines: list[list[str]], seed: int
) -> None:
    rng = random.Random(seed)
    # a line ends with a hyphen only before a line of two words or more (a word hyphenated at both ends is not text)
    hyphen = [rng.random() < 0.5 and len(nxt) >= 2 for nxt in [*lines[1:], []]]
    indexed = "".join(" ".join(line) + ("-\n" if h else "\n") for line, h in zip(lines, hyphen, strict=True))
    copy_words = []  # as pdftotext reads the copy: the halves of a line-end hyphen joined, or not
    for line, h, nxt in zip(lines, hyphen, [*lines[1:], []], strict=True):
        copy_words += line
        if h and rng.random() < 0.5:
            copy_words[-1] += nxt.pop(0)
    rng.shuffle(copy_words)
    assert layer_differences(" ".join(copy_words), indexed) == (Counter(), Counter())


def test_a_word_the_copy_lacks_or_adds_is_reported() -> None:
    indexed = "Статья 1. Уголовное законодательство\nРоссийской Федерации"
    assert layer_differences("Статья Уголовное законодательство Российской Федерации", indexed) == (
        Counter(),
        Counter({"1": 1}),
    )
    assert layer_differences(indexed + " M]heh", indexed) == (Counter({"m": 1, "heh": 1}), Counter())
    # a hyphen in the middle of a line is no line-end hyphen: joined halves are two words lacking and one extra
    assert layer_differences("уголовноправового", "уголовно-правового") == (
        Counter({"уголовноправового": 1}),
        Counter({"уголовно": 1, "правового": 1}),
    )

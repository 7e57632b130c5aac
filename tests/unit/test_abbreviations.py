"""Abbreviations a document defines (tasks/meta/abbreviations.py), as properties over generated pages: every use
found is the abbreviation as a word of its own, outside the brackets that define it and outside every span a mention
already holds — and none is missed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.meta.abbreviations import defined_after, defined_uses

pytestmark = pytest.mark.unit
FILLER = st.sampled_from(
    ["Заседание", "проводит", "решение", "ГАКА", "(ГАК-2)", "ГАКом", "и", "ГАК", "ГАК.", "(ГАК)", "\n", "по", "ГАК,"]
)


@given(st.lists(FILLER, max_size=30), st.booleans())
def test_every_use_of_a_defined_abbreviation_is_found_outside_its_definition(words: list[str], taken: bool) -> None:
    head = "Государственной аттестационной комиссии (далее ГАК) "
    assert defined_after(head, head[: head.index(" (")], head.index(" (")) == "ГАК"
    text = head + " ".join(words)
    spans = [(0, head.index(" ("))] + ([(len(head), len(head) + 12)] if taken else [])
    uses = defined_uses(text, {"ГАК": "Государственная аттестационная комиссия"}, spans)
    expected = [
        m.start()
        for m in re.finditer(r"(?<![\wА-ЯЁа-яё-])ГАК(?![\wА-ЯЁа-яё-])", text)
        if not text[max(0, m.start() - 7) : m.start()].endswith(("далее ", "("))  # its definition, «(ГАК)»
        and not any(a < m.end() and m.start() < b for a, b in spans)
    ]
    assert [a for a, _b, _name in uses] == expected
    assert all(text[a:b] == "ГАК" for a, b, _ in uses)


@given(st.sampled_from(["ФСБ", "ГАК", "МВД"]), st.sampled_from(["Федеральная служба", "Комиссия", "Министерство"]))
def test_an_abbreviation_defines_a_body_only_with_the_names_first_letter(abbreviation: str, name: str) -> None:
    text = f"{name} ({abbreviation})"
    assert (defined_after(text, name, len(name)) == abbreviation) == (abbreviation[0] == name[0])

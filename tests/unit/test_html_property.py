"""Every text a browser renders is in korpus's text of the page, in order — a property over generated documents:
nested elements, end tags left out where the standard lets a parser infer them, a missing `</head>` and
`</body>`, `iframe`/`object`/`noscript` with content, comments, scripts and styles (whose text is never rendered),
entities, and legacy encodings declared in a `<meta>` or not declared at all."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.readers.markup import html_text, html_to_text

pytestmark = pytest.mark.unit

WORDS = ("приказ", "договор", "поставка", "склад", "премия", "ремонт", "кровля", "насос", "акт", "сверка")
CONTAINERS = (
    "div",
    "p",
    "span",
    "b",
    "i",
    "a",
    "section",
    "li",
    "h2",
    "blockquote",
    "iframe",
    "object",
    "noscript",
    "em",
    "strong",
    "font",
    "center",
)
HIDDEN = ("script", "style")


class Doc:
    """A document being written, and the texts a browser renders from it, in order."""

    def __init__(self) -> None:
        self.counter = 0
        self.visible: list[str] = []

    def word(self, draw: st.DrawFn) -> str:
        self.counter += 1
        token = f"{draw(st.sampled_from(WORDS))}{self.counter}"
        self.visible.append(token)
        return token


@st.composite
def content(draw: st.DrawFn, doc: Doc, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["text", "text", "element", "comment", "hidden", "entity", "table"]))
        if kind == "text" or (depth >= 4 and kind in ("element", "table")):
            parts.append(doc.word(draw) + " ")
        elif kind == "entity":
            word = doc.word(draw)
            parts.append(f"{word}&nbsp;&amp;&#1046; ")
            doc.visible.append("&")
            doc.visible.append("Ж")
        elif kind == "comment":
            parts.append(f"<!-- {draw(st.sampled_from(WORDS))}скрыт -->")
        elif kind == "hidden":
            tag = draw(st.sampled_from(HIDDEN))
            parts.append(f"<{tag}>var {draw(st.sampled_from(WORDS))}скрыт = '<p>скрыт</p>';</{tag}>")
        elif kind == "table":  # cells hold the text (text loose in a table is moved before it by the standard)
            cells = "".join(f"<td>{doc.word(draw)}" + ("</td>" if draw(st.booleans()) else "") for _ in range(2))
            parts.append(f"<table><tr>{cells}</tr></table>")
        else:
            tag = draw(st.sampled_from(CONTAINERS))
            inner = draw(content(doc, depth + 1))
            closed = draw(st.booleans()) or tag in ("iframe", "noscript", "object")
            if tag == "li":
                parts.append(f"<ul><li>{inner}" + ("</li>" if closed else "") + "</ul>")
            else:
                parts.append(f"<{tag}>{inner}" + (f"</{tag}>" if closed else ""))
    return "".join(parts)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[str]]:
    doc = Doc()
    head = ""
    if draw(st.booleans()):
        head = f"<head><title>{doc.word(draw)}</title>" + ("</head>" if draw(st.booleans()) else "")
    body = draw(content(doc))
    closing = "</body></html>" if draw(st.booleans()) else ""
    return f"<!DOCTYPE html><html>{head}<body>{body}{closing}", doc.visible


def _in_order(expected: list[str], text: str) -> list[str]:
    """The expected pieces not found in `text` in order (empty: all are, in order)."""
    flat, at, missing = " ".join(text.split()), 0, []
    for piece in expected:
        found = flat.find(piece, at)
        if found < 0:
            missing.append(piece)
        else:
            at = found + len(piece)
    return missing


@settings(max_examples=300, deadline=None)
@given(documents())
def test_every_rendered_text_is_kept_in_order(generated: tuple[str, list[str]]) -> None:
    markup, visible = generated
    text = html_to_text(markup)
    assert _in_order(visible, text) == [], (markup, text)
    assert "скрыт" not in text, (markup, text)
    assert "<" not in text.replace("&lt;", ""), (markup, text)


@settings(max_examples=100, deadline=None)
@given(documents(), st.sampled_from(["utf-8", "windows-1251", "koi8-r"]), st.booleans())
def test_legacy_encodings_declared_or_not(generated: tuple[str, list[str]], encoding: str, declared: bool) -> None:
    markup, visible = generated
    words = " ".join(w for w in visible if re.match(r"\w", w))
    page = markup.replace("<body>", f"<body><p>{words}</p>", 1)  # enough text to tell the encoding by
    if declared:
        page = page.replace("<html>", f'<html><meta charset="{encoding}">', 1)
    text, _ = html_text(page.encode(encoding))
    assert _in_order(visible, text) == [], (encoding, declared, text)


def test_the_reported_pages_keep_their_text() -> None:
    assert html_to_text("<html><head><title>Приказ</title><body><p>Текст договора поставки</p>") == (
        "# Приказ\n\nТекст договора поставки"
    )
    assert _in_order(["до", "после", "ещё текст"], html_to_text("<p>до<iframe src=x>после</p><p>ещё текст</p>")) == []
    assert (
        _in_order(["Описание", "Конец"], html_to_text("<object data=a.swf><p>Описание</p></object><p>Конец</p>")) == []
    )

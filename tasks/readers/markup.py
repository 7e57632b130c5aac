"""Web pages, feeds and e-books: HTML (.html, .htm, .xhtml), saved web archives (.mht, .mhtml), XML — RSS and Atom
feeds item by item, any other XML as its text — FictionBook (.fb2) and EPUB (.epub), read as text with structure.

The page becomes Markdown-like text — `#` headings from `<h1>`…`<h6>` (or FictionBook's book and section titles),
paragraphs apart, list items as `- `, table rows with cells joined by ` | ` — so the chunker keeps headings with
their text (tasks/text/structure.py, `markdown=True`). The page is parsed as a browser parses it (selectolax's Lexbor,
an HTML5 parser: a missing `</head>`, unclosed elements and stray end tags are repaired the way the standard says),
and every text a browser renders is kept, in order: only scripts, styles, templates and comments are never text
(and `<head>`, whose one text is the title — kept as the first heading). The fallback content of `<iframe>`,
`<noembed>` and `<noframes>` (raw text to the parser) is parsed again as markup and kept: no text is dropped for
sitting inside an element a browser would replace. The encoding is the one the file declares (`<meta charset>`,
`http-equiv`, the XML prolog), else the same detection as a text file (tasks/readers/text.py). One page per file,
like a text file: an EPUB's chapters follow one another in its reading order (the spine), a feed's items each under
its own heading with its date.

The module runs over 400 lines because the five forms share one output budget and one HTML walker, which a split
would pull apart.
Every form has a total output budget (`MARKUP_MAX_TEXT_CHARS`): a small file that expands past it — a spine naming
one chapter thousands of times, fallback content nested thousands deep — is refused with that reason, never read
until it exhausts the refresh's memory. An EPUB's spine reads each chapter once, and the chapters' unpacked bytes
share one budget (`EPUB_MAX_TOTAL_BYTES`). Fallback content is parsed again only while the characters parsed again
stay within the page's own length (`_ReparseBudget`): beyond that, nested fallback is kept as its text with the tags
taken out, so the work grows with the page, not with the square of its nesting.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.base import ParseOutcome, UnreadableSourceError, problem, whole_file_page
from tasks.readers.text import decode_text

_SKIPPED = {"script", "style", "template", "head"}  # head: its title is read on the way (`in_title`)
_REPARSED = {"iframe", "noembed", "noframes"}  # raw text to an HTML5 parser: parsed again as markup
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "nav",
    "blockquote",
    "pre",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "table",
    "form",
    "fieldset",
    "address",
    "figure",
    "figcaption",
    "center",
    "body",
    "html",
    "iframe",
    "noembed",
    "noframes",
}
_DECLARED = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-]+)""", re.I)


MARKUP_MAX_TEXT_CHARS = 32 * 2**20
"""The most text one web page, feed or e-book gives (32 Mi characters: ten thousand pages of a book)."""
_TAGS = re.compile(r"<[^>]*>")
_UNRENDERED = re.compile(r"<!--.*?(?:-->|\Z)|<(script|style)\b.*?(?:</\1\s*>|\Z)", re.IGNORECASE | re.DOTALL)
"""Comments, scripts and styles in fallback content past the reparse budget: never rendered (an unclosed one runs to
the end, as a parser reads it)."""


class MarkupTooLargeError(UnreadableSourceError):
    """The file's text passes its output budget."""


def _too_large(what: str) -> MarkupTooLargeError:
    return MarkupTooLargeError(
        f"{what} gives more than {MARKUP_MAX_TEXT_CHARS:,} characters of text (the output budget of a web page or "
        "e-book): a file that expands this far is refused rather than read to the end"
    )


def _collapse(text: str) -> str:
    return " ".join(text.split())


class _HtmlText:
    """The visible text of a page, as Markdown-like lines, from start tags, end tags and text in document order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.current: list[str] = []
        self.skipping = 0
        self.title: list[str] = []
        self.in_title = False
        self.prefix = ""
        self.cells: list[str] | None = None
        self.chars = 0

    def _flush(self, blank: bool = True) -> None:
        text = _collapse("".join(self.current))
        self.current = []
        if text:
            self.lines.append(self.prefix + text)
        self.prefix = ""
        if blank and self.lines and self.lines[-1] != "":
            self.lines.append("")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in _SKIPPED:
            self.skipping += 1
            return
        if self.skipping:
            return
        if tag == "br":
            self.current.append("\n")
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self.prefix = "#" * int(tag[1]) + " "
        elif tag == "li":
            self._flush(blank=False)
            self.prefix = "- "
        elif tag == "tr":
            self._flush(blank=False)
            self.cells = []
        elif tag in ("td", "th") and self.cells is not None:
            self.cells.append(_collapse("".join(self.current)))
            self.current = []
        elif tag in _BLOCKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _SKIPPED:
            self.skipping = max(0, self.skipping - 1)
            return
        if self.skipping:
            return
        if re.fullmatch(r"h[1-6]", tag) or tag in _BLOCKS:
            self._flush()
        elif tag == "li":
            self._flush(blank=False)
        elif tag == "tr" and self.cells is not None:
            self.cells.append(_collapse("".join(self.current)))
            self.current = []
            row = " | ".join(cell for cell in self.cells if cell)
            if row:
                self.lines.append(row)
            self.cells = None

    def handle_data(self, data: str) -> None:
        self.chars += len(data)
        if self.chars > MARKUP_MAX_TEXT_CHARS:
            raise _too_large("the page")
        if self.in_title:
            self.title.append(data)
        if not self.skipping:
            self.current.append(data)

    def text(self) -> str:
        self._flush()
        title = _collapse("".join(self.title))
        body = "\n".join(self.lines).strip()
        body = re.sub(r"\n{3,}", "\n\n", body)
        if title and not body.startswith(("# " + title, title)):
            body = f"# {title}\n\n{body}" if body else f"# {title}"
        return body


def html_text(raw: bytes) -> tuple[str, str]:
    """(text, encoding) of an HTML page."""
    declared = _DECLARED.search(raw[:4096])
    text = None
    if declared:
        try:
            name = declared[1].decode("ascii").lower()
            text, encoding = raw.decode(name), name
        except (LookupError, UnicodeDecodeError):
            text = None
    if text is None:
        text, encoding = decode_text(raw)
    return html_to_text(text), encoding


class _ReparseBudget:
    """Characters of fallback content that may still be parsed again: the page's own length. Nested unclosed
    `<iframe>`s hold the rest of the page each, so parsing every level again costs the square of the page."""

    def __init__(self, chars: int) -> None:
        self.left = chars
        self.reparsed = 0

    def take(self, chars: int) -> bool:
        if chars > self.left:
            return False
        self.left -= chars
        self.reparsed += chars
        return True


def html_to_text(markup: str, budget: _ReparseBudget | None = None) -> str:
    """The visible text of decoded HTML (a web page, a letter's text/html part), headings as `#`."""
    from selectolax.lexbor import LexborHTMLParser

    if len(markup) > 4 * MARKUP_MAX_TEXT_CHARS:
        raise _too_large("the page")
    sink = _HtmlText()
    _walk(LexborHTMLParser(markup).root, sink, budget or _ReparseBudget(len(markup)))
    return sink.text()


def _fallback_children(node: Any, budget: _ReparseBudget) -> list[Any]:
    """An `<iframe>`'s (`<noembed>`'s, `<noframes>`') raw fallback content as parsed markup while the budget lasts;
    past it, one text node of the content without its tags, comments, scripts and styles and with its character
    references decoded (linear in its length; the HTML property found «&#1046;» left as written and a script's text
    kept, past the budget)."""
    from selectolax.lexbor import LexborHTMLParser

    raw = node.text(deep=True)
    if budget.take(len(raw)):
        inner = LexborHTMLParser(raw).body
        return list(inner.iter(include_text=True)) if inner is not None else []
    return [_Text(html.unescape(_TAGS.sub(" ", _UNRENDERED.sub(" ", raw))))]


class _Text:
    """A text node made here (fallback content past the reparse budget), shaped as selectolax's."""

    tag = "-text"

    def __init__(self, text: str) -> None:
        self.text_content = text


def _walk(root: Any, sink: _HtmlText, budget: _ReparseBudget) -> None:
    """The parsed tree's start tags, text and end tags, in document order (a stack: no recursion limit on nesting)."""
    if root is None:
        return
    stack: list[tuple[Any, bool]] = [(root, True)]
    while stack:
        node, entering = stack.pop()
        tag = node.tag
        if not entering:
            sink.handle_endtag(tag)
            continue
        if tag == "-text":
            sink.handle_data(node.text_content or "")
            continue
        if tag.startswith("-"):  # comments, doctype
            continue
        sink.handle_starttag(tag, [])
        stack.append((node, False))
        if tag in _REPARSED:  # its fallback content, as markup
            children = _fallback_children(node, budget)
        else:
            children = list(node.iter(include_text=True))
        stack.extend((child, True) for child in reversed(children))


def declared_xml_encoding(raw: bytes) -> str:
    """The encoding an XML prolog declares (`<?xml … encoding="windows-1251"?>`), else XML's default."""
    found = re.match(rb"<\?xml[^>]*encoding=[\"']([^\"']+)", raw)
    return found[1].decode("ascii", "replace") if found else "utf-8"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _inline(element: ElementTree.Element) -> str:
    return _collapse("".join(element.itertext()))


def fb2_text(raw: bytes) -> tuple[str, str]:
    """(text, encoding) of a FictionBook 2 file: the book title, the annotation, then every section with its title
    as a heading (nested sections one level deeper), paragraphs, poems and epigraphs; images are skipped."""
    try:
        root = ElementTree.fromstring(raw)
    except ElementTree.ParseError as exc:
        raise UnreadableSourceError(f"not a readable FictionBook (XML) file: {exc}") from exc
    encoding = declared_xml_encoding(raw)
    lines: list[str] = []

    def walk(element: ElementTree.Element, depth: int) -> None:
        for child in element:
            name = _local(child.tag)
            if name == "title":
                heading = " ".join(_inline(p) for p in child if _inline(p))
                if heading:
                    lines.extend(["#" * min(depth, 6) + " " + heading, ""])
            elif name == "section":
                walk(child, depth + 1)
            elif name in ("p", "v", "subtitle", "text-author"):
                if text := _inline(child):
                    lines.extend([text, ""])
            elif name in ("poem", "stanza", "epigraph", "cite", "annotation"):
                walk(child, depth)
            elif name == "empty-line":
                continue

    for element in root.iter():
        if _local(element.tag) == "book-title" and _inline(element):
            lines.extend([f"# {_inline(element)}", ""])
            break
    for element in root.iter():
        if _local(element.tag) == "annotation":
            walk(element, 2)
            break
    for body in (e for e in root if _local(e.tag) == "body"):
        walk(body, 2)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return text, encoding


def _xml(raw: bytes, what: str) -> ElementTree.Element:
    try:
        return ElementTree.fromstring(raw)
    except ElementTree.ParseError as exc:
        raise UnreadableSourceError(f"not a readable {what} (XML): {exc}") from exc


def _child_text(element: ElementTree.Element, *names: str) -> str:
    for child in element:
        if _local(child.tag) in names:
            return "".join(child.itertext()).strip()
    return ""


def xml_text(raw: bytes) -> tuple[str, str]:
    """An RSS or Atom feed: its title, then each item as a `##` heading with its date and its text (HTML in a
    description turned to text). Any other XML: the text of its elements, one per line."""
    root = _xml(raw, "XML file")
    encoding = declared_xml_encoding(raw)
    kind = _local(root.tag)
    channel = next((c for c in root if _local(c.tag) == "channel"), root) if kind in ("rss", "RDF") else root
    items = [e for e in (root.iter() if kind == "RDF" else channel) if _local(e.tag) in ("item", "entry")]
    if kind in ("rss", "RDF", "feed"):
        lines = [f"# {title}", ""] if (title := _child_text(channel, "title")) else []
        for item in items:
            lines += [f"## {_child_text(item, 'title') or 'без заголовка'}", ""]
            if when := _child_text(item, "pubDate", "date", "updated", "published"):
                lines += [when, ""]
            body = _child_text(item, "encoded", "content", "description", "summary")
            lines += [html_to_text(body) if "<" in body else body, ""]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(), encoding
    parts = (" ".join(t.split()) for t in root.itertext())
    return "\n".join(p for p in parts if p), encoding


def mht_text(raw: bytes) -> tuple[str, str]:
    """A web page saved with its pictures (MHTML, a MIME message): the text of its HTML part."""
    import email
    import email.policy

    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    for part in message.walk():
        if part.get_content_type() in ("text/html", "text/plain"):
            payload = part.get_payload(decode=True) or b""
            charset = part.get_content_charset()
            try:
                text = payload.decode(charset) if charset else decode_text(payload)[0]
            except (LookupError, UnicodeDecodeError):
                text = decode_text(payload)[0]
            if part.get_content_subtype() == "html":
                text = html_to_text(text)
            return text, charset or "detected"
    raise UnreadableSourceError("not a saved web page: no HTML part in the MHTML file")


EPUB_MAX_MEMBER_BYTES = 64 * 1024 * 1024
EPUB_MAX_TOTAL_BYTES = 256 * 1024 * 1024
"""The chapters of one EPUB unpack to at most this many bytes together (each chapter read once)."""


def epub_text(path: Path) -> tuple[str, str]:
    """An EPUB: its chapters' text in reading order (the OPF spine), each chapter once however often the spine
    names it, within the unpacked-bytes and text budgets."""
    import posixpath
    import zipfile

    try:
        book = zipfile.ZipFile(path)
        container = _xml(book.read("META-INF/container.xml"), "EPUB container")
        opf_path = next(e.get("full-path") for e in container.iter() if _local(e.tag) == "rootfile")
        opf = _xml(book.read(opf_path), "EPUB package")
    except (zipfile.BadZipFile, KeyError, StopIteration, OSError) as exc:
        raise UnreadableSourceError(f"not a readable EPUB: {exc}") from exc
    with book:
        base = posixpath.dirname(opf_path)
        manifest = {e.get("id"): e.get("href") for e in opf.iter() if _local(e.tag) == "item"}
        chapters: list[str] = []
        seen: set[str] = set()
        unpacked = chars = 0
        for ref in (e for e in opf.iter() if _local(e.tag) == "itemref"):
            href = manifest.get(ref.get("idref"))
            if not href:
                continue
            name = posixpath.normpath(posixpath.join(base, href.split("#")[0]))
            if name in seen:  # a spine that names a chapter again: it was read once, in its first place
                continue
            seen.add(name)
            try:
                info = book.getinfo(name)
            except KeyError:
                continue
            if info.file_size > EPUB_MAX_MEMBER_BYTES:
                raise UnreadableSourceError(f"an EPUB chapter unpacks to over {EPUB_MAX_MEMBER_BYTES >> 20} MiB")
            unpacked += info.file_size
            if unpacked > EPUB_MAX_TOTAL_BYTES:
                raise UnreadableSourceError(f"the EPUB's chapters unpack to over {EPUB_MAX_TOTAL_BYTES >> 20} MiB")
            chapters.append(html_text(book.read(info))[0])
            chars += len(chapters[-1])
            if chars > MARKUP_MAX_TEXT_CHARS:
                raise _too_large("the e-book")
    return "\n\n".join(c for c in chapters if c.strip()), "utf-8"


FORMS = {".fb2": "fb2", ".xml": "xml", ".rss": "xml", ".atom": "xml", ".mht": "mht", ".mhtml": "mht", ".epub": "epub"}


class MarkupReader:
    kind = SourceKind.markup
    suffixes = (".html", ".htm", ".xhtml", *FORMS)

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        outcome = ParseOutcome(page_count=1)
        path = Path(source.path)
        form = FORMS.get(Path(source.source_id).suffix.lower(), "html")
        read_form = {
            "fb2": lambda: fb2_text(path.read_bytes()),
            "xml": lambda: xml_text(path.read_bytes()),
            "mht": lambda: mht_text(path.read_bytes()),
            "epub": lambda: epub_text(path),
            "html": lambda: html_text(path.read_bytes()),
        }[form]
        try:
            text, encoding = read_form()
        except UnreadableSourceError as exc:
            outcome.problems.append(problem(source, ReasonCode.unreadable_file, str(exc)))
            return outcome
        if len(text) > MARKUP_MAX_TEXT_CHARS:  # a feed of many items, each within its own budget
            outcome.problems.append(problem(source, ReasonCode.unreadable_file, str(_too_large(f"the {form} file"))))
            return outcome
        if not text.strip():
            outcome.problems.append(problem(source, ReasonCode.empty_text, "the page holds no visible text", 1))
            return outcome
        outcome.pages.append(whole_file_page(source, text, "markup", f"{form} ({encoding})", markdown=True))
        return outcome

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        raise UnreadableSourceError("a web page or e-book has no page images")

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None

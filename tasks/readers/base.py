"""The Reader interface: one reader per file kind (the table of them is tasks/readers/registry.py).

A reader does tier 0 of PARSE for its kind — the text the file itself holds (a PDF or DjVu text layer, a decoded
text file, the PDF LibreOffice makes of a Word file) — and lists the pages that need OCR; for those it supplies
page images to the OCR tiers. Recordings have their own fan-out (tasks/audio/speech.py) and register only their
suffixes. A new format is one class, and one line in the registry's table (or an entry point of the group
`korpus.readers` for a plug-in package):

    class Markdownish:
        kind, suffixes = SourceKind.text, (".note",)
        def read(self, source, settings): ...            # → ParseOutcome
        def page_image(self, source, page, settings): ... # → PageImageSource (or raise for text-only kinds)
        def searchable_copy(self, source, pages, settings): return None

    register_reader(Markdownish())   # tasks.readers.registry — or a `korpus.readers` entry point

A reader may also take files by their whole name (`names = ("winmail.dat",)`), and a container reader (a letter, a
mailbox, an archive) has `members()` too (`Container` below).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from korpus.core.datamodel import PageResult, QuarantineItem, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.transfer_encoding import Damage
from tasks.text.quality import TextLayerQuality
from tasks.text.structure import text_structure


class UnreadableSourceError(RuntimeError):
    """The file cannot be read as its kind (corrupt, encrypted, empty, a converter failed)."""


@dataclass
class ParseOutcome:
    pages: list[PageResult] = field(default_factory=list)
    ocr_pending: list[int] = field(default_factory=list)
    """Pages with no trusted text of their own: to be OCR'd (fanned out by the flow)."""
    flagged: dict[int, PageResult] = field(default_factory=dict)
    """Pending pages that do have a layer the detector flagged: OCR decides whether it is kept."""
    page_count: int = 0
    problems: list[QuarantineItem] = field(default_factory=list)
    engine_calls: int = 0
    vlm_calls: int = 0
    cache_hits: int = 0
    stats: dict[str, float] = field(default_factory=dict)
    unread: dict[int, str] = field(default_factory=dict)
    """Pages a transient fault kept from being read after every retry (page → the last error): the document waits
    for the next refresh instead of being published without them (tasks/runtime/retry.py)."""
    retries: int = 0

    def add_layer(self, layer: PageResult, quality: TextLayerQuality) -> None:
        """A page's own text (PDF or DjVu layer): kept when the detector trusts it; otherwise the page goes to OCR,
        its layer (when it has any text) travelling along to be compared with the OCR."""
        if quality.ok:
            self.pages.append(layer)
            return
        self.ocr_pending.append(layer.page or 0)
        if quality.signals["chars"] > 0:
            self.flagged[layer.page or 0] = layer


def failure(exc: BaseException) -> str:
    """What an unexpected exception says, for a quarantine item's detail: its type and message, one line."""
    message = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {message}"[:500]


def whole_file_page(source: Source, text: str, method: str, engine: str, markdown: bool = False) -> PageResult:
    """A file read whole as page 1 of text (a text file, a web page, an e-book), with its structure units."""
    return PageResult(
        source_id=source.source_id,
        source_version=source.version,
        page=1,
        text=text,
        method=method,
        engine=engine,
        units=text_structure(text, markdown=markdown),
    )


def problem(source: Source, reason: ReasonCode, detail: str, page: int | None = None) -> QuarantineItem:
    return QuarantineItem(
        source_id=source.source_id, source_version=source.version, page=page, reasons=[reason], detail=detail
    )


@dataclass
class Member:
    """One thing a container holds (an attachment, a message inside a message, an archive's file): it becomes a
    child source of its own (tasks/unpack.py), read by the reader its name — or `kind` — says."""

    name: str
    """Its name inside the container, as the container gives it (an archive's member may hold folders: `a/b.pdf`)."""
    blocks: Iterable[bytes] = ()
    """Its bytes, in blocks: the unpacker counts them against the limits as it writes them."""
    kind: SourceKind | None = None
    """When the content says better than the name what reads it (`winmail.dat`, a `message/rfc822` part)."""
    refused: str | None = None
    """Why it was not taken out (a path out of the archive, a link, encrypted): the child is quarantined with it."""
    damage: Damage | None = None
    """What was wrong with its transfer encoding, known once its blocks are read (tasks/readers/transfer_encoding.py):
    the bytes that could be decoded are kept, and this is recorded in the container's listing."""


class Container(Protocol):
    """A reader whose files hold other files (a letter, a mailbox, an archive): besides `read` — its own text, the
    letter or the list of what it holds — it lists the members. A member's name that is not a plain relative path
    is refused by the unpacker, not by the container."""

    def members(self, source: Source, settings: Settings) -> Iterator[Member]: ...


class Reader(Protocol):
    kind: SourceKind
    suffixes: tuple[str, ...]

    def read(self, source: Source, settings: Settings) -> ParseOutcome: ...

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource: ...

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        """Write `<data>/searchable/…` for a source with OCR'd pages; None when the kind has no such copy."""
        ...

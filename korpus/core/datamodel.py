"""The one typed data model shared by every stage: Source, PageResult, Chunk, QuarantineItem.

The chunk record is the contract of the design (DESIGN.md, ENRICH): nothing reaches an index without passing
through `Chunk`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, Field, model_validator


class SourceKind(StrEnum):
    """What reads a file (tasks/readers): its pages come from a PDF, an image, a DjVu, an office document
    (through a PDF LibreOffice makes of it), a text file, a web page or e-book (`markup`), a spreadsheet (`sheet`:
    blocks of rows), a letter or mailbox (`mail`), an archive, or a recording. Letters, mailboxes and archives are
    containers: what they hold becomes child sources (tasks/unpack.py). `meta`: a document korpus writes about the
    collection (tasks/meta), not a file."""

    pdf = "pdf"
    audio = "audio"
    text = "text"
    image = "image"
    djvu = "djvu"
    office = "office"
    markup = "markup"
    sheet = "sheet"
    mail = "mail"
    archive = "archive"
    meta = "meta"

    @property
    def paged(self) -> bool:
        """Pages with images behind them, which the OCR cascade can read."""
        return self in (SourceKind.pdf, SourceKind.image, SourceKind.djvu, SourceKind.office)


class Lifecycle(StrEnum):
    current = "current"
    superseded = "superseded"
    quarantined = "quarantined"


class ReasonCode(StrEnum):
    """Why something was kept out of the index. Documented in docs/manifest.md."""

    missing_metadata = "missing-metadata"
    unsupported_type = "unsupported-type"
    outside_root = "outside-root"
    unreadable_file = "unreadable-file"
    empty_text = "empty-text"
    ocr_failed = "ocr-failed"
    asr_failed = "asr-failed"
    no_speech = "no-speech"
    page_quality = "page-quality"
    reader_crashed = "reader-crashed"
    """The file's reader died on it (a signal: SIGSEGV, SIGABRT, the OOM killer) or hit its memory or time limit, in
    the child process it reads in (tasks/runtime/reader_child.py). Not read again until its bytes change or a
    reviewer asks (`korpus review retry`)."""
    reader_timed_out = "reader-timed-out"
    """The file's reader ran past `KORPUS_READER_SECONDS` (tasks/runtime/reader_child.py): a legitimately long file, or
    one that never ends. Refused as a whole like a crash; a changed file's previous version stays served."""
    processing_failed = "processing-failed"
    """A stage failed on this file in a way korpus did not foresee (the detail names the exception): the file is
    kept out, the rest of the refresh goes on."""
    # the contract gate (tasks/contract/gate.py), per chunk
    policy_not_approved = "policy-not-approved"
    oversized = "oversized"
    text_quality = "text-quality"


ADMISSION_REASONS = frozenset({ReasonCode.missing_metadata, ReasonCode.unsupported_type, ReasonCode.outside_root})
"""Refusals of what the manifest or the root says, re-judged each refresh; `unreadable-file` at discovery has the
version `not-read` and is judged again once the file can be read (it then has a real version). A version refused
for these alone and published later has its queue item resolved by the publish (tasks/index/quarantine_store.py)."""


REASON_ADVICE: dict[ReasonCode, str] = {
    ReasonCode.missing_metadata: "add owner and access for this path to korpus.yaml; the next refresh admits it",
    ReasonCode.unsupported_type: "convert it to PDF, an image, DjVu, an office format, text or audio — or leave it out",
    ReasonCode.outside_root: "copy the file into the source root instead of linking to it",
    ReasonCode.unreadable_file: "replace the file with a readable copy (undamaged, without a password, a known "
    "encoding), or fix the link or permission the detail names; the next refresh reads it",
    ReasonCode.empty_text: "look at the page: if it holds text, `korpus review reocr` or replace the scan; if blank, "
    "reject",
    ReasonCode.ocr_failed: "check the engine named in the detail, then `korpus review reocr`",
    ReasonCode.asr_failed: "replace the recording with a readable copy, or reject",
    ReasonCode.no_speech: "no speech was found: reject a silent recording; a quiet one may need other audio filters",
    ReasonCode.page_quality: "`korpus review reocr` (the VLM tier when configured), release the text as it is, or "
    "replace the scan",
    ReasonCode.reader_timed_out: "a long file may need more time: raise KORPUS_READER_SECONDS and `korpus review "
    "retry ID`, or just `korpus review retry ID` when the machine was busy; one that never ends: replace it",
    ReasonCode.reader_crashed: "the reader crashed or hit a limit on this file (the detail says which): replace it "
    "with an undamaged copy, or raise KORPUS_READER_MEMORY_MB / KORPUS_READER_SECONDS and `korpus review retry`",
    ReasonCode.processing_failed: "the detail names what failed: replace the file with an undamaged copy, or report "
    "the detail if the file opens elsewhere; reject to clear the item",
    ReasonCode.policy_not_approved: "reject it; a refresh cuts the source again under the current policy",
    ReasonCode.oversized: "release it as an exception if the text is right, or fix the source's layout",
    ReasonCode.text_quality: "`korpus review reocr`, or release it if the source is printed that way",
}
"""What a reviewer can do about each reason, shown with every quarantine item."""


class ChangeKind(StrEnum):
    new = "new"
    changed = "changed"
    unchanged = "unchanged"
    removed = "removed"


CHILD_SEPARATOR = " › "
"""Between a container's source id and a member's name in a child source's id: `почта/письмо.eml › акт.pdf`."""

META_PREFIX = "korpus://meta/"
"""How a meta-document's source id starts (`korpus://meta/public/Реестр лиц`, tasks/meta/publish.py); the `//`
keeps these ids apart from every file's, which are root-relative paths."""
NO_ENTRIES = "Записей нет."
"""The line a meta-document without entries ends its summary with: such a part is never a search hit."""
FURNITURE_SECTION = "Служебные надписи"
"""The section path of a chunk holding a page's furniture (a drawing's stamp frame, rotated margin text): kept out of
the other chunks' bodies and headings, listed after every document hit, found by `korpus exact`."""


DEFAULT_TENANT = "default"


def scope_of(access: str | None, tenant: str | None) -> str | None:
    """The scope a caller must hold to see what carries these labels: the access rule itself in the default tenant
    (`public`, `hr`), `tenant/access` in any other (`acme/public`) — so a key granted `public` never sees another
    tenant's `public`, on any path (docs/manifest.md, "Tenants")."""
    if access is None:
        return None
    return access if tenant in (None, DEFAULT_TENANT) else f"{tenant}/{access}"


def tenant_and_access(scope: str) -> tuple[str, str]:
    """`scope_of` undone: `acme/public` → (`acme`, `public`); `public` → (the default tenant, `public`)."""
    tenant, _, access = scope.rpartition("/")
    return tenant or DEFAULT_TENANT, access


def scope_sql(tenant: str, access: str) -> str:
    """`scope_of` as an SQL expression over two columns (the chunk filters, the review queue, the catalog check)."""
    default = f"{tenant} IS NULL OR {tenant} = '{DEFAULT_TENANT}'"
    return f"(CASE WHEN {default} THEN {access} ELSE {tenant} || '/' || {access} END)"


class Source(BaseModel):
    """One file under the source root, identified by its root-relative path and versioned by sha256."""

    source_id: str = Field(description="Path relative to the source root, '/' separators.")
    version: str = Field(description="sha256 of the file's bytes, hex.")
    path: str = Field(description="Absolute path the file was read from.")
    kind: SourceKind | None = None
    size: int = 0
    mtime_ns: int = Field(
        default=0, description="Modification time at discovery: a file changed mid-run is not published."
    )
    ctime_ns: int = Field(default=0, description="Status-change time at discovery (any write or rename moves it).")
    inode: int = Field(default=0, description="The file's inode at discovery.")
    hashed: bool = Field(
        default=True, description="Discovery read and hashed the bytes (False: the stat matched the last reading)."
    )
    owner: str | None = None
    access: str | None = None
    tenant: str | None = None
    outside_root: bool = Field(
        default=False, description="A link that leads out of the source root: never read, quarantined."
    )
    unreadable: str | None = Field(
        default=None, description="Why discovery could not read the file (a link loop, no permission): quarantined."
    )
    hidden_members: list[str] = Field(
        default_factory=list,
        description="A container's members (names inside it) whose access or tenant a manifest rule made other than "
        "the container's: its own page does not list them (tasks/receive.py).",
    )

    @property
    def file_name(self) -> str:
        """The name a citation shows: the file's name, and for a child source its path inside its containers
        (`письмо_2003.eml › акт.pdf`)."""
        top, sep, inner = self.source_id.partition(CHILD_SEPARATOR)
        return top.rsplit("/", 1)[-1] + sep + inner

    @property
    def parent_id(self) -> str | None:
        """The container a child source came out of (a letter, a mailbox, an archive); None for a file on disk."""
        parent, sep, _ = self.source_id.rpartition(CHILD_SEPARATOR)
        return parent if sep else None


def listing_key(source: Source) -> str:
    """What a container's page leaves out, as the catalog keeps it (empty: nothing)."""
    return json.dumps(sorted(source.hidden_members), ensure_ascii=False) if source.hidden_members else ""


class UnitKind(StrEnum):
    heading = "heading"
    paragraph = "paragraph"
    sentence = "sentence"
    list_item = "list_item"
    table = "table"
    code = "code"
    furniture = "furniture"  # stamp frames, rotated margin text: no heading, no body, a chunk of its own


class Unit(BaseModel):
    """A structural piece of a page's text, at [start, end) character offsets of that text."""

    kind: UnitKind
    start: int
    end: int
    level: int = Field(default=0, description="Heading level (1 = biggest); 0 for other units.")
    block: int = Field(default=0, description="Units of one paragraph, list or table share a block number.")
    rows: list[tuple[int, int]] = Field(default_factory=list, description="Table rows as offsets, header first.")
    t_start: float | None = Field(default=None, description="Speech: when this unit starts, in seconds.")


class PageWord(BaseModel):
    """A recognised word, its box in PDF points (origin top-left) and the engine's confidence (0-100)."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    conf: float = 100.0
    line: int = 0


class LayerCheck(BaseModel):
    """A text layer the detector flagged, compared with the OCR of its page: the better text is indexed."""

    decision: str = Field(description="layer-kept (agrees with OCR, or OCR is no better) | ocr-replaced-layer")
    similarity: float = Field(description="Word F1 between the layer and the OCR text (0-1).")
    layer_score: float = Field(description="Detector score of the layer.")
    ocr_score: float = Field(description="Detector score of the OCR text.")
    layer_reasons: list[str] = Field(default_factory=list, description="Why the detector flagged the layer.")


class PageResult(BaseModel):
    """The text of one page (PDF, text file) or one stretch of speech (audio), with how it was obtained."""

    source_id: str
    source_version: str
    page: int | None = Field(default=None, description="1-based page number; None for audio.")
    t_start: float | None = None
    t_end: float | None = None
    text: str
    method: str = Field(description="text-layer | tesseract | vlm | whisper | plain-text | blank (nothing drawn)")
    engine: str = Field(default="", description="Engine and version that produced the text.")
    units: list[Unit] = Field(default_factory=list, description="Structure; empty until tasks/text/structure.py ran.")
    tier: int | None = Field(default=None, description="PDF: 0 text layer, 1 Tesseract, 2 VLM.")
    quality: float | None = Field(default=None, description="Detector score of the text kept (0-1).")
    quality_reasons: list[str] = Field(default_factory=list, description="Why earlier tiers were refused.")
    words: list[PageWord] = Field(default_factory=list, description="OCR words with boxes, for searchable PDFs.")
    rotation: int = Field(default=0, description="Degrees the page image was turned (clockwise) to read it upright.")
    layer_check: LayerCheck | None = Field(default=None, description="Set when a flagged layer met its OCR.")
    label: str | None = Field(
        default=None, description="The locator a citation shows instead of «лист N» (a sheet's rows, a letter)."
    )
    size: tuple[float, float] | None = Field(
        default=None, description="Width and height of the page as stored, in points (an image: pixels × 72 / dpi)."
    )
    boxes: str = Field(
        default="", description="Every placed word's offsets in `text` and box on the page (tasks/text/regions.py)."
    )


def timecode(seconds: float) -> str:
    """A recording's locator as people write it: `00:12:34` (hours, minutes, seconds)."""
    whole = max(0, int(seconds))
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class Locator(BaseModel):
    page: int | None = None
    t_start: float | None = None
    t_end: float | None = None
    heading: str | None = None
    start: int = Field(default=0, description="Start char offset of the body in the page/transcript text.")
    end: int = Field(default=0, description="End char offset (exclusive).")

    @model_validator(mode="after")
    def _has_place(self) -> Locator:
        if self.page is None and self.t_start is None:
            raise ValueError("a locator needs a page or a start time")
        return self


class Region(BaseModel):
    """A rectangle of a page that a chunk's words cover (one per line), in the page's points, origin top-left."""

    page: int
    x0: float
    y0: float
    x1: float
    y1: float
    width: float = Field(description="The page's width in points.")
    height: float = Field(description="The page's height in points.")
    whole_page: bool = Field(default=False, description="No word boxes: the reader gave the page, not the words.")


class Chunk(BaseModel):
    """A retrievable unit of evidence. `text` starts with the chunk's own address line."""

    chunk_id: str = Field(min_length=1)
    source_id: str = Field(min_length=1)
    source_version: str = Field(min_length=1)
    section_path: list[str] = Field(default_factory=list)
    locator: Locator
    text: str
    body: str = Field(description="The text without the address line: a substring of the page text.")
    previous_id: str | None = None
    next_id: str | None = None
    owner: str = Field(min_length=1, description="Identity and access are required: no chunk exists without them.")
    access_rule: str = Field(min_length=1)
    tenant: str = "default"
    lifecycle: Lifecycle = Lifecycle.current
    policy_version: str = Field(description="The chunking policy that cut it (tasks/contract/policies.py POLICIES).")
    language: str = "ru"
    regions: list[Region] = Field(
        default_factory=list,
        description="Where on its page the body's words are; empty when the page has no "
        "geometry (text, speech) or its text was edited after reading.",
    )


class QuarantineItem(BaseModel):
    """Something the pipeline refused to index, with its reasons. Errors as values, not exceptions."""

    source_id: str
    source_version: str | None = None
    page: int | None = None
    chunk_id: str | None = Field(default=None, description="Set when the gate refused one chunk.")
    t_start: float | None = None
    reasons: list[ReasonCode]
    detail: str = ""
    evidence: str = Field(default="", description="The rejected text.")
    evidence_path: str | None = Field(default=None, description="A page image of the rejected page, if any.")
    chunk: Chunk | None = Field(default=None, description="The refused chunk, kept so a reviewer can release it.")
    access: str | None = Field(default=None, description="The source's access scope; None when the manifest has none.")
    tenant: str | None = Field(default=None, description="The source's tenant (None: the default one).")
    kind: str | None = Field(default=None, description="The source's kind (pdf, image, audio…), for the review queue.")
    readings: list[dict] = Field(
        default_factory=list, description="What each OCR tier read: tier, engine, text, score, reasons."
    )
    first_seen: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def item_id(self) -> str:
        key = f"{self.source_id}\x00{self.source_version}\x00{self.page}\x00{self.chunk_id}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]


def chunk_id_for(source_version: str, source_id: str, ordinal: int) -> str:
    """Stable id: the same source version and position always give the same id."""
    key = f"{source_id}\x00{source_version}\x00{ordinal}"
    return hashlib.sha256(key.encode()).hexdigest()[:24]

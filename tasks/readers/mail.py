"""Letters and mailboxes: `.eml` (RFC 822/MIME), Outlook `.msg`, `.mbox`, and TNEF (`winmail.dat`).

A letter is one page: who wrote to whom, when and about what, the names of its attachments, then its text. Its
label — what every chunk's citation shows — repeats the date, sender, first recipient and subject
(`[письмо.eml · 12.05.2003 14:02 · Иванов → Петров · «Акт сверки»]`), so a hit deep in a long letter still says which
letter it is. Attachments, messages inside the message and `winmail.dat` are members (tasks/unpack.py): child
sources with their own readers and citations. A mailbox's members are its letters, its own page only a summary.

Headers are decoded whatever the producer did: RFC 2047 words (a character split across two words, words split
over lines), raw 8-bit headers in UTF-8, cp1251 or koi8-r, RFC 2231 file names, a name cut mid-character. A body is
read in its declared charset, else the one decode_text finds; `text/html` becomes text (no markup, scripts or
styles); of `multipart/alternative` only one part is read (the plain text, or the HTML when the plain part is
empty). Inline images under INLINE_IMAGE_BYTES (logos, signatures) are not taken out: too small to hold text.
"""

from __future__ import annotations

import email
import email.policy
import itertools
import logging
import mimetypes
import re
from collections.abc import Iterator
from datetime import datetime
from email.generator import BytesGenerator
from email.message import Message
from io import BytesIO
from pathlib import Path
from typing import Any

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.base import Member, ParseOutcome, UnreadableSourceError, failure, problem, whole_file_page
from tasks.readers.mail_headers import decode_bytes, decode_header, header_date, people, short_who, who
from tasks.readers.markup import html_to_text
from tasks.readers.registry import kind_of
from tasks.readers.transfer_encoding import Damage, decode_base64

TNEF_SIGNATURE = b"\x78\x9f\x3e\x22"
OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
INLINE_IMAGE_BYTES = 16 * 1024
DECODE_BLOCK = 1 << 20  # decoded bytes per block of an attachment
LABEL_SUBJECT_CHARS = 80


# --- a letter as text --------------------------------------------------------------------------------------------


class Letter:
    """What korpus takes from one message whatever its format: header fields, text, attachments."""

    def __init__(self) -> None:
        self.sender: list[tuple[str, str]] = []
        self.to: list[tuple[str, str]] = []
        self.cc: list[tuple[str, str]] = []
        self.date: datetime | None = None
        self.subject = ""
        self.text = ""
        self.attachments: list[Member] = []

    def page_text(self) -> str:
        lines = [f"От: {who(self.sender)}"] if self.sender else []
        lines += [f"Кому: {who(self.to)}"] if self.to else []
        lines += [f"Копия: {who(self.cc)}"] if self.cc else []
        lines += [f"Дата: {self.date:%d.%m.%Y %H:%M}"] if self.date else []
        lines += [f"Тема: {self.subject}"] if self.subject else []
        names = [m.name for m in self.attachments]
        lines += [f"Вложения: {', '.join(names)}"] if names else []
        return ("\n".join(lines) + "\n\n" + self.text.strip()).strip()

    def label(self) -> str:
        parts = [f"{self.date:%d.%m.%Y %H:%M}"] if self.date else []
        if self.sender or self.to:
            parts.append(f"{short_who(self.sender)} → {short_who(self.to)}")
        if self.subject:
            subject = self.subject if len(self.subject) <= LABEL_SUBJECT_CHARS else self.subject[:77] + "…"
            parts.append(f"«{subject}»")
        return " · ".join(parts) or "письмо"


def _part_text(part: Message) -> str:
    payload = part.get_payload(decode=True) or b""
    text = decode_bytes(payload, part.get_content_charset())
    if part.get_content_subtype() == "html":
        return html_to_text(text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _is_body(part: Message) -> bool:
    return (
        part.get_content_maintype() == "text"
        and part.get_content_subtype() in ("plain", "html")
        and part.get_content_disposition() != "attachment"
        and not part.get_filename()
    )


def _body(part: Message) -> str:
    """The text of a message's body parts, one of each multipart/alternative."""
    if part.is_multipart():
        kids = [k for k in part.get_payload() if isinstance(k, Message)]
        if part.get_content_subtype() == "alternative":
            texts = [(k.get_content_subtype(), _body(k)) for k in kids]
            for wanted in ("plain", "html", None):
                for subtype, text in texts:
                    if text.strip() and (wanted is None or subtype == wanted):
                        return text
            return ""
        return "\n\n".join(t for k in kids if k.get_content_type() != "message/rfc822" and (t := _body(k)).strip())
    return _part_text(part) if _is_body(part) else ""


def _raw(message: Message, name: str) -> list[str]:
    """A header's values as the message holds them (8-bit bytes kept as surrogates): the library's own access
    turns raw 8-bit bytes into replacement characters."""
    return [value for key, value in message.raw_items() if key.lower() == name.lower()]


def _raw_param(part: Message, key: str) -> str | None:
    """A file name straight from the Content-Disposition or Content-Type bytes (quoted or not)."""
    for header in ("Content-Disposition", "Content-Type"):
        for value in _raw(part, header):
            found = re.search(rf'(?:^|;)\s*{key}\s*=\s*(?:"([^"]*)"?|([^;\s]+))', value, re.I | re.S)
            if found:
                return found[1] if found[1] is not None else found[2]
    return None


def _file_name(part: Message, number: int) -> str:
    name = part.get_filename() or part.get_param("name")
    if isinstance(name, tuple):  # RFC 2231 the library left as (charset, language, value)
        name = email.utils.collapse_rfc2231_value(name)
    if not name or "\ufffd" in str(name):  # raw 8-bit bytes the library could not decode
        name = _raw_param(part, "filename") or _raw_param(part, "name") or name
    name = decode_header(name) if name else ""
    if name:
        return name
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()[0] if isinstance(part.get_payload(), list) else None
        subject = decode_header(next(iter(_raw(inner, "Subject")), None)) if inner is not None else ""
        return f"{subject[:60] or f'письмо {number}'}.eml"
    extension = {
        "text/plain": ".txt",
        "text/html": ".html",
        "application/pdf": ".pdf",
        "image/jpeg": ".jpg",
        "image/png": ".png",
        "image/tiff": ".tif",
    }.get(part.get_content_type(), ".bin")
    return f"вложение {number}{extension}"


def _attachments(message: Message) -> Iterator[Member]:
    number = 0
    stack = [message]
    while stack:
        part = stack.pop(0)
        if part.get_content_type() == "message/rfc822":
            number += 1
            inner = part.get_payload()
            inner = inner[0] if isinstance(inner, list) and inner else inner
            data = _as_bytes(inner) if isinstance(inner, Message) else b""
            yield Member(name=_file_name(part, number), blocks=[data], kind=SourceKind.mail)
            continue
        if part.is_multipart():
            stack[0:0] = [k for k in part.get_payload() if isinstance(k, Message)]
            continue
        if part is message or _is_body(part):
            continue
        damage = Damage()
        blocks = _decoded_blocks(part, damage)
        first = next(blocks, b"")
        inline = part.get_content_disposition() != "attachment" and part.get_content_maintype() == "image"
        if inline and len(first) < INLINE_IMAGE_BYTES:  # a first block that short is the whole part
            continue
        number += 1
        tnef = part.get_content_type() == "application/ms-tnef" or first.startswith(TNEF_SIGNATURE)
        name = _file_name(part, number)
        kind = SourceKind.mail if tnef else None
        if not tnef and kind_of(name) is None:  # a name cut short or without its extension: the MIME type says
            kind = kind_of("x" + (mimetypes.guess_extension(part.get_content_type()) or ""))
        yield Member(name=name, blocks=itertools.chain([first], blocks), kind=kind, damage=damage)


def _decoded_blocks(part: Message, damage: Damage) -> Iterator[bytes]:
    """A part's bytes as they are decoded, DECODE_BLOCK at a time, so the unpacker counts them against its budget
    (tasks/unpack.py) as they come and stops decoding when it is spent. Base64 is decoded line by line, every group
    that arrived intact kept (tasks/readers/transfer_encoding.py); other encodings are decoded whole, as they are
    never larger than the letter's own text."""
    raw = part.get_payload()
    if str(part.get("content-transfer-encoding", "")).strip().lower() != "base64" or not isinstance(raw, str):
        yield part.get_payload(decode=True) or b""
        return
    yield from decode_base64(raw, damage, DECODE_BLOCK)


def _as_bytes(message: Message) -> bytes:
    out = BytesIO()
    BytesGenerator(out, mangle_from_=False, policy=email.policy.compat32).flatten(message)
    return out.getvalue()


def rfc822_letter(raw: bytes) -> Letter:
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    if not message.keys() and not message.get_payload():
        raise UnreadableSourceError("not a letter: no headers and no text")
    letter = Letter()
    letter.sender = people(_raw(message, "From"))
    letter.to = people(_raw(message, "To"))
    letter.cc = people(_raw(message, "Cc"))
    letter.date = header_date(next(iter(_raw(message, "Date")), None))
    letter.subject = decode_header(next(iter(_raw(message, "Subject")), None))
    letter.text = _body(message)
    letter.attachments = list(_attachments(message))
    return letter


def msg_letter(path: Path) -> Letter:
    """An Outlook .msg (a compound file) through extract-msg."""
    import extract_msg

    logging.getLogger("extract_msg").setLevel(logging.ERROR)
    try:
        message = extract_msg.openMsg(str(path), delayAttachments=False)
    except Exception as exc:  # extract-msg raises its own, olefile's and struct errors on a damaged file
        raise UnreadableSourceError(f"the Outlook message does not open: {failure(exc)}") from exc
    try:
        letter = Letter()
        letter.sender = people([message.sender or ""])
        letter.to = people([message.to or ""])
        letter.cc = people([message.cc or ""])
        letter.date = header_date(message.date)
        letter.subject = " ".join((message.subject or "").split())
        body = message.body or ""
        if not body.strip() and message.htmlBody:
            body = html_to_text(decode_bytes(message.htmlBody))
        letter.text = body.replace("\r\n", "\n")
        for number, attachment in enumerate(message.attachments, start=1):
            letter.attachments.append(_msg_member(attachment, number))
        return letter
    finally:
        message.close()


def _msg_member(attachment: Any, number: int) -> Member:
    name = attachment.longFilename or attachment.shortFilename or getattr(attachment, "name", None)
    data = attachment.data
    if isinstance(data, bytes):
        return Member(name=name or f"вложение {number}.bin", blocks=[data])
    try:  # an embedded message: written out as a .msg of its own
        return Member(name=f"{name or f'письмо {number}'}.msg", blocks=[data.exportBytes()], kind=SourceKind.mail)
    except Exception as exc:  # an embedded message extract-msg cannot write back
        return Member(name=f"{name or f'письмо {number}'}.msg", refused=f"cannot be taken out: {failure(exc)}")


def tnef_letter(raw: bytes) -> Letter:
    """`winmail.dat`: the text Outlook put in it (plain, else HTML) and its attachments."""
    import tnefparse

    try:
        tnef = tnefparse.TNEF(raw)
    except Exception as exc:  # tnefparse raises ValueError and struct errors on a damaged file
        raise UnreadableSourceError(f"a damaged TNEF (winmail.dat): {failure(exc)}") from exc
    letter = Letter()
    for prop in tnef.msgprops:  # the TNEF's own attributes: attSubject, attDateSent
        if prop.name == 0x8004 and isinstance(prop.data, (str, bytes)):
            letter.subject = " ".join((prop.data if isinstance(prop.data, str) else decode_bytes(prop.data)).split())
        elif prop.name == 0x8005 and isinstance(prop.data, datetime):
            letter.date = prop.data
    body = tnef.body or b""
    text = body if isinstance(body, str) else decode_bytes(body)
    if not text.strip() and tnef.htmlbody:
        html = tnef.htmlbody
        text = html_to_text(html if isinstance(html, str) else decode_bytes(html))
    letter.text = text.replace("\r\n", "\n")
    for number, attachment in enumerate(tnef.attachments, start=1):
        name = attachment.long_filename() or getattr(attachment, "name", "") or f"вложение {number}.bin"
        name = name if isinstance(name, str) else decode_bytes(name)
        letter.attachments.append(Member(name=name.strip("\x00"), blocks=[attachment.data]))
    return letter


# --- mailboxes ---------------------------------------------------------------------------------------------------


def mbox_messages(path: Path) -> Iterator[bytes]:
    """The messages of an mbox file, read as a stream: a message starts at a `From ` line at the file's start or
    after an empty line; `>From ` lines are unescaped (mboxrd)."""
    current: list[bytes] = []
    previous_blank = True
    with open(path, "rb") as handle:
        for line in handle:
            if line.startswith(b"From ") and previous_blank:
                if current:
                    yield b"".join(current)
                current = []
            elif current or line.strip():
                current.append(line[1:] if re.match(rb">+From ", line) else line)
            previous_blank = not line.strip()
    if current:
        yield b"".join(current)


def form_of(path: Path) -> str:
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(TNEF_SIGNATURE):
        return "tnef"
    if head.startswith(OLE2):
        return "msg"
    if head.startswith(b"From ") or path.suffix.lower() == ".mbox":
        return "mbox"
    return "eml"


class MailReader:
    kind = SourceKind.mail
    suffixes = (".eml", ".msg", ".mbox", ".tnef")
    names = ("winmail.dat",)

    def letter(self, source: Source, form: str) -> Letter:
        path = Path(source.path)
        if form == "msg":
            return msg_letter(path)
        if form == "tnef":
            return tnef_letter(path.read_bytes())
        return rfc822_letter(path.read_bytes())

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        outcome = ParseOutcome(page_count=1)
        path = Path(source.path)
        form = form_of(path)
        try:
            if form == "mbox":
                count = sum(1 for _ in mbox_messages(path))
                text = f"Почтовый ящик «{source.file_name}»: писем — {count}."
                outcome.pages.append(whole_file_page(source, text, "mail", "mbox"))
                return outcome
            letter = self.letter(source, form)
        except UnreadableSourceError as exc:
            outcome.problems.append(problem(source, ReasonCode.unreadable_file, str(exc)))
            return outcome
        from tasks.unpack import member_name  # the name the member's child source has

        hidden = set(source.hidden_members)  # attachments a rule gave other labels: not named on this page
        letter.attachments = [m for m in letter.attachments if member_name(m.name) not in hidden]
        page = whole_file_page(source, letter.page_text(), "mail", form)
        outcome.pages.append(page.model_copy(update={"label": letter.label()}))
        return outcome

    def members(self, source: Source, settings: Settings) -> Iterator[Member]:
        path = Path(source.path)
        form = form_of(path)
        if form == "mbox":
            for number, raw in enumerate(mbox_messages(path), start=1):
                yield Member(name=f"письмо {number:04d}.eml", blocks=[raw], kind=SourceKind.mail)
            return
        try:
            yield from self.letter(source, form).attachments
        except UnreadableSourceError:
            return  # its own read says why

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        raise UnreadableSourceError("a letter has no page images")

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None

"""Archives (.zip, .7z, .rar, .tar and .tar.gz/.tgz/.bz2/.xz, a lone .gz): libarchive reads them all, as a stream.

An archive's members become child sources (tasks/unpack.py, with its limits against zip bombs and `../` names);
its own page only lists them, so a search for a file's name finds the archive that holds it. Member names are
decoded as their archive wrote them: UTF-8 when marked or valid; a zip name without the UTF-8 flag, which libarchive
reads as cp437, is re-read as cp866 (what Windows' own zip and old DOS archivers wrote in Russia) when that gives
Cyrillic; raw bytes elsewhere as the Russian code page that reads best (cp1251 first). Links, devices and
encrypted members are listed and refused with that reason, never followed or guessed at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from korpus.core.datamodel import PageResult, ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.base import Member, ParseOutcome, UnreadableSourceError, failure, problem, whole_file_page
from tasks.readers.text import best_code_page

LISTED_NAMES = 200  # names the archive's own page lists; the members themselves are all children
COMPRESSED_ONLY = (".gz", ".bz2", ".xz")


def _cp866_read_as_cp437(name: str) -> str:
    """A zip member name without the UTF-8 flag is decoded by libarchive as cp437, the format's default; Russian
    Windows and DOS archivers wrote cp866 there («Åα¿¬áº» is «Приказ»). Re-read it as cp866 when that gives a name
    mostly of Cyrillic letters with nothing odd in it."""
    if name.isascii():
        return name
    try:
        raw = name.encode("cp437")
    except UnicodeEncodeError:  # characters cp437 has not: libarchive did not decode it as cp437
        return name
    text = raw.decode("cp866")
    letters = [ch for ch in text if ch.isalpha()]
    cyrillic = sum(1 for ch in letters if "\u0400" <= ch <= "\u04ff")
    return text if letters and cyrillic * 2 > len(letters) and best_code_page(raw, ("cp866",))[1] > 0 else name


def member_name_text(raw: str | bytes, zip_order: bool) -> str:
    if isinstance(raw, str):
        return _cp866_read_as_cp437(raw) if zip_order else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    order = ("cp866", "cp1251", "koi8_r") if zip_order else ("cp1251", "koi8_r", "cp866")
    return raw.decode(best_code_page(raw, order)[0], "replace")


def _entries(path: Path, format_name: str = "all") -> Iterator[tuple[str, Any]]:
    import libarchive

    zip_order = path.suffix.lower() == ".zip"
    with libarchive.file_reader(str(path), format_name=format_name) as archive:
        for entry in archive:
            yield member_name_text(entry.pathname or "", zip_order), entry


def archive_entries(path: Path) -> Iterator[tuple[str, Any]]:
    """(name, libarchive entry) of every entry; a lone .gz/.bz2/.xz gives its one file, named without the suffix."""
    import libarchive

    try:
        yield from _entries(path)
        return
    except libarchive.ArchiveError as exc:
        if path.suffix.lower() not in COMPRESSED_ONLY:
            raise UnreadableSourceError(f"the archive does not open: {failure(exc)}") from exc
    try:
        for _, entry in _entries(path, "raw"):
            yield path.stem, entry
    except libarchive.ArchiveError as exc:
        raise UnreadableSourceError(f"the compressed file does not open: {failure(exc)}") from exc


def _refusal(entry: Any) -> str | None:
    if entry.issym or entry.islnk:
        return f"a link (to «{entry.linkpath or ''}»), not a file: links in an archive are not followed"
    if not entry.isreg and not entry.isdir:
        return "a device, pipe or socket entry, not a file"
    return None


class ArchiveReader:
    kind = SourceKind.archive
    suffixes = (".zip", ".7z", ".rar", ".tar", ".tgz", ".tbz", ".tbz2", ".txz", *COMPRESSED_ONLY)

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        outcome = ParseOutcome(page_count=1)
        names: list[str] = []
        count = 0
        hidden = set(source.hidden_members)
        from tasks.unpack import member_name  # the name the member's child source has

        try:
            for name, entry in archive_entries(Path(source.path)):
                if entry.isdir or not name:  # libarchive gives a nameless entry where the header is damaged
                    continue
                if hidden and member_name(name) in hidden:  # a rule gave it other labels: not this page's to show
                    continue
                count += 1
                if len(names) < LISTED_NAMES:
                    names.append(name)
        except Exception as exc:  # libarchive's own errors on a damaged archive
            if not count:
                reason = str(exc) if isinstance(exc, UnreadableSourceError) else failure(exc)
                outcome.problems.append(problem(source, ReasonCode.unreadable_file, reason))
                return outcome
        more = f" и ещё {count - len(names)}" if count > len(names) else ""
        text = f"Архив «{source.file_name}», файлов: {count}.\n\n" + "\n".join(f"- {n}" for n in names) + more
        outcome.pages.append(whole_file_page(source, text, "archive", "libarchive", markdown=True))
        return outcome

    def members(self, source: Source, settings: Settings) -> Iterator[Member]:
        for name, entry in archive_entries(Path(source.path)):
            if entry.isdir or not name:
                continue
            refused = _refusal(entry)
            yield Member(name=name, refused=refused, blocks=() if refused else entry.get_blocks())

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        raise UnreadableSourceError("an archive has no page images")

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None

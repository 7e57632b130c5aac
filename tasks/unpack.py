"""RECEIVE for containers: what a letter, a mailbox or an archive holds becomes child sources.

A child's source id is its container's id, ` › `, and its name inside (`почта/письмо.eml › акт.pdf`,
`архив.zip › 2003/смета.xls`); nested containers add a step each. A child is versioned by the sha256 of its own
bytes, read by the reader its name says, and cited by that chain (`[письмо.eml › акт.pdf · лист 2]`). It takes the
owner, access and tenant of the file on disk it came out of; only a manifest rule that names a child (its `match`
holds ` › `) overrides that — a rule for `**/*.pdf` never makes an attachment of an `hr` letter public. A child
lives as long as its container: changed or removed, the container's children are no longer discovered and are
retired with it.

Members are written once per container version under `<data>/unpacked/<sha256[:2]>/<sha256>/` with a
`members.json` listing (a later refresh reads the listing, not the container); the source file is only read. A
container replaced while it was being unpacked keeps no listing: its children wait for the next refresh.
Limits (settings `unpack_*`) stop a zip bomb and a runaway mailbox: members per container, bytes per member, bytes
per file on disk with everything nested in it, the ratio of unpacked bytes to the file's size, and the depth of
nesting. A member a limit stops, or whose name leads out of its container (`../`, `/etc/…`), or that the container
could not give (a link, an encrypted member) is still listed: a child quarantined `unreadable-file` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from korpus.core.datamodel import CHILD_SEPARATOR, Source, SourceKind
from korpus.core.settings import Settings
from tasks.files import file_sha256
from tasks.readers.base import Member, failure
from tasks.readers.registry import is_container, kind_of, reader_for

LISTING = "members.json"
LISTING_VERSION = 2
BOMB_FLOOR = 64 << 20  # below this many unpacked bytes no ratio is a bomb (a 1 KB zip of a 100 KB text is fine)


@dataclass
class Budget:
    """What is left to unpack for one file on disk and everything nested in it."""

    settings: Settings
    top_size: int
    written: int = 0
    notes: list[str] = field(default_factory=list)

    def room(self) -> int:
        """Bytes the next member may still take."""
        by_ratio = max(BOMB_FLOOR, int(self.settings.unpack_max_ratio * self.top_size)) - self.written
        by_total = self.settings.unpack_max_total_bytes - self.written
        return max(0, min(self.settings.unpack_max_member_bytes, by_ratio, by_total))

    def why_full(self) -> str:
        s = self.settings
        if self.written >= s.unpack_max_total_bytes:
            return f"the file unpacks to over {s.unpack_max_total_bytes >> 20} MiB (unpack_max_total_bytes)"
        if self.written >= max(BOMB_FLOOR, s.unpack_max_ratio * self.top_size):
            return f"the file unpacks to over {s.unpack_max_ratio:g} times its own size (unpack_max_ratio): a zip bomb"
        return f"the member unpacks to over {s.unpack_max_member_bytes >> 20} MiB (unpack_max_member_bytes)"


def unpack_root(settings: Settings) -> Path:
    return settings.data / "unpacked"


def member_name(raw: str) -> str | None:
    """A member's name as a relative path with `/` (Windows `\\` too), or None when it leads out of its container
    (`../x`, `/etc/passwd`, `C:\\x`)."""
    name = raw.replace("\\", "/").strip()
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        return None
    clean = "/".join(parts).replace(CHILD_SEPARATOR.strip(), ">")
    return "".join(ch for ch in clean if ch.isprintable()) or None


def _stored_suffix(name: str) -> str:
    suffix = posixpath.splitext(name)[1].lower()
    return suffix if 1 < len(suffix) <= 10 and suffix[1:].isalnum() else ""


def _write(member: Member, target: Path, budget: Budget) -> tuple[str, int] | str:
    """Write the member's blocks to target: (sha256, size), or why a limit stopped it (nothing left on disk)."""
    digest, size, room = hashlib.sha256(), 0, budget.room()
    try:
        with open(target, "wb") as handle:
            for block in member.blocks:
                size += len(block)
                if size > room:
                    raise OverflowError
                digest.update(block)
                handle.write(block)
    except OverflowError:
        target.unlink(missing_ok=True)
        budget.written += size
        return budget.why_full()
    except Exception as exc:  # a damaged member: the container's reader says what
        target.unlink(missing_ok=True)
        return f"the member cannot be taken out: {failure(exc)}"
    budget.written += size
    return digest.hexdigest(), size


def _still_the_version(source: Source) -> bool:
    try:
        return file_sha256(Path(source.path)) == source.version
    except OSError:
        return False


def _unpack(source: Source, folder: Path, settings: Settings, budget: Budget) -> list[dict]:
    """Take the members of one container version out into folder; the listing that describes them."""
    entries: list[dict] = []
    taken: set[str] = set()
    work = folder.with_name(folder.name + f".{os.getpid()}.part")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    container = reader_for(source.kind)  # type: ignore[arg-type]
    try:
        for number, member in enumerate(container.members(source, settings), start=1):  # type: ignore[attr-defined]
            name = member_name(member.name)
            entry: dict = {"name": name or f"member-{number}", "kind": member.kind.value if member.kind else None}
            if name is None:
                entry["refused"] = f"its name «{member.name[:200]}» leads out of the container: not taken out"
            else:
                base, n = entry["name"], 1
                while entry["name"] in taken:  # two attachments called image.png
                    n += 1
                    stem, ext = posixpath.splitext(base)
                    entry["name"] = f"{stem} ({n}){ext}"
            taken.add(entry["name"])
            if len(entries) >= settings.unpack_max_members:
                limit = settings.unpack_max_members
                entry["refused"] = f"the container holds over {limit} members (unpack_max_members)"
            entry["refused"] = entry.get("refused") or member.refused
            if entry["refused"] is None:
                entry["file"] = f"{number:05d}{_stored_suffix(entry['name'])}"
                written = _write(member, work / entry["file"], budget)
                if isinstance(written, str):
                    entry["refused"] = written
                    del entry["file"]
                else:
                    entry["sha256"], entry["size"] = written
                if member.damage:  # the bytes that arrived intact were taken out; what was wrong is kept with them
                    entry["damage"] = member.damage.describe()
                    budget.notes.append(f"«{entry['name']}»: {entry['damage']}")
            entries.append(entry)
            if len(entries) > settings.unpack_max_members:
                break
    except Exception as exc:  # a damaged container: what came out before is kept, its own read says the rest
        budget.notes.append(f"the container could not be read to its end: {failure(exc)}")
    if not _still_the_version(source):  # replaced while it was unpacked: these are not its members
        shutil.rmtree(work, ignore_errors=True)
        return []
    listing = {"version": LISTING_VERSION, "members": entries, "notes": budget.notes}
    (work / LISTING).write_text(json.dumps(listing, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    work.replace(folder)
    return entries


def listing(source: Source, settings: Settings, budget: Budget | None = None) -> list[dict]:
    """The container version's members: from `members.json` when it was unpacked before, else unpacked now."""
    folder = unpack_root(settings) / source.version[:2] / source.version
    try:
        stored = json.loads((folder / LISTING).read_text(encoding="utf-8"))
        if stored.get("version") == LISTING_VERSION:
            return stored["members"]
    except (OSError, ValueError, KeyError):
        pass
    return _unpack(source, folder, settings, budget or Budget(settings, source.size))


def child_sources(
    parent: Source, settings: Settings, child_rules: list, depth: int = 1, budget: Budget | None = None
) -> Iterator[Source]:
    """The children of one source (and theirs, to unpack_max_depth), in the container's order."""
    if not is_container(parent.kind) or parent.unreadable or parent.outside_root or parent.version == "not-read":
        return
    budget = budget or Budget(settings, parent.size)
    folder = unpack_root(settings) / parent.version[:2] / parent.version
    entries = listing(parent, settings, budget)
    if any("file" in e and not (folder / e["file"]).is_file() for e in entries):
        shutil.rmtree(folder, ignore_errors=True)  # a data directory restored in part: unpack it again, once
        entries = listing(parent, settings, budget)
    for entry in entries:
        child_id = parent.source_id + CHILD_SEPARATOR + entry["name"]
        meta = {"owner": parent.owner, "access": parent.access, "tenant": parent.tenant}
        for rule in child_rules:
            if rule.matches(child_id):
                meta.update({k: v for k in meta if (v := getattr(rule, k)) is not None})
        kind = kind_of(entry["name"]) if entry.get("kind") is None else SourceKind(entry["kind"])
        common = {"source_id": child_id, "kind": kind, **meta}
        if entry.get("refused"):
            yield Source(version=entry.get("sha256", "not-read"), path=child_id, unreadable=entry["refused"], **common)
            continue
        path = folder / entry["file"]
        try:
            stat = path.stat()
        except OSError as exc:  # gone again since it was taken out
            yield Source(
                version=entry["sha256"], path=child_id, unreadable=f"its unpacked copy is gone: {exc}", **common
            )
            continue
        child = Source(version=entry["sha256"], path=str(path), size=stat.st_size, mtime_ns=stat.st_mtime_ns, **common)
        if stat.st_size == 0:
            child.unreadable = "the member is empty (0 bytes)"
        yield child
        if is_container(kind) and not child.unreadable:
            if depth < settings.unpack_max_depth:
                yield from child_sources(child, settings, child_rules, depth + 1, budget)
            else:  # its own text is read; what it holds is not taken out, and that is said
                yield Source(
                    source_id=child_id + CHILD_SEPARATOR + "…",
                    version="not-read",
                    path=child_id,
                    unreadable=f"nested {depth + 1} containers deep (unpack_max_depth is "
                    f"{settings.unpack_max_depth}): its members are not taken out",
                    **meta,
                )

"""RECEIVE: discover files under a source root, identify and version them, attach manifest metadata, diff.

A source's id is its path relative to the root with `/` separators; its version is the sha256 of its bytes.
Owner, access and tenant come from the corpus manifest `korpus.yaml` at the root (docs/manifest.md).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from stat import S_ISDIR, S_ISREG

import yaml
from pydantic import BaseModel, Field, field_validator

from korpus.core.datamodel import (
    ADMISSION_REASONS,
    CHILD_SEPARATOR,
    ChangeKind,
    QuarantineItem,
    ReasonCode,
    Source,
    SourceKind,
    listing_key,
)
from korpus.core.settings import Settings
from tasks.files import file_sha256
from tasks.readers.base import failure
from tasks.readers.registry import is_container, kind_of
from tasks.unpack import child_sources

MANIFEST_NAME = "korpus.yaml"
METADATA_KEYS = ("owner", "access", "tenant")


class _Labels(BaseModel):
    owner: str | None = None
    access: str | None = None
    tenant: str | None = None

    @field_validator("access", "tenant")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        """A scope is `access` or `tenant/access` (korpus/core/datamodel.scope_of): neither part may hold a `/`."""
        if value is not None and ("/" in value or not value.strip()):
            raise ValueError(f"{value!r}: access and tenant names cannot be empty or hold '/'")
        return value


class ManifestRule(_Labels):
    match: str = Field(description="Glob relative to the root: * within a folder, ** across folders.")

    def matches(self, source_id: str) -> bool:
        return glob_regex(self.match).fullmatch(source_id) is not None

    @property
    def for_children(self) -> bool:
        """A rule naming members of containers (`почта/*.eml › *.pdf`): the only kind that overrides what a child
        inherits from the file it came out of (tasks/unpack.py)."""
        return CHILD_SEPARATOR.strip() in self.match


class ManifestDefaults(_Labels):
    pass


class Manifest(BaseModel):
    """`defaults:` then ordered `rules:`; a later matching rule overrides an earlier one, key by key."""

    defaults: ManifestDefaults = Field(default_factory=ManifestDefaults)
    rules: list[ManifestRule] = Field(default_factory=list)

    @classmethod
    def load(cls, root: Path) -> Manifest:
        path = root / MANIFEST_NAME
        if not path.is_file():
            return cls()
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: the manifest must be a mapping with defaults: and rules:")
        return cls.model_validate({k: raw[k] for k in ("defaults", "rules") if k in raw})

    def metadata_for(self, source_id: str) -> dict[str, str | None]:
        meta = self.defaults.model_dump()
        for rule in self.rules:
            if rule.matches(source_id):
                meta.update({k: v for k in METADATA_KEYS if (v := getattr(rule, k)) is not None})
        return meta


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a root-relative glob: `**/` any folders (or none), `**` anything, `*` and `?` within a name."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)  # a name may hold a newline


def source_kind(path: Path) -> SourceKind | None:
    """The kind whose reader takes this suffix (tasks/readers), or None: quarantined `unsupported-type`."""
    return kind_of(path)


Reading = tuple[str, int, int, int, int]
"""A file's last reading: (version, size, mtime_ns, ctime_ns, inode)."""


def discover_sources(
    root: Path,
    settings: Settings | None = None,
    readings: dict[str, Reading] | None = None,
    found: Callable[[Source], None] | None = None,
) -> list[Source]:
    """Every regular file under root except the manifest and hidden files, sorted by id — and, given the settings
    (the data directory to unpack into and the limits), each container's members after it (tasks/unpack.py).

    With `readings` (the catalog's `file_readings`), a file whose size, modification time, status-change time and
    inode are what they were when its bytes were last hashed keeps that version unread: an unchanged archive of
    terabytes is stat'ed, not read. Without them (`korpus refresh --verify`) every file is hashed."""
    root = root.resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"source root {root} is not a folder")
    manifest = Manifest.load(root)
    sources = []
    for path in sorted(root.rglob("*"), key=lambda p: p.parts):  # Path's own ordering, without its cost per pair
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or rel.as_posix() == MANIFEST_NAME:
            continue
        source = _badly_named(path, rel, manifest) or _discovered(path, rel.as_posix(), root, manifest, readings)
        if source is not None:
            sources.append(source)
            if found is not None:
                found(source)
            if settings is not None:
                sources.extend(_children(source, settings, [r for r in manifest.rules if r.for_children]))
    _hide_narrowed_members(sources)
    return sources


def _hide_narrowed_members(sources: list[Source]) -> None:
    """A member a manifest rule gives other labels than its container's is left off the container's page: the page
    is served under the container's scope, and a name is content (`› *Кривошеин*` → `hr` hides the name too)."""
    by_id = {s.source_id: s for s in sources}
    for child in sources:
        parent = by_id.get(child.parent_id) if child.parent_id else None
        if parent is not None and (child.access, child.tenant) != (parent.access, parent.tenant):
            parent.hidden_members.append(child.source_id[len(parent.source_id) + len(CHILD_SEPARATOR) :])


def _children(container: Source, settings: Settings, child_rules: list[ManifestRule]) -> list[Source]:
    """A container's child sources; when taking them out fails in a way nobody foresaw (a full disk, a library
    bug), one refused child says so and discovery goes on with the other files."""
    try:
        return list(child_sources(container, settings, child_rules))
    except Exception as exc:  # containment: one container never stops a refresh
        detail = f"its members could not be taken out: {failure(exc)}"
        return [
            Source(
                source_id=container.source_id + CHILD_SEPARATOR + "…",
                version="not-read",
                path=container.path,
                owner=container.owner,
                access=container.access,
                tenant=container.tenant,
                unreadable=detail,
            )
        ]


def _badly_named(path: Path, rel: Path, manifest: Manifest) -> Source | None:
    """A name whose bytes are not UTF-8 (a folder copied from an old Windows share or a zip): no id, citation or
    catalog row can hold it, so it is refused with a readable id (`\\xcf\\xf0…`), the name it probably has, and
    what to do. None for a good name."""
    try:
        rel.as_posix().encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    raw = os.fsencode(rel.as_posix())
    source_id = raw.decode("utf-8", "backslashreplace")
    guess = "/".join(_cp1251_if_not_utf8(part) for part in raw.split(b"/"))
    meta = manifest.metadata_for(source_id)
    detail = (
        f"the file name is not valid UTF-8 (in cp1251 it reads «{guess}»): rename it, e.g. with "
        "`convmv -f cp1251 -t utf-8`, and the next refresh reads it"
    )
    return Source(
        source_id=source_id,
        path=source_id,
        version="not-read",
        kind=source_kind(path),
        unreadable=detail,
        owner=meta["owner"],
        access=meta["access"],
        tenant=meta["tenant"] or "default",
    )


def _cp1251_if_not_utf8(part: bytes) -> str:
    try:
        return part.decode("utf-8")
    except UnicodeDecodeError:
        return part.decode("cp1251", "replace")


def _unreadable(path: Path, exc: OSError, common: dict) -> Source:
    detail = f"cannot be read ({exc.strerror or exc}): give the korpus user read access to the file"
    return Source(version="not-read", kind=source_kind(path), unreadable=detail, **common)


SETTLED_NS = 2_000_000_000
"""A file changed less than this before its reading is not trusted next time (hashed again): file systems stamp
times coarsely (a few milliseconds locally, a second or two on network shares), so a second write in the same tick
with the old mtime put back would leave size and times as they were — git calls such an entry «racily clean»."""


def reading_of(source: Source, now_ns: int | None = None) -> Reading | None:
    """What `file_readings` keeps of a discovered file: None for one not read (refused before its bytes) or changed
    within SETTLED_NS of `now_ns` (default: now)."""
    if source.version == "not-read" or not source.inode:
        return None
    if max(source.ctime_ns, source.mtime_ns) > (now_ns if now_ns is not None else time.time_ns()) - SETTLED_NS:
        return None
    return (source.version, source.size, source.mtime_ns, source.ctime_ns, source.inode)


def _discovered(
    path: Path, source_id: str, root: Path, manifest: Manifest, readings: dict[str, Reading] | None = None
) -> Source | None:
    """One entry under the root as a source; None for folders, linked folders (rglob does not descend into them)
    and a file that vanished while being discovered (it is not there: a known one is retired)."""
    meta = manifest.metadata_for(source_id)
    common = {
        "source_id": source_id,
        "path": str(path),
        "owner": meta["owner"],
        "access": meta["access"],
        "tenant": meta["tenant"] or "default",
    }
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # a loop, or a target that is not there
            detail = "a link that leads nowhere (a loop or a missing target): point it at a file or remove it"
            return Source(version="not-read", kind=source_kind(path), unreadable=detail, **common)
        if not target.is_relative_to(root):  # a linked file out of the root is never read
            return Source(version="not-read", outside_root=True, **common)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unreadable(path, exc, common)
    if not S_ISREG(stat.st_mode):
        if not S_ISDIR(stat.st_mode):  # a pipe, socket or device: never opened (a pipe would block)
            detail = "not a regular file (a pipe, socket or device): korpus reads regular files only"
            return Source(version="not-read", unreadable=detail, **common)
        return None
    last = (readings or {}).get(source_id)
    hashed = last is None or tuple(last[1:]) != (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    try:
        version = file_sha256(path) if hashed else last[0]
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unreadable(path, exc, common)
    if stat.st_size == 0:
        detail = "the file is empty (0 bytes): copy the real file in again"
        return Source(version=version, kind=source_kind(path), unreadable=detail, **common)
    return Source(
        version=version,
        kind=source_kind(path),
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        ctime_ns=stat.st_ctime_ns,
        inode=stat.st_ino,
        hashed=hashed,
        **common,
    )


def unchanged_since_discovery(source: Source) -> bool:
    """The file is still there with the size and modification time discovery saw: what was read from it belongs
    to the version (sha256) discovery computed. A file replaced or removed mid-run is left to the next refresh."""
    try:
        stat = Path(source.path).stat()
    except OSError:
        return False
    return stat.st_size == source.size and stat.st_mtime_ns == source.mtime_ns


def admission_problems(source: Source) -> QuarantineItem | None:
    """A source without owner or access, or of a type korpus cannot read, is quarantined — never defaulted."""
    if source.outside_root:
        return QuarantineItem(
            source_id=source.source_id,
            source_version=source.version,
            reasons=[ReasonCode.outside_root],
            detail="a link that leads out of the source root: korpus reads nothing outside it; copy the file in",
        )
    if source.unreadable:
        return QuarantineItem(
            source_id=source.source_id,
            source_version=source.version,
            reasons=[ReasonCode.unreadable_file],
            detail=source.unreadable,
        )
    reasons, details = [], []
    missing = [k for k in ("owner", "access") if not getattr(source, k)]
    if missing:
        reasons.append(ReasonCode.missing_metadata)
        details.append(f"no {' and no '.join(missing)} in {MANIFEST_NAME}")
    if source.kind is None:
        reasons.append(ReasonCode.unsupported_type)
        details.append(f"no reader for '{Path(source.source_id).suffix or 'no extension'}'")
    if not reasons:
        return None
    return QuarantineItem(
        source_id=source.source_id,
        source_version=source.version,
        reasons=reasons,
        detail="; ".join(details),
        access=source.access,
        tenant=source.tenant,
        kind=source.kind.value if source.kind else None,
    )


@dataclass
class RefreshPlan:
    """What a refresh has to do, from comparing the files on disk with the catalog's current versions."""

    to_process: list[Source] = field(default_factory=list)
    unchanged: list[Source] = field(default_factory=list)
    relabel: list[Source] = field(default_factory=list)
    refused_labels: list[Source] = field(default_factory=list)
    """Versions refused as a whole, with the manifest's labels now: their quarantine items follow a relabel too."""
    removed: list[str] = field(default_factory=list)
    rejected: list[QuarantineItem] = field(default_factory=list)
    change: dict[str, ChangeKind] = field(default_factory=dict)


def metadata_key(source: Source) -> tuple[str | None, str | None, str | None]:
    return (source.owner, source.access, source.tenant)


def plan_refresh(
    sources: list[Source],
    indexed: dict[str, dict[str, tuple]],
    refused: dict[str, dict[str, set[str]]] | None = None,
    listings: dict[str, dict[str, str]] | None = None,
) -> RefreshPlan:
    """Diff the files on disk against the catalog.

    `indexed` maps a source id to its current versions and the (owner, access, tenant) each was indexed with.
    A known version whose manifest metadata changed is relabelled in place: no parsing, OCR or embedding.
    `listings` (the catalog's `listing_keys`) says which members each container's page left out: a manifest rule
    that changes which has the page read again. `refused` maps a source id to versions the catalog refused as a whole,
    with their reason codes. They count
    as unchanged. One refused for its manifest metadata is admitted once the manifest is fixed; one refused
    for its content (unreadable, no text) stays refused until a reviewer decides otherwise.
    """
    plan = RefreshPlan()
    refused = refused or {}
    inadmissible: set[str] = set()  # files the manifest or the root no longer admit (their served versions go)
    for source in sources:
        versions = indexed.get(source.source_id, {})
        problem = admission_problems(source)
        refusal = refused.get(source.source_id, {}).get(source.version)
        if refusal is not None and (problem is not None or not refusal <= ADMISSION_REASONS):
            plan.change[source.source_id] = ChangeKind.unchanged
            if source.access:  # the items of a refused version take the manifest's access like any other
                plan.refused_labels.append(source)
            if problem is not None:
                plan.rejected.append(problem)
                inadmissible.add(source.source_id)
            else:  # the previous version, still served, takes the manifest's labels as the file's would
                plan.relabel += _older(source, versions)
            continue
        if (
            source.version in versions
            and problem is None
            and listings is not None
            and is_container(source.kind)
            and (listings.get(source.source_id, {}).get(source.version, "") != listing_key(source))
        ):  # a rule now shows or hides other members: the container's page is read again, under its labels
            plan.change[source.source_id] = ChangeKind.changed
            plan.to_process.append(source)
            continue
        if source.version in versions and problem is None:
            plan.change[source.source_id] = ChangeKind.unchanged
            if tuple(versions[source.version]) == metadata_key(source):
                plan.unchanged.append(source)
            else:
                plan.relabel.append(source)
            continue
        plan.change[source.source_id] = ChangeKind.changed if versions else ChangeKind.new
        if problem is not None:
            plan.rejected.append(problem)
            inadmissible.add(source.source_id)
        else:
            plan.to_process.append(source)
            # a changed file whose labels changed too: its current version takes the new labels at once, not when
            # the new version is published (an access reduction must not wait for the file to be read)
            plan.relabel += _older(source, versions)
    on_disk = {s.source_id for s in sources}
    withdrawn = inadmissible & set(indexed)  # no labels the manifest gives: its served version goes, as a removal
    plan.removed = sorted((set(indexed) - on_disk) | withdrawn)
    for source_id in plan.removed:
        plan.change[source_id] = ChangeKind.changed if source_id in withdrawn else ChangeKind.removed
    return plan


def _older(source: Source, versions: dict[str, tuple]) -> list[Source]:
    """The file's served versions other than the one on disk whose labels are not the manifest's now: relabelled at
    once (an access reduction never waits for the new version to be read, or for a refused one to be fixed)."""
    return [
        source.model_copy(update={"version": version})
        for version, labels in versions.items()
        if version != source.version and tuple(labels) != metadata_key(source)
    ]

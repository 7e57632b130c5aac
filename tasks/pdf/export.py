"""`korpus export --pdfa DIR`: the archival copies korpus wrote, in a tree that mirrors the archive, with a manifest.

Only current sources the given scopes may see are exported (the catalog's labels decide, as for every search). Each
copy goes to `DIR/<source path>` (a PDF) or `DIR/<source path>.pdf` (page images, DjVu), and `DIR/manifest.json`
lists, for each: the source and its version, the sha256 of the source (its version) and of the copy, the pages,
which were OCR'd and by which engine, the PDF/A flavour the copy declares (None: plain) and, with `validate`,
veraPDF's verdict.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from korpus.core.datamodel import scope_of
from tasks.files import file_sha256
from tasks.index.sqlite import SqliteIndex
from tasks.pdf.pdfa import declared_pdfa

OCR_ENGINES = ("tesseract", "vlm")


def copy_of(data: Path, source_id: str) -> Path | None:
    """Where the searchable copy of a source lies under `data`, if it has one."""
    searchable = data / "searchable"
    for candidate in (searchable / source_id, searchable / f"{source_id}.pdf"):
        if candidate.suffix.lower() == ".pdf" and candidate.is_file():
            return candidate
    return None


def export_copies(
    index: SqliteIndex, data: Path, dest: Path, scopes: Sequence[str], validate: bool = False
) -> dict[str, Any]:
    """Copy every visible current source's searchable copy under `dest` and write `dest/manifest.json`; the
    manifest as a dict."""
    entries, hidden = [], 0
    for source in index.sources():
        if source["lifecycle"] != "current" or source.get("kind") == "meta":
            continue
        copy = copy_of(data, source["source_id"])
        if copy is None:
            continue
        if scope_of(source["access"], source.get("tenant")) not in scopes:
            hidden += 1
            continue
        target = dest / copy.relative_to(data / "searchable")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(copy, target)
        found = index.current_source(source["source_id"])
        pages = found[1] if found else []
        read = [p for p in pages if p.method in OCR_ENGINES and p.page]
        entries.append(
            {
                "source_id": source["source_id"],
                "version": source["version"],
                "source_sha256": source["version"],
                "copy": str(target.relative_to(dest)),
                "copy_sha256": file_sha256(target),
                "pages": len([p for p in pages if p.page]),
                "pages_ocr": sorted(p.page for p in read),
                "engines": sorted({p.method for p in read}),
                "pdfa": declared_pdfa(target),
            }
        )
    if validate and entries:
        from tasks.pdf.validate import validate as verapdf

        by_flavour: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:  # a plain copy is checked as 2b, for what it lacks
            by_flavour.setdefault(entry["pdfa"] or "2b", []).append(entry)
        for flavour, group in by_flavour.items():  # one veraPDF run a flavour
            verdicts = verapdf([dest / e["copy"] for e in group], flavour)
            for entry in group:
                verdict = verdicts[str(dest / entry["copy"])]
                entry["valid"] = bool(entry["pdfa"]) and verdict["compliant"]
                entry["failed"] = verdict["failed"]
    manifest = {
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "scopes": list(scopes),
        "copies": entries,
        "not_visible": hidden,
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2), encoding="utf-8")
    return manifest

"""A file's version as korpus names it: the sha256 of its bytes (RECEIVE versions sources with it, the unpacker
checks a container was not replaced while its members were taken out, a reviewer's re-OCR that the file is the
version the item is about)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

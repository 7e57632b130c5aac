"""Files the tests build where no real one shows the case: archives, for now (letters are built by each test, the
MIME parts differ)."""

from __future__ import annotations

import io
import zipfile


def zipped(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip archive holding these members (names as given, `../` included: the tests need bad ones too)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()

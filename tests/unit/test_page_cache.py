"""The page cache on a local folder, a file:// URL and an fsspec URL (memory://, standing in for s3:// and co.)."""

from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks.runtime.page_cache import PageCache

pytestmark = pytest.mark.unit


class Entry(BaseModel):
    text: str


@pytest.mark.parametrize("kind", ["path", "file-url", "memory-url"])
def test_get_put_round_trip_keyed_by_engine(tmp_path: Path, kind: str) -> None:
    root = {"path": tmp_path / "c", "file-url": f"file://{tmp_path}/c", "memory-url": f"memory://t-{tmp_path.name}/c"}
    cache = PageCache(root[kind])
    assert cache.get(Entry, "ab" * 32, "p00001", "tesseract", "5.3|rus|300") is None
    cache.put(Entry(text="Акт приёмки"), "ab" * 32, "p00001", "tesseract", "5.3|rus|300")
    again = PageCache(root[kind])  # another process or machine reading the same place
    assert again.get(Entry, "ab" * 32, "p00001", "tesseract", "5.3|rus|300") == Entry(text="Акт приёмки")
    assert again.get(Entry, "ab" * 32, "p00001", "tesseract", "5.3|rus|400") is None  # other settings, other key
    if kind != "memory-url":
        assert not list((tmp_path / "c").rglob("*.tmp"))  # written whole, renamed into place

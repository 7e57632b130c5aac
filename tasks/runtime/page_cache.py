"""Every OCR'd page and every transcript is cached under (sha256, page, method, engine + settings).

A crash, a re-run or a change to a later stage (chunking, embedding, indexing) never redoes OCR or ASR. The cache
lives under the data directory, or at any fsspec URL (`KORPUS_PAGE_CACHE_URL`: `s3://bucket/korpus-pages`,
`file:///mnt/shared/pages`, …) so several machines share it. A local entry is written to a temporary name and
renamed, so a kill mid-write leaves no half entry; a remote one is written in one `pipe` (object stores make an
object visible whole or not at all).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class PageCache:
    """`PageCache(Path("data/cache/pages"))` or `PageCache("s3://bucket/pages")`."""

    def __init__(self, root: Path | str) -> None:
        self.fs = None
        if isinstance(root, str) and "://" in root and not root.startswith("file://"):
            import fsspec

            self.fs, self.root = fsspec.core.url_to_fs(root)
        else:
            self.root = str(Path(root.removeprefix("file://") if isinstance(root, str) else root))

    def _path(self, version: str, unit: str, method: str, engine_key: str) -> str:
        engine = hashlib.sha256(engine_key.encode()).hexdigest()[:12]
        return f"{self.root.rstrip('/')}/{version[:2]}/{version}/{unit}-{method}-{engine}.json"

    def get(self, model: type[M], version: str, unit: str, method: str, engine_key: str) -> M | None:
        path = self._path(version, unit, method, engine_key)
        if self.fs is not None:
            try:
                return model.model_validate_json(self.fs.cat_file(path))
            except FileNotFoundError:
                return None
        if not os.path.isfile(path):
            return None
        return model.model_validate_json(Path(path).read_text(encoding="utf-8"))

    def put(self, value: BaseModel, version: str, unit: str, method: str, engine_key: str) -> None:
        path = self._path(version, unit, method, engine_key)
        data = value.model_dump_json().encode("utf-8")
        if self.fs is not None:
            self.fs.pipe_file(path, data)
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)

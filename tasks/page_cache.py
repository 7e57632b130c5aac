"""Every OCR'd page and every transcript is cached under (sha256, page, method, engine + settings).

A crash, a re-run or a change to a later stage (chunking, embedding, indexing) never redoes OCR or ASR. Files are
written to a temporary name and renamed, so a kill mid-write leaves no half entry.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class PageCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, version: str, unit: str, method: str, engine_key: str) -> Path:
        engine = hashlib.sha256(engine_key.encode()).hexdigest()[:12]
        return self.root / version[:2] / version / f"{unit}-{method}-{engine}.json"

    def get(self, model: type[M], version: str, unit: str, method: str, engine_key: str) -> M | None:
        path = self._path(version, unit, method, engine_key)
        if not path.is_file():
            return None
        return model.model_validate_json(path.read_text(encoding="utf-8"))

    def put(self, value: BaseModel, version: str, unit: str, method: str, engine_key: str) -> None:
        path = self._path(version, unit, method, engine_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(value.model_dump_json(), encoding="utf-8")
        tmp.replace(path)

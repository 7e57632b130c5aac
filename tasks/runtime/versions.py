"""The real versions of the engines korpus runs, for cache keys: an upgrade of faster-whisper, CTranslate2, Silero
VAD, ffmpeg or a model folder changes the key, so the page cache never serves what an older engine produced."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache, lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


@cache
def package_version(distribution: str) -> str:
    """`faster-whisper 1.2.1`; `faster-whisper ?` when the package is not installed (the engine will say so)."""
    try:
        return f"{distribution} {version(distribution)}"
    except PackageNotFoundError:
        return f"{distribution} ?"


@lru_cache(maxsize=1)
def ffmpeg_version() -> str:
    """The first line of `ffmpeg -version`, e.g. `ffmpeg version 7.1.2-0+deb13u1`."""
    exe = shutil.which("ffmpeg")
    if exe is None:
        return "ffmpeg ?"
    out = subprocess.run([exe, "-version"], capture_output=True, text=True, check=False).stdout
    words = out.split()
    return " ".join(words[:3]) if len(words) >= 3 else "ffmpeg ?"


@lru_cache(maxsize=8)
def folder_fingerprint(folder: Path) -> str:
    """A model folder by name and the sizes of its files: a rebuilt or replaced model under the same name differs."""
    sizes = sorted((p.name, p.stat().st_size) for p in Path(folder).glob("*") if p.is_file())
    return f"{Path(folder).name}:{sum(s for _, s in sizes)}:{len(sizes)}"

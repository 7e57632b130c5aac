"""The one wrapper around the `tesseract` program. One page image in, its text out.

Tesseract runs per page directly (docs/ocr.md: faster than ocrmypdf per page here) with OMP_THREAD_LIMIT=1:
parallelism comes from running pages side by side, and Tesseract's own OpenMP threads only fight for the cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache


class TesseractError(RuntimeError):
    """Tesseract is missing, lacks the language, or failed on a page."""


@lru_cache(maxsize=1)
def tesseract_version() -> str:
    exe = shutil.which("tesseract")
    if exe is None:
        raise TesseractError("tesseract is not installed: apt-get install tesseract-ocr tesseract-ocr-rus")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    first = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "tesseract"
    return first.strip()


def ocr_image(image: bytes, language: str = "rus", dpi: int = 300, timeout: float = 300.0) -> str:
    """Recognise one page image (PNG/TIFF bytes) and return its text."""
    tesseract_version()
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    try:
        done = subprocess.run(
            ["tesseract", "stdin", "stdout", "-l", language, "--dpi", str(dpi), "--psm", "3"],
            input=image,
            capture_output=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise TesseractError(f"tesseract timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise TesseractError(f"tesseract failed (exit {done.returncode}): {message[-500:]}")
    return done.stdout.decode("utf-8", "replace")

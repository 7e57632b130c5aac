"""The one wrapper around the `tesseract` program. One page image in, its text out.

Tesseract runs per page directly (docs/ocr.md: faster than ocrmypdf per page here) with OMP_THREAD_LIMIT=1:
parallelism comes from running pages side by side, and Tesseract's own OpenMP threads only fight for the cores.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache

from pydantic import BaseModel, Field

from korpus.core.datamodel import PageWord
from tasks.runtime.processes import run_owned
from tasks.runtime.retry import TransientError


class TesseractError(RuntimeError):
    """Tesseract is missing, lacks the language, or failed on a page."""


class TesseractInterrupted(TesseractError, TransientError):
    """Tesseract was killed from outside (a signal: the OOM killer, an operator) or ran out of time: the page
    may read fine on the next try."""


@lru_cache(maxsize=1)
def tesseract_version() -> str:
    exe = shutil.which("tesseract")
    if exe is None:
        raise TesseractError("tesseract is not installed: apt-get install tesseract-ocr tesseract-ocr-rus")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    first = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "tesseract"
    return first.strip()


class OcrPage(BaseModel):
    text: str
    words: list[PageWord] = Field(default_factory=list)


def _run(image: bytes, arguments: list[str], timeout: float) -> str:
    tesseract_version()
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    try:
        done = run_owned(["tesseract", "stdin", "stdout", *arguments], input=image, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise TesseractInterrupted(f"tesseract timed out after {timeout:.0f} s") from exc
    if done.returncode < 0:
        raise TesseractInterrupted(f"tesseract was killed by signal {-done.returncode}")
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise TesseractError(f"tesseract failed (exit {done.returncode}): {message[-500:]}")
    return done.stdout.decode("utf-8", "replace")


def _run_tsv(image: bytes, language: str, dpi: int, timeout: float) -> str:
    return _run(image, ["-l", language, "--dpi", str(dpi), "--psm", "3", "tsv"], timeout)


def page_orientation(image: bytes, dpi: int = 300, timeout: float = 120.0) -> tuple[int, float]:
    """Tesseract OSD: degrees to turn the image clockwise to read it upright (0/90/180/270), and confidence.

    Needs `tesseract-ocr-osd`. A page OSD cannot judge (too little text) is reported as (0, 0.0).
    """
    try:
        out = _run(image, ["--dpi", str(dpi), "--psm", "0"], timeout)
    except TesseractError as exc:
        if "Too few characters" in str(exc) or "OSD" in str(exc):
            return 0, 0.0
        raise
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    try:
        return int(fields["Rotate"].strip()) % 360, float(fields["Orientation confidence"].strip())
    except (KeyError, ValueError):
        return 0, 0.0


def ocr_page_words(image: bytes, language: str = "rus", dpi: int = 300, timeout: float = 300.0) -> OcrPage:
    """One Tesseract call: words with boxes and confidences (TSV), and the page text built from them.

    Lines are joined by a newline, paragraphs and blocks by a blank line, as Tesseract's own text output does.
    """
    scale = 72.0 / dpi
    words: list[PageWord] = []
    breaks: list[str] = []  # what stands before each word: "", " ", a newline, or a blank line
    last_block = last_par = last_line = None
    line_index = -1
    for row in _run_tsv(image, language, dpi, timeout).splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        block, par, line = cols[2], cols[3], cols[4]
        left, top, width, height, conf = (float(c) for c in cols[6:11])
        if (block, par) != (last_block, last_par):
            breaks.append("\n\n" if words else "")
            line_index += 1
        elif line != last_line:
            breaks.append("\n")
            line_index += 1
        else:
            breaks.append(" ")
        last_block, last_par, last_line = block, par, line
        words.append(
            PageWord(
                text=cols[11],
                x0=left * scale,
                y0=top * scale,
                x1=(left + width) * scale,
                y1=(top + height) * scale,
                conf=conf,
                line=line_index,
            )
        )
    words = cyrillic_initials(words)  # needs each word's neighbours, so the text is joined afterwards
    return OcrPage(text="".join(b + w.text for b, w in zip(breaks, words, strict=True)), words=words)


_LOOKALIKE = str.maketrans("ABCEHKMOPTXaceopxy", "АВСЕНКМОРТХасеорху")
_INITIAL = re.compile(r"[ABCEHKMOPTX]\.?,?")
_CYRILLIC_WORD = re.compile(r"[А-Яа-яЁё]{2,}")


def cyrillic_initials(words: list[PageWord]) -> list[PageWord]:
    """`rus+eng` reads a lone Cyrillic capital that has a Latin twin as Latin: «Кузнецов H. A.». An initial of
    look-alike letters next to a Cyrillic word on its line is written in Cyrillic, so «Н. А.» is found by search."""
    out = list(words)
    for i, word in enumerate(words):
        if not _INITIAL.fullmatch(word.text):
            continue
        line = [w.text for w in words[max(0, i - 2) : i + 3] if w.line == word.line and w is not word]
        if any(_CYRILLIC_WORD.search(t) for t in line):
            out[i] = word.model_copy(update={"text": word.text.translate(_LOOKALIKE)})
    return out

"""The question sets the retrieval benchmarks share (benchmarks/retrieval.py, benchmarks/fusion.py): where each set's
questions live and how its corpus is written. One module both import, so neither imports the other for its data."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_XQUAD = ROOT / "eval" / "xquad-ru"
DANETQA = ROOT / "eval" / "danetqa"
"""2,212 Wikipedia passages, 1,812 natural questions split once into a fitting and a reporting half (its SOURCE.md)."""
REAL_FILES = ROOT / "tests" / "fixtures" / "real-archive"
REAL_QUESTIONS = ROOT / "eval" / "real-colloquial" / "questions.jsonl"
REAL_TYPED = ROOT / "eval" / "real-typed"
PUBLIC_ARCHIVE = "defaults:\n  owner: Архив\n  access: public\n"


def write_real_colloquial(root: Path) -> None:
    """The real-colloquial set's corpus: the repository's real files, one owner, public."""
    shutil.copytree(REAL_FILES, root, ignore=shutil.ignore_patterns("LICENSE", "README.md"))
    (root / "korpus.yaml").write_text(PUBLIC_ARCHIVE, encoding="utf-8")


def write_real_typed(root: Path) -> None:
    """The real-typed set's corpus: both folders of the repository's real files, one owner, public."""
    for folder in ("real-archive", "real-archive-2"):
        shutil.copytree(
            ROOT / "tests" / "fixtures" / folder, root / folder, ignore=shutil.ignore_patterns("LICENSE", "README.md")
        )
    (root / "korpus.yaml").write_text(PUBLIC_ARCHIVE, encoding="utf-8")

"""PDF/A validation by veraPDF (infra/verapdf, from Maven Central by `make setup`): many files, one JVM.

What the tests run on every searchable copy they write, what `korpus export --pdfa --validate` runs on the copies
it exports, and what benchmarks/mixed_folder.py counts for korpus and OCRmyPDF alike; and `layer_differences`, the
words of a copy's page against the words korpus indexed for it (never worse than the source: the copy reads what
the index holds).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "infra" / "verapdf" / "target" / "lib"
MAIN = "org.verapdf.apps.GreenfieldCliWrapper"


class ValidatorMissing(RuntimeError):
    """veraPDF or Java is not installed here."""


def validate(paths: Sequence[Path], flavour: str = "2b", timeout: float = 600) -> dict[str, dict]:
    """path → {"compliant": bool, "failed": [clause, …]} for each file, by veraPDF's profile for `flavour`."""
    if not paths:
        return {}
    java = shutil.which("java")
    if java is None or not any(LIB.glob("*.jar")):
        raise ValidatorMissing(f"veraPDF is not assembled under {LIB} (make verapdf) or java is missing")
    argv = [java, "-cp", f"{LIB}/*", MAIN, "--flavour", flavour, "--format", "xml", *map(str, paths)]
    done = subprocess.run(argv, capture_output=True, timeout=timeout)
    start = done.stdout.find(b"<?xml")
    if start < 0:
        raise RuntimeError(
            f"veraPDF gave no report ({done.returncode}): {done.stderr[-2000:].decode(errors='replace')}"
        )
    report = ET.fromstring(done.stdout[start:])
    out: dict[str, dict] = {}
    for job in report.iter("job"):
        name = job.findtext("item/name") or ""
        verdict = job.find("validationReport")
        failed = (
            []
            if verdict is None
            else [r.get("clause", "") for r in verdict.iter("rule") if r.get("status") == "failed"]
        )
        compliant = verdict is not None and verdict.get("isCompliant") == "true"
        out[name] = {"compliant": compliant, "failed": failed}
    return out


def layer_differences(copy_text: str, indexed_text: str) -> tuple[Counter[str], Counter[str]]:
    """(words the copy's text holds beyond the indexed text, indexed words the copy lacks), lower-cased, each a
    multiset; both empty when `pdftotext` of a copy's page reads what korpus indexed for it. Order is not compared
    (pdftotext orders words by position: a table's cells; OCR by its lines), and a word hyphenated at a line's end
    counts once whether pdftotext joined its halves or not (it joins them only where its layout puts them on
    consecutive lines of one block)."""
    extra, missing = Counter(_words(copy_text)), Counter(_words(indexed_text))
    extra, missing = extra - missing, missing - extra
    for head, tail in re.findall(r"(\w+)-\n(\w+)", indexed_text.lower()):
        if missing[head] and missing[tail] and extra[head + tail]:  # the copy reads the halves joined
            missing -= Counter((head, tail))
            extra -= Counter((head + tail,))
    return extra, missing


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())

"""PDF/A validation by veraPDF (infra/verapdf, from Maven Central by `make setup`): many files, one JVM.

What the tests run on every searchable copy they write, what `korpus export --pdfa --validate` runs on the copies
it exports, and what benchmarks/mixed_folder.py counts for korpus and OCRmyPDF alike.
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
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

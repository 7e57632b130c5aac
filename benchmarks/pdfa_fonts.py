"""Real PDFs finished as PDF/A-2b, with and without font substitutes (#65: a font the source did not embed).

Every PDF under ../shared/data (or the folders given) is copied and finished by korpus's PDF/A step
(tasks/pdf/pdfa.make_pdfa) twice, side by side: as korpus does by default (a metric-compatible Liberation 2 face
embedded for an unembedded Times New Roman, Arial, Helvetica or Courier, each glyph at the page's width), and with
the substitutes turned off (what korpus did before: such a copy stays plain PDF). veraPDF then judges every copy
that claims PDF/A-2b, and `pdftotext` of each copy is compared with the source's (the text must not change).

    .venv/bin/python benchmarks/pdfa_fonts.py [FOLDER ...]

Reported per row: PDFs, how many have an unembedded font, copies claiming PDF/A, copies veraPDF passes, copies whose
text differs from the source's, total size growth. Each file's row goes to --json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pikepdf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.pdf.font_substitutes import LIBERATION, unembedded_fonts  # noqa: E402
from tasks.pdf.pdfa import make_pdfa  # noqa: E402
from tasks.pdf.validate import validate  # noqa: E402

ROWS = ("korpus (default: substitutes)", "substitutes off (before)")


def _text(path: Path) -> str:
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=False).stdout


def run(files: list[Path], work: Path) -> dict:
    per_file: list[dict] = []
    claims: dict[str, list[Path]] = {row: [] for row in ROWS}
    for number, source in enumerate(files):
        try:
            with pikepdf.open(source) as pdf:
                missing = sorted(unembedded_fonts(pdf))
        except pikepdf.PdfError as exc:
            per_file.append({"file": str(source), "error": str(exc)})
            continue
        entry: dict = {"file": str(source), "unembedded": missing, "size": source.stat().st_size}
        for row in ROWS:
            copy = work / f"{number}-{ROWS.index(row)}.pdf"
            shutil.copy(source, copy)
            copy.chmod(0o644)
            refused = make_pdfa(copy, "2b", fonts=LIBERATION if row == ROWS[0] else work / "no-fonts")
            entry[row] = {"refused": refused, "size": copy.stat().st_size, "text_same": _text(copy) == _text(source)}
            if refused is None:
                claims[row].append(copy)
        per_file.append(entry)
    verdicts = validate([p for row in ROWS for p in claims[row]], "2b")
    summary = {}
    for row in ROWS:
        read = [e for e in per_file if row in e]
        for e, copy in ((e, work / f"{per_file.index(e)}-{ROWS.index(row)}.pdf") for e in read):
            e[row]["compliant"] = verdicts.get(str(copy), {}).get("compliant", False)
            e[row]["failed"] = verdicts.get(str(copy), {}).get("failed", [])
        summary[row] = {
            "pdfs": len(read),
            "with_unembedded_fonts": sum(1 for e in read if e["unembedded"]),
            "claiming_pdfa": sum(1 for e in read if e[row]["refused"] is None),
            "verapdf_pass": sum(1 for e in read if e[row]["compliant"]),
            "text_changed": sum(1 for e in read if not e[row]["text_same"]),
            "size_growth": round(sum(e[row]["size"] for e in read) / max(1, sum(e["size"] for e in read)) - 1, 4),
        }
    return {"summary": summary, "files": per_file}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[ROOT.parent / "shared" / "data"])
    parser.add_argument("--json", type=Path, help="write every file's row here")
    args = parser.parse_args()
    files = sorted(p for folder in args.folders for p in folder.rglob("*") if p.suffix.lower() == ".pdf")
    with tempfile.TemporaryDirectory() as tmp:
        result = run(files, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    print("| row | PDFs | with an unembedded font | claiming PDF/A-2b | veraPDF passes | text changed | size growth |")
    print("|---|---|---|---|---|---|---|")
    for row, s in result["summary"].items():
        print(
            f"| {row} | {s['pdfs']} | {s['with_unembedded_fonts']} | {s['claiming_pdfa']} | {s['verapdf_pass']} | "
            f"{s['text_changed']} | {100 * s['size_growth']:+.1f} % |"
        )
    for e in result["files"]:
        if e.get("unembedded") or "error" in e:
            print(e["file"], e.get("unembedded", e.get("error")), {row: e[row]["refused"] for row in ROWS if row in e})


if __name__ == "__main__":
    main()

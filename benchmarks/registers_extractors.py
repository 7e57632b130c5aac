"""Which extractor fills the registers: korpus's slovnet + rules against PullEnti, on every labelled register set.

    pip install --target .bench/pullenti pullenti==4.1 "setuptools<80"     # not a korpus dependency (licence below)
    .venv/bin/python benchmarks/registers_extractors.py --pullenti .bench/pullenti [--json]

For each set of eval/registers (the 35 development files, the held-out sets of real files and of XQuAD-ru passages)
both extractors read the same served text page by page:
- **korpus** — `corpora.real_registers.registers_of`: slovnet NER + the rules and merging of tasks/meta (the default);
- **PullEnti** 4.1 — `ProcessorService.create_processor().process(SourceOfAnalysis(page))`, its PersonReferent and
  OrganizationReferent entities in its own normal form, a person surname first from its LASTNAME, FIRSTNAME and
  MIDDLENAME attributes («Гончаренко Семен Николаевич»), a body as `str(entity)` without the type it appends
  («Министерство Финансов (Минфин)»), one entry per distinct string. A page PullEnti raises on is counted and skipped.
Reported per set: precision / recall of both registers (corpora.real_registers.score), entries, seconds and
characters a second, and PullEnti's failures. PullEnti's licence is «Free for non-commercial use» (its wheel's
metadata), so it cannot be korpus's default whatever it scores: the figures say whether it is worth an option.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpora.real_registers import (
    HELD_OUT_LABELS,
    HELD_OUT_TEXTS,
    LABELS,
    TEXTS,
    held_out,
    load_labels,
    load_texts,
    registers_of,
    score,
)

SETS = [("development", TEXTS, LABELS), ("held-out", HELD_OUT_TEXTS, HELD_OUT_LABELS)] + [
    (f"held-out-{n}", *held_out(n)) for n in range(2, 9)
]


def _pullenti(path: str):
    sys.path.insert(0, path)
    from pullenti.ner.org.OrganizationReferent import OrganizationReferent
    from pullenti.ner.person.PersonReferent import PersonReferent
    from pullenti.ner.ProcessorService import ProcessorService
    from pullenti.ner.SourceOfAnalysis import SourceOfAnalysis
    from pullenti.Sdk import Sdk

    Sdk.initialize_all()
    processor = ProcessorService.create_processor()

    def registers(texts: list[dict]) -> tuple[dict[str, list[str]], int]:
        persons: dict[str, None] = {}
        bodies: dict[str, None] = {}
        failed = 0
        for doc in texts:
            for page in doc["pages"]:
                try:
                    result = processor.process(SourceOfAnalysis(page["text"]))
                except Exception:  # PullEnti raises AttributeError on some real pages
                    failed += 1
                    continue
                for entity in result.entities:
                    if isinstance(entity, PersonReferent):
                        persons[_person(entity)] = None
                    elif isinstance(entity, OrganizationReferent):
                        bodies[_body(entity)] = None
        return {"persons": list(persons), "organisations": list(bodies)}, failed

    return registers


def _person(entity) -> str:
    """Surname first, as the labels and korpus write a person: «Петров Петр Петрович» (`str` gives «Петр Петрович
    Петров»)."""
    parts = [entity.get_string_value(a) for a in ("LASTNAME", "FIRSTNAME", "MIDDLENAME")]
    return " ".join(p.capitalize() for p in parts if p) if parts[0] else str(entity)


def _body(entity) -> str:
    """Its name without the type `str` appends («Евразийское Водное Партнерство (Евп), компания» → «Евразийское Водное
    Партнерство (Евп)»); of «Ивс; Федеральная Служба …» the last, full name."""
    return str(entity).split("; ")[-1].split(", ")[0]


def _row(register: dict[str, list[str]], labels: dict, seconds: float, chars: int) -> dict:
    result = score(register, labels)
    return {kind: {k: result[kind][k] for k in ("precision", "recall", "entries")} for kind in result} | {
        "seconds": round(seconds, 2),
        "chars_per_second": round(chars / seconds) if seconds else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pullenti", required=True, help="a folder PullEnti 4.1 is installed in (pip --target)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pullenti = _pullenti(args.pullenti)
    rows = {}
    for name, texts_path, labels_path in SETS:
        texts, labels = load_texts(texts_path), load_labels(labels_path)
        chars = sum(len(p["text"]) for d in texts for p in d["pages"])
        started = time.perf_counter()
        ours = registers_of(texts)
        korpus_row = _row(ours, labels, time.perf_counter() - started, chars)
        started = time.perf_counter()
        theirs, failed = pullenti(texts)
        pullenti_row = _row(theirs, labels, time.perf_counter() - started, chars) | {"failed_pages": failed}
        rows[name] = {"characters": chars, "korpus": korpus_row, "pullenti": pullenti_row}
        if not args.json:
            line = [f"{name:12s} {chars:7d} chars"]
            for label, row in (("korpus", korpus_row), ("PullEnti", pullenti_row)):
                p, o = row["persons"], row["organisations"]
                line.append(
                    f"{label} P {p['precision']:.3f}/{p['recall']:.3f} O {o['precision']:.3f}/{o['recall']:.3f}"
                    f" {row['chars_per_second']} ch/s"
                )
            print(" | ".join(line) + f" | PullEnti failed pages {failed}", flush=True)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()

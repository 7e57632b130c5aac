"""The real-document register set: served text of real third-party Russian documents, labelled by hand.

`eval/registers/texts.jsonl` holds, per document, the text korpus serves for it (its current chunks' bodies, page
by page, as `tasks/meta/publish.served_pages` hands them to the extractors) after a default refresh of the file
from `shared/data/real-archive*`. Long documents are cut to an excerpt (`EXCERPT_CHARS` from the start and the last
`TAIL_CHARS`, where signatures stand), and the labels cover exactly the text stored. `eval/registers/labels.json`
lists, per document, every person and organisation the text names, as written (docs/meta.md, «Real labels»).

Written once by

    .venv/bin/python -m corpora.real_registers ../shared/data eval/registers/texts.jsonl
    .venv/bin/python -m corpora.real_registers ../shared/data eval/registers/held-out/texts.jsonl --held-out
    .venv/bin/python -m corpora.real_registers ../shared/data eval/registers/held-out-2/texts.jsonl --held-out-2
    .venv/bin/python -m corpora.real_registers ../shared/data eval/registers/held-out-3/texts.jsonl --held-out-3
    .venv/bin/python -m corpora.real_registers ../shared/data eval/registers/held-out-4/texts.jsonl --held-out-4

and committed: the tests and `benchmarks/meta.py --real` read the stored text, so they run from a plain clone.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

# (folder under shared/data, file): a sample of every kind the real folders hold that names people or bodies.
DOCUMENTS = [
    ("real-archive/text", "tz.txt"),
    ("real-archive/text", "bfcd7a4e9bc4498cbe591153e341e0b9.txt"),
    ("real-archive/text", "utf8.txt"),
    ("real-archive/text", "example.txt"),
    ("real-archive/text", "13.txt"),
    ("real-archive/text", "minsport_24.12.2013_1112.txt"),
    ("real-archive/text", "prikaz_0.txt"),
    ("real-archive/text", "law_application.txt"),
    ("real-archive/text", "31(1).txt"),
    ("real-archive/text", "test_change.txt"),
    ("real-archive/office", "tz-10ea-2020.docx"),
    ("real-archive/office", "13_moloko_1_polug.docx"),
    ("real-archive/office", "with_comments.docx"),
    ("real-archive/office", "example.docx"),
    ("real-archive/office", "pr14tz_v5_2007_03_01.docx"),
    ("real-archive/office", "diploma.docx"),
    ("real-archive/office", "without_numbering.docx"),
    ("real-archive/digital", "fstec_1_cut.pdf"),
    ("real-archive/digital", "14_dev_direct.pdf"),
    ("real-archive/digital", "example.pdf"),
    ("real-archive/scans", "platezhka.jpg"),
    ("real-archive/scans", "invoice.jpg"),
    ("real-archive/scans", "with_applications.pdf"),
    ("real-archive/scans", "gost_frame_1.jpg"),
    ("real-archive-2/email", "dedoc_example.eml"),
    ("real-archive-2/email", "mimekit_tnef_koi8r.eml"),
    ("real-archive-2/email", "poi_cyrillic_message.msg"),
    ("real-archive-2/email", "flanker_enclosed_rfc822.eml"),
    ("real-archive-2/office", "tika_resume.html"),
    ("real-archive-2/office", "poi_bib-chernigovka_calendar_2017.docx"),
    ("real-archive-2/office", "poi_45690_wikipedia.docm"),
    ("real-archive-2/office", "poi_drawing.docx"),
    ("real-archive-2/office", "poi_ob_is.doc"),
    ("real-archive-2/pdf", "law_manifest.odt"),
    ("real-archive-2/office", "tika_test.fb2"),
]
# Held out: labelled after the meta-3 rules were written (session 13), never looked at while writing them.
HELD_OUT = [
    ("real-archive/text", "Pr_2013.02.18_21.txt"),
    ("real-archive/text", "pr_17.txt"),
    ("real-archive/office", "tz.docx"),
    ("real-archive/office", "table_refs.docx"),
    ("real-archive/office", "alpaca_tz.docx"),
    ("real-archive-2/office", "poi_rasp.doc"),
    ("real-archive-2/office", "poi_Bug46610_3.doc"),
    ("real-archive-2/office", "poi_Bug48075.doc"),
    ("real-archive-2/email", "flanker_russian_attachment_yahoo.eml"),
]
# Second held-out set: labelled in session 15 before that session changed any rule, and committed before it did.
HELD_OUT_2 = [
    ("real-archive/broken-layer", "fstek17.pdf"),
    ("real-archive/broken-layer", "ukodeksrf.pdf"),
    ("real-archive/office", "ukrf.docx"),
    ("real-archive/scans", "law_image.png"),
    ("real-archive/scans", "article_multiline.png"),
    ("real-archive/scans", "tz_scan_1page.pdf"),
    ("real-archive/scans", "orient_1.png"),
    ("real-archive/digital", "VVP_6_tables.pdf"),
    ("real-archive-2/pdf", "scanned_balance_sheet_2021.pdf"),
    ("real-archive-2/office", "dedoc_example.html"),
    ("real-archive/scans", "example_2_columns.png"),
    ("real-archive/scans", "not_table.pdf"),
    ("real-archive/text", "football.txt"),
    ("real-archive-2/email", "flanker_bilingual_qp.eml"),
    ("real-archive/scans", "example_with_table0.pdf"),
    ("real-archive/scans", "example_with_table1.pdf"),
    ("real-archive/scans", "example_with_table3.png"),
    ("real-archive/scans", "example_with_table4.jpg"),
    ("real-archive/scans", "example_with_table6.png"),
    ("real-archive/scans", "example_with_table7.djvu"),
    ("real-archive/scans", "example_with_table8.pdf"),
    ("real-archive/scans", "example_with_table16.jpg"),
    ("real-archive/scans", "gost_frame_3.jpg"),
    ("real-archive/scans", "orient_3.png"),
    ("real-archive/scans", "rotated_2.jpg"),
    ("real-archive/scans", "scan_orient_1.jpg"),
    ("real-archive/scans", "with_trash.jpg"),
    ("real-archive/scans", "example_with_table_hor_vert_union.png"),
    ("real-archive/scans", "example_with_table_horizontal_union.jpg"),
    ("real-archive/office", "failed.docx"),
    ("real-archive/broken-layer", "example_with_table9.pdf"),
    ("real-archive/digital", "merged_vertical.pdf"),
    ("real-archive/digital", "gost_multipage_table_2.pdf"),
]
# Third held-out set: labelled in session 16 before that session changed any rule, and committed before it did. The
# real files no earlier set used (tables, rotated scans; not a second format or copy of a text already used) and
# the first passage of every second article of XQuAD-ru (`eval/xquad-ru`, encyclopedia prose naming people and bodies).
HELD_OUT_3 = [
    ("real-archive-2/office", "poi_57925_budget.xls"),
    ("real-archive/digital", "VVP_global_table.pdf"),
    ("real-archive/digital", "example_mp_table_with_repeate_header_2.pdf"),
    ("real-archive/digital", "example_mp_table_wo_repeate_header.pdf"),
    ("real-archive/digital", "example_table_with_270_orient_cells.pdf"),
    ("real-archive/digital", "example_table_with_90_orient_cells.pdf"),
    ("real-archive/digital", "merged_horizontal.pdf"),
    ("real-archive/digital", "multipage_table.pdf"),
    ("real-archive/digital", "rectangular.pdf"),
    ("real-archive/digital", "short_lines.pdf"),
    ("real-archive/scans", "example_with_table17.jpg"),
    ("real-archive/scans", "example_with_table5.png"),
    ("real-archive/scans", "gost_multipage_table.pdf"),
    ("real-archive/scans", "orient_5.png"),
    ("real-archive/scans", "rotated_1.jpg"),
    ("real-archive/scans", "rotated_3.jpg"),
    ("real-archive/scans", "rotated_table.png"),
    *[("xquad-ru", f"a{n}_p0.txt") for n in range(0, 48, 2)],
]
# Fourth held-out set: labelled in session 16 after the third was scored and before the rules written from its misses;
# the first passage of every odd XQuAD-ru article (the third set took the even ones).
HELD_OUT_4 = [("xquad-ru", f"a{n}_p0.txt") for n in range(1, 48, 2)]
# Fifth held-out set: labelled in session 17 before any rule was written from the fourth set's misses; the second
# passage of every XQuAD-ru article.
HELD_OUT_5 = [("xquad-ru", f"a{n}_p1.txt") for n in range(48)]
# Sixth: labelled in session 17 before any rule was written from the fifth set's misses; the third passages.
HELD_OUT_6 = [("xquad-ru", f"a{n}_p2.txt") for n in range(48)]
# Seventh: labelled in session 17 before any rule was written from the sixth set's misses; the fourth passages.
HELD_OUT_7 = [("xquad-ru", f"a{n}_p3.txt") for n in range(48)]
# Eighth: labelled in session 18 before any rule was written from the seventh set's misses; the fifth passages.
HELD_OUT_8 = [("xquad-ru", f"a{n}_p4.txt") for n in range(48)]
# Ninth held-out set (session 28): the middles of the real documents the first two sets cut to their first
# EXCERPT_CHARS and last TAIL_CHARS — orders, a ministry's order, the application of a law, a thesis, Word files —
# text no set held, no rule was written from and nobody labelled before it; two windows of each (`_middles`: none
# from a document too short to have been cut).
HELD_OUT_9 = DOCUMENTS + HELD_OUT
# Tenth (session 29): one more window of the same documents, at the half of the part the first two sets left out —
# between held-out-9's two windows and clear of them (only where that part holds six windows) — labelled before
# korpus's registers of it were looked at, after meta-12 was written from held-out-9's misses.
HELD_OUT_10 = HELD_OUT_9
# Eleventh (session 29): the windows at a sixth and five sixths of that part — outside held-out-9's and -10's, clear
# of them where the part holds six windows — labelled before korpus's registers of them were looked at, after meta-13
# was written from held-out-10's misses.
HELD_OUT_11 = HELD_OUT_9
# Twelfth (session 29): the windows at 1/12, 5/12, 7/12 and 11/12 of that part, between the earlier five and clear of
# them where the part holds twelve windows (10 documents), labelled before korpus's registers of them were looked at,
# after meta-14 was written from held-out-11's misses.
HELD_OUT_12 = HELD_OUT_9
# Thirteenth (session 30): the windows at a quarter and three quarters of that part — the last clear of the nine read
# before where the part holds twelve windows — labelled before korpus's registers of them were looked at, after
# meta-16 was written from held-out-12's misses.
HELD_OUT_13 = HELD_OUT_9
# Fourteenth (session 30): the windows at 1/8, 3/8, 5/8 and 7/8 of that part, between the twelfths read before and
# clear of them where the part holds 24 windows, labelled before korpus's registers of them were looked at, after
# meta-17 was written from held-out-13's misses.
HELD_OUT_14 = HELD_OUT_9
# Which windows `write_texts(..., middles=N)` writes for held-out-N: (their centres, the room a part needs, the
# number of the first, as «<source>#middle-<number>»).
MIDDLES = {
    9: (((1, 3), (2, 3)), 3, 1),
    10: (((1, 2),), 6, 3),
    11: (((1, 6), (5, 6)), 6, 4),
    12: (((1, 12), (5, 12), (7, 12), (11, 12)), 12, 6),
    13: (((1, 4), (3, 4)), 12, 10),
    14: (((1, 8), (3, 8), (5, 8), (7, 8)), 24, 12),
}
EXCERPT_CHARS = 6000
TAIL_CHARS = 1500
MIDDLE_CHARS = 2500
MANIFEST = "defaults:\n  owner: archive\n  access: public\n"


def _excerpt(pages: list[dict]) -> list[dict]:
    """The first EXCERPT_CHARS of the document and its last TAIL_CHARS, cut at line ends."""
    total = sum(len(p["text"]) for p in pages)
    if total <= EXCERPT_CHARS + TAIL_CHARS:
        return pages
    kept, used = [], 0
    for page in pages:
        if used >= EXCERPT_CHARS:
            break
        text = page["text"]
        if used + len(text) > EXCERPT_CHARS:
            text = text[: text.rfind("\n", 0, EXCERPT_CHARS - used) + 1 or EXCERPT_CHARS - used]
        kept.append({**page, "text": text})
        used += len(text)
    last = pages[-1]
    tail = last["text"][-TAIL_CHARS:]
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    if kept[-1]["page"] == last["page"] and kept[-1]["t_start"] == last["t_start"]:
        kept[-1] = {**kept[-1], "text": kept[-1]["text"] + "\n…\n" + tail}
    else:
        kept.append({**last, "text": tail})
    return kept


def _middles(pages: list[dict], at: tuple[tuple[int, int], ...] = ((1, 3), (2, 3)), room: int = 3) -> list[list[dict]]:
    """Windows of about MIDDLE_CHARS from the part `_excerpt` leaves out, centred at the fractions `at` of it (a third
    and two thirds: held-out-9; the half: held-out-10, clear of those two when the part holds `room` 6 windows) and cut
    at line ends (page by page, as served); none when that part is shorter than `room` windows."""
    starts, total = [], 0
    for page in pages:
        starts.append(total)
        total += len(page["text"])
    low, high = EXCERPT_CHARS, total - TAIL_CHARS
    if high - low < room * MIDDLE_CHARS:
        return []
    windows = []
    for centre in (low + share * (high - low) // whole for share, whole in at):
        begin, end = centre - MIDDLE_CHARS // 2, centre + MIDDLE_CHARS // 2
        window = []
        for page, start in zip(pages, starts, strict=True):
            text = page["text"]
            a, b = max(begin - start, 0), min(end - start, len(text))
            if a >= b:
                continue
            if a > 0:  # from the next line's start, to the last whole line
                a = text.find("\n", a) + 1 or b
            if b < len(text):
                b = text.rfind("\n", a, b) + 1 or a
            if text[a:b].strip():
                window.append({**page, "text": text[a:b]})
        windows.append(window)
    return windows


def write_texts(shared: Path, out: Path, documents: list[tuple[str, str]] = DOCUMENTS, middles: int = 0) -> None:
    """The served text of `documents` (a default refresh of copies of them, meta-documents off) as texts.jsonl: each
    document's `_excerpt`, or with `middles` N the `_middles` windows of held-out-N (MIDDLES) as «<source>#middle-K»."""
    from flows.corpus_refresh import run_refresh
    from korpus.core.settings import Settings
    from tasks.index.sqlite import SqliteIndex
    from tasks.meta.publish import served_pages

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        for folder, name in documents:
            target = root / folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if folder == "xquad-ru":  # a passage of the repository's XQuAD-ru corpus, as a text file
                target.write_text(_xquad_passages()[name.removesuffix(".txt")] + "\n", encoding="utf-8")
            else:
                shutil.copyfile(shared / folder / name, target)
        (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
        settings = Settings(data=Path(tmp) / "data", meta_documents=False)
        run_refresh(root, settings)
        with SqliteIndex(settings.index_path) as index:
            rows = {r["source_id"]: r for r in index.sources() if r.get("lifecycle", "current") == "current"}
            lines = []
            for folder, name in documents:
                row = rows.get(f"{folder}/{name}")
                if row is None:
                    print(f"not served: {folder}/{name}", file=sys.stderr)
                    continue
                source, pages = served_pages(index, row)
                listed = [{"page": p.page, "t_start": p.t_start, "text": p.text} for p in pages]
                if not middles:
                    lines.append({"source_id": source.source_id, "kind": row["kind"], "pages": _excerpt(listed)})
                    continue
                at, room, first = MIDDLES[middles]
                for number, window in enumerate(_middles(listed, at, room), first):
                    lines.append(
                        {"source_id": f"{source.source_id}#middle-{number}", "kind": row["kind"], "pages": window}
                    )
    out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")


def _xquad_passages() -> dict[str, str]:
    lines = (
        (Path(__file__).resolve().parents[1] / "eval" / "xquad-ru" / "corpus.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    return {row["_id"]: row["text"] for row in map(json.loads, filter(None, lines))}


if __name__ == "__main__":
    chosen = {
        "--held-out": HELD_OUT,
        "--held-out-2": HELD_OUT_2,
        "--held-out-3": HELD_OUT_3,
        "--held-out-4": HELD_OUT_4,
        "--held-out-5": HELD_OUT_5,
        "--held-out-6": HELD_OUT_6,
        "--held-out-7": HELD_OUT_7,
        "--held-out-8": HELD_OUT_8,
        "--held-out-9": HELD_OUT_9,
        "--held-out-10": HELD_OUT_10,
        "--held-out-11": HELD_OUT_11,
        "--held-out-12": HELD_OUT_12,
        "--held-out-13": HELD_OUT_13,
        "--held-out-14": HELD_OUT_14,
    }
    flag = next((a for a in sys.argv[3:] if a in chosen), None)
    middles = {f"--held-out-{n}": n for n in MIDDLES}.get(flag or "", 0)
    write_texts(Path(sys.argv[1]), Path(sys.argv[2]), chosen[flag] if flag else DOCUMENTS, middles=middles)


# --- scoring ------------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ROOT / "eval" / "registers" / "texts.jsonl"
LABELS = ROOT / "eval" / "registers" / "labels.json"
HELD_OUT_TEXTS = ROOT / "eval" / "registers" / "held-out" / "texts.jsonl"
HELD_OUT_LABELS = ROOT / "eval" / "registers" / "held-out" / "labels.json"


def held_out(number: int) -> tuple[Path, Path]:
    """(texts, labels) of the `number`-th later held-out set, eval/registers/held-out-<number> (2 to 14)."""
    folder = ROOT / "eval" / "registers" / f"held-out-{number}"
    return folder / "texts.jsonl", folder / "labels.json"


def load_texts(path: Path = TEXTS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_labels(path: Path = LABELS) -> dict[str, dict]:
    return {d["source_id"]: d for d in json.loads(path.read_text(encoding="utf-8"))["documents"]}


def _person_tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[\s.]+", name.lower()) if t]


def person_matches(shown: str, label: str) -> bool:
    """«Тырцев С. А.», «С. А. Тырцев» and «Тырцев Сергей» fit the label «Тырцев С. А.»; the surname must be spelt as
    the label spells it (ё is not е), and each other word is the label's word or its initial, in the label's order."""
    entry, (surname, *rest) = _person_tokens(shown), _person_tokens(label)
    if surname not in entry:
        return False
    others = [t for t in entry if t != surname]
    if len(others) > len(rest):
        return False
    return all(
        o == r or (len(o) == 1 and r.startswith(o)) or (len(r) == 1 and o.startswith(r))
        for o, r in zip(others, rest, strict=False)
    )


@cache
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("russian")


def _org_words(name: str) -> list[str]:
    """An organisation's words, lower case, ё as е, apostrophes and quotes gone."""
    return re.findall(r"\w+", re.sub(r"['’`]", "", name.lower().replace("ё", "е")))


def _org_key(name: str) -> tuple[str, ...]:
    return tuple(_stemmer().stemWords(_org_words(name)))


def _org_lemmas(name: str) -> tuple[str, ...]:
    from tasks.meta.models import parse

    return tuple(parse(w)[0].normal_form.replace("ё", "е") for w in _org_words(name))


def org_matches(shown: str, label: str) -> bool:
    """Case, quotes and endings folded — by Snowball Russian stems («Минюстом России» fits «Минюст России») or, where a
    stem keeps a changing root, by pymorphy's dictionary forms («Англиканской церкви» fits «Англиканская церковь»).
    An entry shown with its abbreviation, «Министерство юстиции Российской Федерации (Минюст России)», fits a label
    that is either."""
    both = re.fullmatch(r"(.+) \(([^()]+)\)", shown)
    if both and (org_matches(both.group(1), label) or org_matches(both.group(2), label)):
        return True
    return _org_key(shown) == _org_key(label) or _org_lemmas(shown) == _org_lemmas(label)


def _names(entity: dict) -> list[str]:
    return [entity["name"], *entity.get("also", [])]


def score(register: dict[str, list[str]], labels: dict[str, dict]) -> dict[str, dict]:
    """Precision (entries that name a labelled entity of their kind) and recall (labelled entities some entry names)
    of a collection's registers against the labels: `register` is {"persons": [shown…], "organisations": [shown…]}."""
    out = {}
    for kind, matches in (("persons", person_matches), ("organisations", org_matches)):
        entities = {}
        for doc in labels.values():
            for entity in doc[kind]:
                known = entities.setdefault(entity["name"], {"name": entity["name"], "also": []})
                known["also"] += [n for n in entity.get("also", []) if n not in known["also"]]
        entries = register[kind]
        right = [e for e in entries if any(matches(e, n) for ent in entities.values() for n in _names(ent))]
        found = [n for n, ent in entities.items() if any(matches(e, x) for e in entries for x in _names(ent))]
        out[kind] = {
            "entries": len(entries),
            "labelled": len(entities),
            "precision": round(len(right) / len(entries), 3) if entries else 1.0,
            "recall": round(len(found) / len(entities), 3) if entities else 1.0,
            "wrong": sorted(set(entries) - set(right)),
            "missed": sorted(set(entities) - set(found)),
        }
    return out


def registers_of(texts: list[dict]) -> dict[str, list[str]]:
    """The persons and organisations registers korpus builds from these documents' served text."""
    from korpus.core.datamodel import PageResult, Source
    from tasks.meta.documents import organisations, persons
    from tasks.meta.facts import extract_facts

    facts = []
    for doc in texts:
        source = Source(
            source_id=doc["source_id"],
            version="0" * 64,
            path=doc["source_id"],
            kind=doc["kind"],
            owner="archive",
            access="public",
        )
        pages = [
            PageResult(
                source_id=doc["source_id"],
                source_version="0" * 64,
                page=p["page"],
                t_start=p["t_start"],
                text=p["text"],
                method="chunks",
            )
            for p in doc["pages"]
        ]
        facts.append(extract_facts(source, pages))
    register, _ = persons(facts)
    return {"persons": [p.shown for p in register], "organisations": [o.shown for o in organisations(facts)]}


def _name_first(shown: str) -> bool:
    """«Остап Татур Васильевич»: a first name (more surely one than the next word, and no surname by the dictionary or
    its ending), a word, a patronymic — a first name shown first."""
    from tasks.meta.models import parse

    words = shown.split()
    if len(words) != 3 or not all(re.fullmatch(r"[А-ЯЁ][а-яё-]+", w) for w in words):
        return False
    if not re.search(r"(?:вич|вна|ична|чна)$", words[2]) or re.search(r"(?:ов|ев|ёв|ин|ын|ский|цкий|ая)$", words[0]):
        return False

    def as_name(word: str) -> float:
        return max((p.score for p in parse(word) if "Name" in p.tag), default=0.0)

    return not any("Surn" in p.tag for p in parse(words[0])) and as_name(words[0]) > as_name(words[1])


def _surname_word(shown: str) -> str:
    words = shown.split()
    return words[1] if _name_first(shown) else words[0] if words else ""


def _initials(shown: str) -> tuple[str, ...]:
    """«Татур Остап Васильевич» → (О, В); «Остап Татур Васильевич» → (О, В); «Татура О. В.» → (О, В)."""
    words = shown.split()
    return (words[0][0], words[2][0]) if _name_first(shown) else tuple(w[0] for w in words[1:3])


def register_defects(register: dict[str, list[str]]) -> list[str]:
    """What an archivist would strike from a register, as «kind: entry — why»: a person entry whose surname is a
    common word with at most initials beside it («Адрес Ф. И.», «Монитор А.»), a first name shown first («Остап
    Татур Васильевич»), two people in one entry («Matteo Frigo Steven G. Johnson»), one person or body twice («Татура
    О. В.» beside «Татур Остап Васильевич»; «МВД России» beside «МВД РФ»), a body in an oblique case
    («Межгосударственным советом по стандартизации») or a code word («POST»)."""
    from tasks.meta.models import _models, parse
    from tasks.meta.names import is_nominative_name
    from tasks.meta.org_names import federal_body
    from tasks.meta.surnames import surname_key

    morph, defects = _models()[2], []
    people = register["persons"]
    for shown in people:
        words, surname = shown.split(), _surname_word(shown)
        full = [w for w in words[1:] if not w.endswith(".")]
        readings = parse(surname) if re.fullmatch(r"[А-ЯЁа-яё-]+", surname) else []
        roles = {t for p in readings for t in ("Surn", "Name", "Patr") if t in p.tag}
        if readings and not full and morph.word_is_known(surname.lower()) and not roles:
            defects.append(f"persons: {shown} — a common word with initials")
        if _name_first(shown):
            defects.append(f"persons: {shown} — a first name shown first")
        latin = re.findall(r"[A-Z][a-z]+", shown) if not re.search(r"[А-ЯЁа-яё]", shown) else []
        if len(latin) > 3 or len(re.findall(r"\b[A-ZА-ЯЁ]\.", shown)) > 2:
            defects.append(f"persons: {shown} — two people")
    for i, a in enumerate(people):
        for b in people[i + 1 :]:
            same_stem = surname_key(_surname_word(a)) == surname_key(_surname_word(b))
            if same_stem and _initials(a) and _initials(a) == _initials(b):
                defects.append(f"persons: {a} = {b} — one person twice")
    bodies = register["organisations"]
    for shown in bodies:
        if re.fullmatch(r"[A-Z]{2,6}", shown) and shown in ("GET", "POST", "PUT", "DELETE", "HTTP", "API", "JSON"):
            defects.append(f"organisations: {shown} — a code word")
        if re.match(r"[А-ЯЁа-яё]", shown) and not re.search(r"[«\"(]", shown) and not is_nominative_name(shown):
            defects.append(f"organisations: {shown} — not in the nominative")
    for i, a in enumerate(bodies):
        for b in bodies[i + 1 :]:
            federal = federal_body(a)
            if org_matches(a, b) or (federal is not None and federal == federal_body(b)):
                defects.append(f"organisations: {a} = {b} — one body twice")
    return defects

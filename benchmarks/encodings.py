"""Which detector reads a legacy code page right: korpus's own (tasks/readers/text.py `decode_text`) against
charset-normalizer and chardet, on a labelled set of short (~40 characters) and long (~600) texts in each code page.

    .venv/bin/python benchmarks/encodings.py [--json]

The set is built here by encoding texts whose words are known: the real Russian texts of
tests/fixtures/real-archive/text (a court ruling, a football report, a decree) in cp1251, koi8-r, cp866,
mac-cyrillic and iso-8859-5; and letters in English, German, French and Spanish (cp1252, latin-1, cp850) and Polish
and Czech (cp1250, iso-8859-2) written for this benchmark. A reading is right when the decoded text equals the
original exactly (two code pages that give the same text are both right). chardet is not a korpus dependency:
`pip install chardet` to include it (its row says so when absent).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.readers.base import UnreadableSourceError
from tasks.readers.text import decode_text

ROOT = Path(__file__).resolve().parents[1]
RUSSIAN_FILES = sorted((ROOT / "tests" / "fixtures" / "real-archive" / "text").glob("*.txt"))
WESTERN = {
    "en": "Dear Mr. Thompson, thank you for your letter of the 12th. We have reviewed the café invoice and the résumé "
    "you sent; the naïve estimate of £1,200 was corrected. The delivery to Zürich is scheduled for Monday. "
    "Please confirm the address and the contact person before the end of the week. Kind regards, Anna.",
    "de": "Sehr geehrte Frau Müller, vielen Dank für Ihr Schreiben vom 3. März. Die Lieferung nach Zürich über die "
    "Hauptstraße verzögert sich um zwei Wochen, weil die Prüfung der Geräte länger dauert. Wir bitten um "
    "Verständnis und übernehmen die zusätzlichen Kosten. Mit freundlichen Grüßen, Jörg Weiß.",
    "fr": "Madame, Monsieur, suite à notre réunion du 14 février, je vous prie de trouver ci-joint le procès-verbal "
    "révisé. Les délais de livraison ont été prolongés d'une semaine ; la facture définitive sera émise après "
    "réception des pièces. Veuillez agréer l'expression de nos sentiments distingués. Hélène Lefèvre.",
    "es": "Estimado señor García: le escribo en relación con el pedido número 45 del año pasado. La cantidad "
    "facturada no coincide con la acordada y la entrega llegó incompleta. Le ruego que revise la situación "
    "y nos envíe una nota de crédito. Atentamente, María Núñez, departamento de compras.",
}
CENTRAL = {
    "pl": "Szanowny Panie, w nawiązaniu do naszej rozmowy z dnia 5 maja przesyłam poprawioną umowę. Zmiany dotyczą "
    "terminu płatności oraz kar umownych za opóźnienie dostawy. Proszę o podpisanie dwóch egzemplarzy i "
    "odesłanie jednego z nich. Z poważaniem, Łukasz Wróbel, dział zaopatrzenia.",
    "cs": "Vážený pane řediteli, dovoluji si Vás požádat o prodloužení lhůty k dodání zboží o čtrnáct dní. Důvodem "
    "je zpoždění výroby u našeho dodavatele. Případné náklady spojené se zpožděním uhradíme. S pozdravem, "
    "Jiří Dvořák, obchodní oddělení.",
}
CODE_PAGES = {
    "ru": ("cp1251", "koi8_r", "cp866", "mac_cyrillic", "iso8859_5"),
    "western": ("cp1252", "latin_1", "cp850"),
    "central": ("cp1250", "iso8859_2"),
}


def _cut(text: str, length: int) -> str:
    text = " ".join(text.split())
    if len(text) <= length:
        return text
    return text[:length].rsplit(" ", 1)[0]


def labelled() -> list[tuple[str, str, str, str]]:
    """(language, length, code page, text) for every case."""
    russian = [decode_text(path.read_bytes())[0] for path in RUSSIAN_FILES]
    cases = []
    for group, texts in (
        ("ru", {f"ru{n}": t for n, t in enumerate(russian)}),
        ("western", WESTERN),
        ("central", CENTRAL),
    ):
        for language, text in texts.items():
            for length, size in (("short", 40), ("long", 600)):
                piece = _cut(text[len(text) // 3 :] if group == "ru" else text, size)
                for page in CODE_PAGES[group]:
                    try:
                        piece.encode(page)
                    except UnicodeEncodeError:
                        continue  # a letter the code page has not (cp850 has no «€»): not a case
                    cases.append((language, length, page, piece))
    return cases


def korpus(raw: bytes) -> str | None:
    try:
        return decode_text(raw)[0]
    except UnreadableSourceError:
        return None


def charset_normalizer(raw: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(raw).best()
    return str(best) if best is not None else None


def chardet(raw: bytes) -> str | None:
    import chardet as detector

    name = detector.detect(raw).get("encoding")
    try:
        return raw.decode(name) if name else None
    except (LookupError, UnicodeDecodeError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    detectors = {"korpus": korpus, "charset-normalizer": charset_normalizer}
    try:
        import chardet as _  # noqa: F401

        detectors["chardet"] = chardet
    except ImportError:
        print("chardet is not installed: its row is left out", file=sys.stderr)
    right: dict[str, dict[str, list[bool]]] = {name: defaultdict(list) for name in detectors}
    cases = labelled()
    for language, length, page, text in cases:
        raw = text.encode(page)
        group = "ru" if language.startswith("ru") else ("central" if language in CENTRAL else "western")
        for name, detect in detectors.items():
            ok = detect(raw) == text
            right[name][f"{group} {length}"].append(ok)
            right[name]["all"].append(ok)
    report = {name: {k: f"{sum(v)}/{len(v)}" for k, v in sorted(by.items())} for name, by in right.items()}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    columns = sorted(next(iter(report.values())))
    print("| detector | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, by in report.items():
        print(f"| {name} | " + " | ".join(by[c] for c in columns) + " |")


if __name__ == "__main__":
    main()

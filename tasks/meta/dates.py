"""Date expressions in Russian text, found by rules and normalised to ISO (`2023-03-12`, `1998-03`, `2001`).

What is recognised (`find_dates`), the most specific first, never two overlapping:
- day ranges «с 1 по 5 марта 2001 г.», «1–5 марта 2001 года», «с 12.03.2023 по 15.03.2023»;
- days «12 марта 2023 г.», «12.03.2023», «2023-03-12»;
- months «в марте 1998 года», «март 1998 г.»;
- year ranges «2001–2003 гг.», «в 2001-2003 годах»; years «в 1998 году», «1998 г.», «1998 года».
A bare number («1998»), or one that ends a document number («№ 45-17/2023 г.»), is not a date: too many are sums,
numbers of pieces or article numbers. A day or month that cannot exist (31.02) is not a date, nor is a year outside
1700-2100.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

MONTHS = {
    "январ": 1,
    "феврал": 2,
    "март": 3,
    "апрел": 4,
    "ма": 5,
    "июн": 6,
    "июл": 7,
    "август": 8,
    "сентябр": 9,
    "октябр": 10,
    "ноябр": 11,
    "декабр": 12,
}
MONTH_NAMES = [
    "",
    "января",
    "февраля",
    "марта",
    "апреля",
    "мая",
    "июня",
    "июля",
    "августа",
    "сентября",
    "октября",
    "ноября",
    "декабря",
]
_MONTH = (
    r"(январ[ьяе]|феврал[ьяе]|марта?|марте|апрел[ьяе]|ма[йяе]|июн[ьяе]|июл[ьяе]|августа?|августе|сентябр[ьяе]|"
    r"октябр[ьяе]|ноябр[ьяе]|декабр[ьяе])"
)
_YEAR_WORD = r"(?:\s*(?:г\.|гг\.|года|году|год)(?!\w))?"
_D = r"(\d{1,2})"
_Y = r"(\d{4})"
_DOTTED = r"(\d{1,2})\.(\d{1,2})\.(\d{4})"
_DASH = r"\s*[-–—]\s*"

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("dotted-range", re.compile(rf"(?<![\d.])(?:с\s+)?{_DOTTED}(?:{_DASH}|\s+по\s+){_DOTTED}(?![\d.])", re.I)),
    ("day-range", re.compile(rf"(?<!\d)(?:с\s+)?{_D}(?:{_DASH}|\s+по\s+){_D}\s+{_MONTH}\s+{_Y}{_YEAR_WORD}", re.I)),
    ("day", re.compile(rf"(?<!\d){_D}\s+{_MONTH}\s+{_Y}{_YEAR_WORD}", re.I)),
    ("dotted", re.compile(rf"(?<![\d.]){_DOTTED}(?![\d.]){_YEAR_WORD}")),
    ("iso", re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")),
    ("month", re.compile(rf"(?<!\w){_MONTH}\s+{_Y}{_YEAR_WORD}", re.I)),
    ("year-range", re.compile(rf"(?<![\d/-]){_Y}{_DASH}{_Y}\s*(?:гг\.|годах|годы|годов|годам)(?!\w)", re.I)),
    ("year", re.compile(rf"(?<![\d/-]){_Y}\s*(?:г\.|года|году|год)(?!\w)", re.I)),
]


@dataclass(frozen=True)
class DateMention:
    """A date expression at [start, end) of the text, normalised: `first`..`last` (equal for a single date)."""

    start: int
    end: int
    text: str
    first: str
    last: str

    @property
    def label(self) -> str:
        return self.first if self.first == self.last else f"{self.first} – {self.last}"


def month_number(word: str) -> int:
    word = word.lower()
    if word.startswith("ма") and not word.startswith("мар"):
        return 5
    return next(number for stem, number in MONTHS.items() if stem != "ма" and word.startswith(stem))


def _day(year: str, month: int | str, day: str) -> str | None:
    try:
        value = dt.date(int(year), int(month), int(day))
    except ValueError:
        return None
    return value.isoformat() if 1700 <= value.year <= 2100 else None


def _year(year: str) -> str | None:
    return year if 1700 <= int(year) <= 2100 else None


def _normalise(kind: str, g: tuple[str, ...]) -> tuple[str | None, str | None]:
    if kind == "dotted-range":
        return _day(g[2], g[1], g[0]), _day(g[5], g[4], g[3])
    if kind == "day-range":
        month = month_number(g[2])
        return _day(g[3], month, g[0]), _day(g[3], month, g[1])
    if kind == "day":
        one = _day(g[2], month_number(g[1]), g[0])
        return one, one
    if kind == "dotted":
        one = _day(g[2], g[1], g[0])
        return one, one
    if kind == "iso":
        one = _day(g[0], g[1], g[2])
        return one, one
    if kind == "month":
        one = f"{g[1]}-{month_number(g[0]):02d}" if _year(g[1]) else None
        return one, one
    if kind == "year-range":
        return _year(g[0]), _year(g[1])
    one = _year(g[0])
    return one, one


def find_dates(text: str) -> list[DateMention]:
    """Every date expression in `text`, in order; see the module docstring for what counts."""
    taken: list[tuple[int, int]] = []
    found: list[DateMention] = []
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < b and a < end for a, b in taken):
                continue
            first, last = _normalise(kind, match.groups())
            if first is None or last is None or last < first:
                continue
            taken.append((start, end))
            found.append(DateMention(start, end, match.group(0).strip(), first, last))
    return sorted(found, key=lambda m: m.start)


def spoken(iso: str) -> str:
    """`2023-03-12` → «12 марта 2023», `1998-03` → «март 1998» (as a heading reads), `2001` → «2001»."""
    parts = iso.split("-")
    if len(parts) == 3:
        return f"{int(parts[2])} {MONTH_NAMES[int(parts[1])]} {parts[0]}"
    if len(parts) == 2:
        nominative = [
            "",
            "январь",
            "февраль",
            "март",
            "апрель",
            "май",
            "июнь",
            "июль",
            "август",
            "сентябрь",
            "октябрь",
            "ноябрь",
            "декабрь",
        ]
        return f"{nominative[int(parts[1])]} {parts[0]}"
    return iso

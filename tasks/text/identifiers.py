"""Identifiers extracted at ingest and from queries: ИНН (checksum-validated), ОГРН/ОГРНИП, contract and case
numbers. Stored per chunk in the `identifiers` field; a query that carries one ranks its exact match first.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"(?<![\d\w])(\d{10}|\d{12}|\d{13}|\d{15})(?![\d\w])")
_NUMBERED = re.compile(r"№\s*([0-9A-Za-zА-Яа-яЁё]+(?:\s?[-/.]\s?[0-9A-Za-zА-Яа-яЁё]+)+)")
_CASE = re.compile(r"(?<![\w/-])([А-ЯA-Z]?\d{1,6}(?:-\d{1,6})+/\d{2,4})(?![\w/])")

_INN10 = (2, 4, 10, 3, 5, 9, 4, 6, 8)
_INN11 = (7, 2, 4, 10, 3, 5, 9, 4, 6, 8)
_INN12 = (3, 7, 2, 4, 10, 3, 5, 9, 4, 6, 8)


def _check(digits: str, weights: tuple[int, ...]) -> int:
    return sum(int(d) * w for d, w in zip(digits, weights, strict=False)) % 11 % 10


def valid_inn(value: str) -> bool:
    if len(value) == 10:
        return _check(value, _INN10) == int(value[9])
    if len(value) == 12:
        return _check(value, _INN11) == int(value[10]) and _check(value, _INN12) == int(value[11])
    return False


def valid_ogrn(value: str) -> bool:
    if len(value) == 13:
        return int(value[:12]) % 11 % 10 == int(value[12])
    if len(value) == 15:
        return int(value[:14]) % 13 % 10 == int(value[14])
    return False


def normalise(identifier: str) -> str:
    return re.sub(r"\s+", "", identifier).lower()


def extract_identifiers(text: str) -> list[str]:
    """Every identifier in `text`, normalised, in order of first appearance."""
    found: list[str] = []
    for m in _DIGITS.finditer(text):
        value = m.group(1)
        if valid_inn(value) or valid_ogrn(value):
            found.append(value)
    for pattern in (_NUMBERED, _CASE):
        for m in pattern.finditer(text):
            value = normalise(m.group(1))
            if any(ch.isdigit() for ch in value):
                found.append(value)
    return list(dict.fromkeys(found))

"""The settings table in docs/configuration.md says each setting's default as korpus/core/settings.py has it: every
backticked default in the table is compared with the field's real default (rows with prose such as «rebuilt e5-small» or
«see docs/ocr.md» are not values and are left alone)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from korpus.core.settings import Settings

pytestmark = pytest.mark.unit
TABLE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
ROW = re.compile(r"^\| (`KORPUS_[^|]+) \| ([^|]+) \|", re.M)


def _names(cell: str) -> list[str]:
    """`KORPUS_VAD_THRESHOLD` / `_MIN_SILENCE_MS` → KORPUS_VAD_THRESHOLD, KORPUS_VAD_MIN_SILENCE_MS."""
    names = re.findall(r"`((?:KORPUS)?_[A-Z0-9_]+)`", cell)
    if not names:  # a family (`KORPUS_TEXT_LAYER_*`)
        return []
    first = names[0]
    prefix = "_".join(first.split("_")[:2])
    return [name if name.startswith("KORPUS_") else prefix + name for name in names]


def _said(cell: str) -> list[str | None]:
    """Each default the cell gives: a backticked value, `None` for «unset», '?' for prose."""
    said: list[str | None] = []
    for part in cell.split(" / "):
        part = part.strip()
        value = re.fullmatch(r"`([^`]*)`(?: \(.*\))?", part)
        said.append(value.group(1) if value else (None if part.startswith("unset") else "?"))
    return said


def _written(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _same(said: str, real: str | None) -> bool:
    if real is None:
        return False
    try:
        return float(said) == float(real)
    except ValueError:
        said = str(Path(said).expanduser()) if said.startswith("~") else said
        return said.rstrip("/") == real.rstrip("/") or said == f"./{real}"


def _rows() -> list[tuple[str, str | None]]:
    rows = []
    for names_cell, defaults_cell in ROW.findall(TABLE.read_text(encoding="utf-8")):
        names, said = _names(names_cell), _said(defaults_cell)
        if not names:
            continue
        if len(said) != len(names):
            said = said[:1] * len(names) if len(said) == 1 and len(names) == 1 else ["?"] * len(names)
        rows += [(n, s) for n, s in zip(names, said, strict=True) if s != "?"]
    return rows


def test_the_table_is_read() -> None:  # the comparison below would pass vacuously on an unread table
    rows = dict(_rows())
    assert len(rows) > 40 and rows["KORPUS_RRF_K"] == "60" and rows["KORPUS_VLM_URL"] is None


def test_every_default_in_the_readme_is_the_settings_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("KORPUS_")]:
        monkeypatch.delenv(name)
    fields = Settings.model_fields
    wrong = []
    for name, said in _rows():
        field = name.removeprefix("KORPUS_").lower()
        if field not in fields:
            continue  # names that are not fields (KORPUS_TEXT_LAYER_*) are test_infra.py's business
        default = fields[field].get_default(call_default_factory=True)
        real = _written(default)
        if said is None and default is None:
            continue
        if said is None or not _same(said, real):
            wrong.append((name, said, real))
    assert wrong == []


def test_every_setting_is_in_the_table() -> None:
    """A setting added to korpus/core/settings.py is documented with its default (the text-layer detector's family
    is one row pointing at docs/ocr.md)."""
    named = {name for name, _ in _rows()} | {
        n for cell, _ in ROW.findall(TABLE.read_text("utf-8")) for n in _names(cell)
    }
    missing = [
        f"KORPUS_{field.upper()}"
        for field in Settings.model_fields
        if f"KORPUS_{field.upper()}" not in named and not field.startswith("text_layer_")
    ]
    assert missing == []

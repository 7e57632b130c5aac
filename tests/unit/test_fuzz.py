"""Property-based fuzzing (hypothesis): the manifest parser, the text decoder and the PDF reader never crash on
arbitrary input — they return a result or raise their one documented error."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.parse import read_source
from tasks.readers.base import UnreadableSourceError
from tasks.readers.text import decode_text
from tasks.receive import Manifest, glob_regex

pytestmark = pytest.mark.unit
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.floats(allow_nan=False))
_yaml_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_manifests = st.fixed_dictionaries(
    {},
    optional={
        "defaults": st.one_of(
            _yaml_values, st.fixed_dictionaries({}, optional={"owner": _scalars, "access": _scalars})
        ),
        "rules": st.one_of(
            _yaml_values,
            st.lists(
                st.fixed_dictionaries(
                    {"match": st.text(max_size=15)}, optional={"owner": _scalars, "access": _scalars}
                ),
                max_size=4,
            ),
        ),
    },
)


@FUZZ
@given(document=st.one_of(_manifests, _yaml_values), source_id=st.text(max_size=30))
def test_manifest_parser_accepts_or_says_why(tmp_path: Path, document: object, source_id: str) -> None:
    (tmp_path / "korpus.yaml").write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    try:
        manifest = Manifest.load(tmp_path)
    except (ValueError, ValidationError) as exc:  # ValidationError is a ValueError: says which key is wrong
        assert str(exc)
        return
    meta = manifest.metadata_for(source_id)
    assert set(meta) == {"owner", "access", "tenant"}


@FUZZ
@given(raw=st.text(max_size=200))
def test_manifest_file_of_any_text(tmp_path: Path, raw: str) -> None:
    (tmp_path / "korpus.yaml").write_text(raw, encoding="utf-8")
    try:
        Manifest.load(tmp_path)
    except (ValueError, yaml.YAMLError):
        pass


@FUZZ
@given(pattern=st.text(max_size=30), source_id=st.text(max_size=30))
def test_any_glob_compiles_and_double_star_matches_everything(pattern: str, source_id: str) -> None:
    glob_regex(pattern).fullmatch(source_id)  # any pattern a user writes compiles
    assert glob_regex("**").fullmatch(source_id)


@FUZZ
@given(pattern=st.text(alphabet=st.characters(exclude_characters="*?"), min_size=1, max_size=30))
def test_a_pattern_without_wildcards_matches_itself_only(pattern: str) -> None:
    assert glob_regex(pattern).fullmatch(pattern)
    assert not glob_regex(pattern).fullmatch(pattern + "x")


@FUZZ
@given(raw=st.binary(max_size=400))
def test_text_decoder_reads_or_names_the_encodings_tried(raw: bytes) -> None:
    try:
        text, encoding = decode_text(raw)
    except UnreadableSourceError as exc:
        assert "NUL bytes" in str(exc) or "tried" in str(exc)
        return
    assert isinstance(text, str) and encoding


def _good_pdf() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Протокол заседания комиссии № 7", fontfile=FONT, fontname="dv", fontsize=12)
    return doc.tobytes(garbage=0, deflate=False)


GOOD_PDF = _good_pdf()


@st.composite
def _mutated_pdfs(draw: st.DrawFn) -> bytes:
    data = bytearray(GOOD_PDF)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        else:
            del data[at : at + draw(st.integers(1, 200))]
        if not data:
            data = bytearray(b"%")
    return bytes(data)


@FUZZ
@given(data=_mutated_pdfs())
def test_pdf_reader_never_crashes_on_a_damaged_pdf(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.pdf"
    path.write_bytes(data)
    source = Source(
        source_id="fuzz.pdf", version="fa" * 32, path=str(path), kind=SourceKind.pdf, owner="o", access="public"
    )
    outcome = read_source(source, Settings(data=tmp_path / "data"))
    # read (pages or pages for OCR) or refused as a whole with a reason (unreadable, or nothing drawn on any page)
    # — never an exception into the flow
    whole = [p.reasons for p in outcome.problems if p.page is None]
    assert outcome.pages or outcome.ocr_pending or whole in ([[ReasonCode.unreadable_file]], [[ReasonCode.empty_text]])

"""Each rule of the contract gate rejects its case with its reason code."""

import pytest

from korpus.datamodel import Chunk, Lifecycle, Locator, ReasonCode
from tasks.gate import POLICIES, gate_chunk, route_chunks

pytestmark = pytest.mark.unit
POLICY = POLICIES["page-v1"]
BODY = "Протокол совещания о ремонте кровли склада № 3."


def _chunk(**update: object) -> Chunk:
    base = Chunk(
        chunk_id="c1", source_id="сканы/протокол.pdf", source_version="ab" * 32, section_path=["протокол.pdf"],
        locator=Locator(page=1, start=0, end=len(BODY)), text=f"[протокол.pdf · лист 1]\n{BODY}", body=BODY,
        owner="Архив", access_rule="public", policy_version="page-v1",
    )  # fmt: skip
    return base.model_copy(update=update)


def _codes(chunk: Chunk, **kwargs: object) -> list[ReasonCode]:
    return [code for code, _ in gate_chunk(chunk, POLICY, **kwargs)]


def test_a_good_chunk_passes() -> None:
    assert gate_chunk(_chunk(), POLICY) == []


@pytest.mark.parametrize(
    ("update", "code"),
    [
        ({"source_id": ""}, ReasonCode.missing_source_id),
        ({"source_version": ""}, ReasonCode.missing_version),
        ({"owner": ""}, ReasonCode.missing_owner),
        ({"access_rule": ""}, ReasonCode.missing_access),
        ({"lifecycle": Lifecycle.superseded}, ReasonCode.not_current),
        ({"policy_version": "experimental-v0"}, ReasonCode.policy_not_approved),
        ({"body": "Текст " * 3000}, ReasonCode.oversized),
        ({"body": "npoTOKon Necepa MocKBa OTPH 1031851041431"}, ReasonCode.text_quality),
        ({"body": "Пpoтокол сoвещания Мoсква дирeктор склaда отдел"}, ReasonCode.text_quality),
    ],
)
def test_each_rule_rejects_its_case(update: dict, code: ReasonCode) -> None:
    assert _codes(_chunk(**update)) == [code]


def test_missing_locator() -> None:
    chunk = _chunk(section_path=[]).model_copy(update={"locator": Locator.model_construct(page=None, t_start=None)})
    assert _codes(chunk) == [ReasonCode.missing_locator]


def test_quarantined_and_starting_inside_a_heading() -> None:
    assert _codes(_chunk(), quarantined=True) == [ReasonCode.quarantined]
    inside = _chunk(locator=Locator(page=1, start=5, end=40))
    assert _codes(inside, heading_spans=[(0, 12)]) == [ReasonCode.starts_inside_heading]
    assert _codes(inside, heading_spans=[(5, 12)]) == []


def test_an_approved_exception_lifts_length_and_quality_only() -> None:
    garbage = _chunk(body="npoTOKon Necepa " * 1000)
    assert set(_codes(garbage)) == {ReasonCode.oversized, ReasonCode.text_quality}
    assert _codes(garbage, approved_exception=True) == []
    assert _codes(_chunk(owner=""), approved_exception=True) == [ReasonCode.missing_owner]


def test_route_keeps_refused_chunks_as_quarantine_items() -> None:
    good, bad = _chunk(), _chunk(chunk_id="c2", body="npoTOKon Necepa MocKBa")
    passed, refused = route_chunks([good, bad], POLICY)
    assert passed == [good]
    assert refused[0].chunk_id == "c2" and refused[0].reasons == [ReasonCode.text_quality]
    assert refused[0].chunk == bad and "npoTOKon" in refused[0].evidence

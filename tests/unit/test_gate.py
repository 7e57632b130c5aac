"""Each rule of the contract gate rejects its case with its reason code."""

import pytest
from pydantic import ValidationError

from korpus.core.datamodel import Chunk, Locator, ReasonCode
from tasks.contract.gate import gate_chunk, route_chunks

pytestmark = pytest.mark.unit
BODY = "Протокол совещания о ремонте кровли склада № 3."


def _chunk(**update: object) -> Chunk:
    base = Chunk(
        chunk_id="c1",
        source_id="сканы/протокол.pdf",
        source_version="ab" * 32,
        section_path=["протокол.pdf"],
        locator=Locator(page=1, start=0, end=len(BODY)),
        text=f"[протокол.pdf · лист 1]\n{BODY}",
        body=BODY,
        owner="Архив",
        access_rule="public",
        policy_version="page-v1",
    )
    return base.model_copy(update=update)


def _codes(chunk: Chunk, **kwargs: object) -> list[ReasonCode]:
    return [code for code, _ in gate_chunk(chunk, **kwargs)]


def test_a_good_chunk_passes() -> None:
    assert gate_chunk(_chunk()) == []


@pytest.mark.parametrize(
    ("update", "code"),
    [
        ({"policy_version": "structure-v0"}, ReasonCode.policy_not_approved),
        ({"body": "Текст " * 3000}, ReasonCode.oversized),
        ({"body": "npoTOKon Necepa MocKBa OTPH 1031851041431"}, ReasonCode.text_quality),
        ({"body": "Пpoтокол сoвещания Мoсква дирeктор склaда отдел"}, ReasonCode.text_quality),
    ],
)
def test_each_rule_rejects_its_case(update: dict, code: ReasonCode) -> None:
    assert _codes(_chunk(**update)) == [code]


@pytest.mark.parametrize("field", ["chunk_id", "source_id", "source_version", "owner", "access_rule"])
def test_no_chunk_exists_without_identity_or_access(field: str) -> None:
    with pytest.raises(ValidationError):
        Chunk.model_validate({**_chunk().model_dump(), field: ""})


def test_no_chunk_exists_without_a_locator() -> None:
    with pytest.raises(ValidationError, match="needs a page or a start time"):
        Chunk.model_validate({**_chunk().model_dump(), "locator": {"start": 0, "end": 5}})


def test_an_approved_exception_lifts_length_and_quality_only() -> None:
    garbage = _chunk(body="npoTOKon Necepa " * 1000)
    assert set(_codes(garbage)) == {ReasonCode.oversized, ReasonCode.text_quality}
    assert _codes(garbage, approved_exception=True) == []
    retired = _chunk(policy_version="structure-v0", body="npoTOKon Necepa " * 1000)
    assert _codes(retired, approved_exception=True) == [ReasonCode.policy_not_approved]


def test_route_keeps_refused_chunks_as_quarantine_items() -> None:
    good, bad = _chunk(), _chunk(chunk_id="c2", body="npoTOKon Necepa MocKBa")
    passed, refused = route_chunks([good, bad])
    assert passed == [good]
    assert refused[0].chunk_id == "c2" and refused[0].reasons == [ReasonCode.text_quality]
    assert refused[0].chunk == bad and "npoTOKon" in refused[0].evidence


ESTIMATE = (
    "Kзпл=0,2 — коэффициент к заработной плате; Kмат=1,1 — к стоимости материалов; Kтр=0,05 — "
    "транспортные расходы; Hp=0,94 — накладные расходы по смете на ремонт кровли."
)


def test_the_files_own_text_is_not_judged_for_spelling_only_uncertain_text_is() -> None:
    """A real procurement estimate writes its coefficients with a Latin K inside Cyrillic words: as the file's own
    text (a DOCX through LibreOffice, a trusted layer, a spreadsheet) it is the source; the same words from OCR are
    what the garbage rules are for."""
    from korpus.core.datamodel import LayerCheck, PageResult
    from tasks.contract.gate import holds_its_own_text

    chunk = _chunk(body=ESTIMATE, policy_version="structure-v2")
    assert ReasonCode.text_quality in _codes(chunk)
    assert _codes(chunk, own_text=True) == []
    assert route_chunks([chunk], own_text_pages={1}) == ([chunk], [])
    assert route_chunks([chunk], own_text_pages={2})[1][0].reasons == [ReasonCode.text_quality]
    assert _codes(_chunk(body="x" * 40_000), own_text=True) == [ReasonCode.oversized]  # length still holds

    def page(**update: object) -> PageResult:
        return PageResult(source_id="s", source_version="v", page=1, text=ESTIMATE, **update)  # type: ignore[arg-type]

    own = [page(method=m) for m in ("markup", "spreadsheet", "mail", "archive")]
    checked = LayerCheck.model_construct(decision="layer-kept")  # flagged, compared with its OCR, kept
    own += [page(method="text-layer", tier=0), page(method="text-layer", tier=0, layer_check=checked)]
    uncertain = [
        page(method="tesseract", tier=1),
        page(method="vlm", tier=2),
        page(method="whisper"),
        page(method="plain-text"),
    ]  # a .txt: nothing says it is not an OCR export
    assert all(holds_its_own_text(p) for p in own) and not any(holds_its_own_text(p) for p in uncertain)

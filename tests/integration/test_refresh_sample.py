"""The foundation's promises, on the sample archive, with every real component in the loop."""

from __future__ import annotations

import re

import pytest

from tasks.index.sqlite import SqliteIndex

from .conftest import LECTURE_ID, Refreshed

pytestmark = pytest.mark.integration

CONTRACT = "договоры/договор_поставки_45-17.pdf"
SCAN = "сканы/протокол_1998.pdf"
GARBAGE_SCAN = "сканы/акт_проверки_2001.pdf"
HR_ORDER = "кадры/приказ_17-к.txt"
UNOWNED = "входящие/письмо_112.txt"


def test_first_refresh_takes_each_page_the_right_way(refreshed: Refreshed) -> None:
    s = refreshed.first
    assert s["changes"] == {"new": 7}
    # contract: 2 text-layer pages; the clean scan and the garbage-layer scan: Tesseract; HR order: plain text
    assert s["pages_by_method"]["text-layer"] == 2
    assert s["pages_by_method"]["tesseract"] == 2
    assert s["ocr_engine_calls"] == 2
    # Whisper runs once per VAD window: the 60-second lecture needs two or more, the espeak recording one
    assert s["asr_engine_calls"] >= 3
    assert 0.3 < s["speech_share"] < 1.0


def test_question_answered_from_scanned_page_via_ocr(refreshed: Refreshed) -> None:
    hits = refreshed.search("когда отремонтируют кровлю склада", k=3)
    top = hits[0]
    assert (top["source_id"], top["page"]) == (SCAN, 1)
    assert top["text"].startswith("[протокол_1998.pdf · лист 1")
    assert "кровл" in top["text"].lower()
    decision = refreshed.search("сколько денег выделили на ремонт кровли", k=3)
    assert any(h["source_id"] == SCAN and "120 000" in h["text"] for h in decision)


def test_garbage_text_layer_is_replaced_by_ocr(refreshed: Refreshed) -> None:
    hits = refreshed.search("огнетушители с истёкшим сроком поверки", k=3)
    top = hits[0]
    assert top["source_id"] == GARBAGE_SCAN
    assert "огнетушител" in top["text"].lower()
    assert "npoBepkn" not in top["text"] and "noxapHoN" not in top["text"]


def test_question_about_recording_returns_timed_chunk(refreshed: Refreshed) -> None:
    hits = refreshed.search("какая температура в Якутии в январе", k=5)
    lecture = [h for h in hits if h["source_id"] == LECTURE_ID]
    assert lecture, hits
    hit = lecture[0]
    assert hit["page"] is None and 0 <= hit["t_start"] < hit["t_end"] <= 61
    assert re.match(r"^\[лекция_ru\.wav · 00:00:\d\d\]\n", hit["text"])
    assert "температур" in hit["text"].lower() and "январ" in hit["text"].lower()
    # every timecode inside the chunk lies within the chunk's own time range
    stamps = [
        int(m[0]) * 3600 + int(m[1]) * 60 + int(m[2]) for m in re.findall(r"\[(\d\d):(\d\d):(\d\d)\]", hit["text"])
    ]
    assert stamps and all(int(hit["t_start"]) <= t <= hit["t_end"] for t in stamps)


def test_transcripts_are_written_to_the_data_dir_not_the_source(refreshed: Refreshed) -> None:
    transcript = refreshed.settings.transcripts_dir / f"{LECTURE_ID}.txt"
    assert transcript.is_file()
    assert re.search(r"^\[00:00:\d\d\] ", transcript.read_text(encoding="utf-8"), re.M)
    assert not list(refreshed.root.rglob("*.wav.txt"))


def test_contract_number_and_inn_are_found(refreshed: Refreshed) -> None:
    bm25 = refreshed.search("45-17/2023", mode="bm25", k=3)
    assert (bm25[0]["source_id"], bm25[0]["page"]) == (CONTRACT, 1)
    hybrid = refreshed.search("договор 45-17/2023", k=2)
    assert (CONTRACT, 1) in {(h["source_id"], h["page"]) for h in hybrid}
    inn = refreshed.search("7708123450", k=3)
    assert (inn[0]["source_id"], inn[0]["page"]) == (CONTRACT, 1)


def test_restricted_document_needs_its_scope(refreshed: Refreshed) -> None:
    default = refreshed.search("премия Смирновой приказ о премировании", k=10)
    assert HR_ORDER not in {h["source_id"] for h in default}
    assert all(h["access"] == "public" for h in default)
    scoped = refreshed.search("премия Смирновой приказ о премировании", scopes=["public", "hr"], k=3)
    assert scoped[0]["source_id"] == HR_ORDER and scoped[0]["access"] == "hr"


def test_file_without_owner_is_quarantined_not_indexed(refreshed: Refreshed) -> None:
    with SqliteIndex(refreshed.settings.index_path) as index:
        items = index.quarantine_items()
        indexed = {row["source_id"] for row in index.sources()}
    unowned = [i for i in items if i["source_id"] == UNOWNED]
    assert unowned and unowned[0]["reasons"] == ["missing-metadata"]
    assert UNOWNED not in indexed
    hits = refreshed.search("готовность отгрузить насосы входящее письмо", scopes=["public", "hr"], k=20)
    assert UNOWNED not in {h["source_id"] for h in hits}


def test_second_refresh_does_no_ocr_asr_or_embedding(refreshed: Refreshed) -> None:
    s = refreshed.second
    assert s["changes"] == {"unchanged": 7}, (s["quarantine_reasons"], s["pages_by_method"], refreshed.first)
    assert s["ocr_engine_calls"] == s["asr_engine_calls"] == s["chunks_embedded"] == 0
    # counted at the engines themselves, not taken from the summary
    assert refreshed.second_calls == {}, refreshed.second_calls


def test_every_progress_milestone_ends_at_100_percent_or_says_why(refreshed: Refreshed) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterType

    with get_client(sync_client=True) as client:  # the session's Prefect database also holds killed test runs'
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["progress"])))
    artifacts = [a for a in artifacts if str(a.flow_run_id) == refreshed.first["flow_run_id"]]
    assert artifacts, "the first refresh left no progress artifacts"
    assert all(a.data == 100.0 for a in artifacts), [(a.description, a.data) for a in artifacts if a.data != 100.0]
    recordings = [a.description for a in artifacts if "мин записи" in (a.description or "")]
    assert recordings and all(
        "без речи" in d or d.split("→ ")[1].split("/")[0] == d.split("/")[1].split()[0] for d in recordings
    )

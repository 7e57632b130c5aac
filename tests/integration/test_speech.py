"""The speech path with real ffmpeg, Silero VAD and faster-whisper (Whisper base, CPU)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from corpora.sample_archive import speech_recording
from korpus.core.datamodel import ReasonCode, Source, SourceKind
from korpus.core.settings import Settings
from tasks.audio.asr import join_words
from tasks.audio.speech import (
    RecordingOutcome,
    RecordingPlan,
    assemble_recording,
    prepare_recording,
    transcribe_windows,
)
from tasks.receive import file_sha256

from .conftest import shared_audio

pytestmark = pytest.mark.integration
STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] ", re.M)


def _source(path: Path) -> Source:
    return Source(
        source_id=path.name,
        version=file_sha256(path),
        path=str(path),
        kind=SourceKind.audio,
        owner="o",
        access="public",
    )


def _run(path: Path, settings: Settings) -> tuple[RecordingPlan, list, RecordingOutcome]:
    source = _source(path)
    plan = prepare_recording(source, settings)
    assert plan.problem is None, plan.problem
    results = [r for r, _ in transcribe_windows(plan, list(range(len(plan.windows))), settings)]
    return plan, results, assemble_recording(source, plan, results, settings)


def _ffmpeg(args: list[str], out: Path) -> Path:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args, str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def lecture(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple:
    settings = Settings(data=tmp_path_factory.mktemp("lecture"))
    return (settings, *_run(shared_audio(), settings))


def test_real_speech_gives_segments_and_a_timed_transcript(lecture: tuple) -> None:
    settings, plan, _results, outcome = lecture
    assert 59 < plan.duration < 61
    assert len(plan.windows) >= 2 and sum(len(w.pieces) for w in plan.windows) >= 5
    assert 0.5 < outcome.speech_seconds / outcome.audio_seconds < 1.0
    text = Path(outcome.transcript).read_text(encoding="utf-8")
    stamps = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in STAMP.findall(text)]
    assert len(stamps) >= 3 and stamps == sorted(stamps) and stamps[-1] < 60
    assert "температур" in text.lower()
    vtt = Path(outcome.transcript).with_suffix(".vtt").read_text(encoding="utf-8")
    assert vtt.startswith("WEBVTT") and " --> " in vtt
    assert settings.transcripts_dir in Path(outcome.transcript).parents


def test_chunk_times_fall_inside_the_speech_they_hold(lecture: tuple) -> None:
    _settings, plan, results, outcome = lecture
    speech = [p for w in plan.windows for p in w.pieces]
    tolerance = 0.5
    for word in join_words([w for r in results for w in r.words]):
        assert any(s - tolerance <= word.start and word.end <= e + tolerance for s, e in speech), word
    for page in outcome.pages:
        assert page.t_start < page.t_end
        assert any(s - tolerance <= page.t_start <= e for s, e in speech)
        first = STAMP.search(page.text)
        assert first and int(first[3]) + 60 * int(first[2]) == int(page.t_start)


def test_words_stay_whole_across_window_edges(models: dict[str, Path], tmp_path: Path) -> None:
    phrases = [
        "Решение суда вступило в законную силу.",
        "Заключение эксперта приложено к делу.",
        "Свидетель с ним знаком давно.",
    ]
    path = speech_recording(phrases, tmp_path / "edges.wav", pause=1.2)
    settings = Settings(data=tmp_path / "data", asr_window_seconds=4.0)
    plan, results, outcome = _run(path, settings)
    assert len(plan.windows) >= 3, plan.windows
    joined = join_words([w for r in sorted(results, key=lambda r: r.index) for w in r.words])
    assert joined, "Whisper heard nothing"
    for word in joined:
        # every word lies inside one window: none was cut at an edge nor glued across one
        assert any(w.start - 0.5 <= word.start and word.end <= w.end + 0.5 for w in plan.windows), word
    assert outcome.pages


def test_silence_and_hum_produce_no_repeated_lines(models: dict[str, Path], tmp_path: Path) -> None:
    path = _ffmpeg(
        [
            "-f",
            "lavfi",
            "-i",
            "anoisesrc=d=45:c=pink:a=0.01",
            "-f",
            "lavfi",
            "-i",
            "sine=f=50:d=45",
            "-filter_complex",
            "amix=inputs=2:weights=1 0.3",
            "-ar",
            "16000",
        ],
        tmp_path / "hum.wav",
    )
    settings = Settings(data=tmp_path / "data")
    source = _source(path)
    plan = prepare_recording(source, settings)
    results = [r for r, _ in transcribe_windows(plan, list(range(len(plan.windows))), settings)]
    outcome = assemble_recording(source, plan, results, settings)
    lines = [STAMP.sub("", line) for line in Path(outcome.transcript).read_text(encoding="utf-8").splitlines()[1:]]
    assert len(lines) == len(set(lines)), lines
    if not outcome.pages:
        assert [p.reasons for p in outcome.problems] == [[ReasonCode.no_speech]]


def test_bad_audio_is_refused_with_a_reason(models: dict[str, Path], tmp_path: Path) -> None:
    good = shared_audio()
    cases = {
        "zero.wav": b"",
        "not_audio.mp3": "Это не запись, а текст.".encode(),
        "tiny.wav": good.read_bytes()[:60],
        "truncated.wav": good.read_bytes()[: len(good.read_bytes()) // 2],
    }
    settings = Settings(data=tmp_path / "data")
    for name, payload in cases.items():
        path = tmp_path / name
        path.write_bytes(payload)
        plan = prepare_recording(_source(path), settings)
        assert plan.problem is not None and plan.problem.reasons == [ReasonCode.unreadable_file], name
        assert plan.windows == []


def test_telephone_and_stereo_audio_are_read(models: dict[str, Path], tmp_path: Path) -> None:
    src = shared_audio()
    settings = Settings(data=tmp_path / "data")
    for name, args in {"phone.wav": ["-ar", "8000", "-t", "15"], "stereo.flac": ["-ac", "2", "-t", "15"]}.items():
        path = _ffmpeg(["-i", str(src), *args], tmp_path / name)
        plan = prepare_recording(_source(path), settings)
        assert plan.problem is None and 14 < plan.duration < 16, name
        assert plan.windows, name

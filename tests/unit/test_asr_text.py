"""Pure parts of the speech path: windows, time maps, joining words, the repetition guard, transcripts."""

import numpy as np
import pytest

from korpus.core.settings import Settings
from tasks.audio.asr import (
    GAP_SECONDS,
    WhisperEngine,
    Window,
    Word,
    collapse_repeats,
    join_words,
    paragraphs,
    plan_windows,
    to_original_time,
    window_audio,
)
from tasks.audio.decode import SAMPLE_RATE, SpeechSegment, transcript_vtt

pytestmark = pytest.mark.unit


def _words(*tokens: str, start: float = 0.0, step: float = 0.5) -> list[Word]:
    return [Word(text=t, start=start + i * step, end=start + i * step + 0.4) for i, t in enumerate(tokens)]


def _text(words: list[Word]) -> str:
    return "".join(w.text for w in words).strip()


def test_token_without_leading_space_is_glued_across_a_window_edge() -> None:
    # window 1 ends with « заключ», window 2 starts with «ение»: one word
    left, right = _words(" Это", " заключ"), _words("ение", " суда.", start=10.0)
    joined = join_words(left + right)
    assert [w.text for w in joined] == [" Это", " заключение", " суда."]
    assert joined[1].start == left[1].start and joined[1].end == right[0].end


def test_token_with_leading_space_starts_a_new_word_across_a_window_edge() -> None:
    # «с ним» | « знакомы»: two windows, the space is kept, nothing glued
    joined = join_words(_words(" с", " ним") + _words(" знакомы.", start=10.0))
    assert _text(joined) == "с ним знакомы."
    assert len(joined) == 3


def test_phrase_repeated_many_times_is_collapsed() -> None:
    words = _words(" Понятно.", " Понятно.", " Понятно.", " Понятно.", " Понятно.", " Спасибо.")
    kept, removed = collapse_repeats(words, max_repeats=2)
    assert _text(kept) == "Понятно. Спасибо." and removed == 4


def test_multiword_phrase_repetition_is_collapsed_but_a_double_is_kept() -> None:
    loop = [" Продолжение", " следует."] * 5
    kept, removed = collapse_repeats(_words(" Итак,", *loop), max_repeats=2)
    assert _text(kept) == "Итак, Продолжение следует." and removed == 4
    double, removed = collapse_repeats(_words(" да,", " да,", " конечно."), max_repeats=2)
    assert _text(double) == "да, да, конечно." and removed == 0


def test_windows_hold_whole_segments_within_the_limit() -> None:
    segments = [(0.0, 10.0), (12.0, 22.0), (25.0, 35.0), (40.0, 75.0), (80.0, 81.0)]
    windows = plan_windows(segments, max_seconds=30.0)
    assert [w.pieces for w in windows] == [[(0.0, 10.0), (12.0, 22.0)], [(25.0, 35.0)], [(40.0, 75.0)], [(80.0, 81.0)]]
    flat = [p for w in windows for p in w.pieces]
    assert flat == segments


def test_window_audio_drops_silence_and_maps_times_back() -> None:
    samples = np.arange(0, 100 * SAMPLE_RATE, dtype=np.float32)
    window = Window(index=0, pieces=[(10.0, 12.0), (50.0, 51.0)])
    audio, time_map = window_audio(samples, window)
    assert len(audio) == int((2.0 + GAP_SECONDS + 1.0) * SAMPLE_RATE)
    assert audio[0] == 10 * SAMPLE_RATE and audio[-1] == 51 * SAMPLE_RATE - 1
    assert to_original_time(0.5, time_map) == pytest.approx(10.5)
    assert to_original_time(2.0 + GAP_SECONDS + 0.25, time_map) == pytest.approx(50.25)


def test_guard_drops_silence_hallucinations_and_loops() -> None:
    settings = Settings()
    engine = WhisperEngine(
        model_path=settings.home,
        no_speech_threshold=settings.asr_no_speech_threshold,
        logprob_threshold=settings.asr_logprob_threshold,
        compression_ratio_threshold=settings.asr_compression_ratio_threshold,
    )
    assert engine.guard(0.9, -1.5, 1.2).startswith("no-speech")
    assert engine.guard(0.9, -0.3, 1.2) == ""  # confident text despite a high no-speech prob
    assert engine.guard(0.1, -0.3, 3.5).startswith("repetitive")
    assert engine.guard(0.1, -0.3, 1.5) == ""


def test_paragraphs_break_at_pauses_and_keep_times() -> None:
    words = _words(" Первая", " фраза.") + _words(" Вторая", " фраза.", start=5.0)
    paras = paragraphs(words, pause=1.5)
    assert [(p.text, p.start) for p in paras] == [("Первая фраза.", 0.0), ("Вторая фраза.", 5.0)]


def test_vtt_cues() -> None:
    vtt = transcript_vtt([SpeechSegment(start=3661.5, end=3663.25, text="Текст")])
    assert vtt == "WEBVTT\n\n01:01:01.500 --> 01:01:03.250\nТекст\n"


def test_a_word_seeming_to_span_the_gap_is_kept_inside_one_segment() -> None:
    from tasks.audio.asr import to_original_span

    time_map = [(0.0, 10.0, 2.0), (2.0 + GAP_SECONDS, 50.0, 1.0)]
    assert to_original_span(1.5, 2.1, time_map) == pytest.approx((11.5, 12.0))
    assert to_original_span(1.9 + GAP_SECONDS, 2.4 + GAP_SECONDS, time_map) == pytest.approx((50.0, 50.4))

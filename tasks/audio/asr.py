"""ASR over VAD windows: window planning, the `AsrEngine` interface and its faster-whisper engine (per-window
transcription with the hallucination guard), joining words.

A window holds whole speech segments only (at most `asr_window_seconds` of speech, silences between them cut
out), so Whisper never hears long silence — where it invents «Понятно. Понятно. Понятно.» — and a word is never
cut at a window edge. Word times are mapped back from the window to the original recording.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
from pydantic import BaseModel, Field

from korpus.core.model_store import whisper_model_path
from korpus.core.settings import Settings
from tasks.audio.decode import SAMPLE_RATE, SpeechSegment
from tasks.runtime.versions import folder_fingerprint, package_version

GAP_SECONDS = 0.5
"""Silence put between two speech segments inside a window, so Whisper hears a pause there."""


class Window(BaseModel):
    index: int
    pieces: list[tuple[float, float]] = Field(description="Original (start, end) of each speech segment inside.")

    @property
    def start(self) -> float:
        return self.pieces[0][0]

    @property
    def end(self) -> float:
        return self.pieces[-1][1]

    @property
    def speech_seconds(self) -> float:
        return sum(e - s for s, e in self.pieces)


class Word(BaseModel):
    text: str = Field(description="As Whisper wrote it, leading space included.")
    start: float
    end: float
    probability: float = 1.0


class WindowResult(BaseModel):
    index: int
    words: list[Word] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list, description="Segments the guard refused, with why.")


def plan_windows(segments: list[tuple[float, float]], max_seconds: float) -> list[Window]:
    """Consecutive speech segments packed into windows of at most `max_seconds` of audio; never split."""
    windows: list[Window] = []
    length = 0.0
    for start, end in segments:
        piece = end - start
        if windows and length + GAP_SECONDS + piece <= max_seconds:
            windows[-1].pieces.append((start, end))
            length += GAP_SECONDS + piece
        else:
            windows.append(Window(index=len(windows), pieces=[(start, end)]))
            length = piece
    return windows


def window_audio(samples: np.ndarray, window: Window) -> tuple[np.ndarray, list[tuple[float, float, float]]]:
    """The window's speech, gaps shortened to GAP_SECONDS, and a map (offset, original start, length)."""
    parts, time_map, offset = [], [], 0.0
    gap = np.zeros(int(GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
    for i, (start, end) in enumerate(window.pieces):
        if i:
            parts.append(gap)
            offset += GAP_SECONDS
        piece = np.asarray(samples[int(start * SAMPLE_RATE) : int(end * SAMPLE_RATE)], dtype=np.float32)
        parts.append(piece)
        time_map.append((offset, start, len(piece) / SAMPLE_RATE))
        offset += len(piece) / SAMPLE_RATE
    return np.concatenate(parts), time_map


def to_original_time(t: float, time_map: list[tuple[float, float, float]]) -> float:
    """A time inside the window audio → seconds in the original recording."""
    for offset, original, length in reversed(time_map):
        if t >= offset:
            return original + min(t - offset, length)
    return time_map[0][1]


def to_original_span(start: float, end: float, time_map: list[tuple[float, float, float]]) -> tuple[float, float]:
    """A word's span → the original recording, kept inside one speech segment.

    Whisper's word times are approximate and a word may seem to run over the short gap between two segments;
    it belongs to the segment holding its midpoint, and is clamped to it.
    """
    middle = (start + end) / 2
    offset, original, length = next((piece for piece in reversed(time_map) if middle >= piece[0]), time_map[0])
    clamp = lambda t: original + min(max(t - offset, 0.0), length)  # noqa: E731
    return clamp(start), clamp(end)


class AsrEngine(Protocol):
    """Speech → timed words for one window of a recording. Configured from the settings in `from_settings`, loads
    its model in `warm_up()`, and names its real version and every option that changes its output in
    `cache_key()` (a window's transcript is cached under it, tasks/audio/speech.py)."""

    name: str

    @classmethod
    def from_settings(cls, settings: Settings) -> AsrEngine: ...

    def cache_key(self) -> str: ...

    def warm_up(self) -> None: ...

    def transcribe(self, samples: np.ndarray, window: Window) -> WindowResult:
        """The window's words with times on the recording's clock, suspect segments dropped (with why)."""
        ...


_lock = threading.Lock()


@lru_cache(maxsize=2)
def _load_whisper(model_path: str, device: str, compute_type: str, threads: int, workers: int):
    """One model per process and configuration, shared by every engine object (Dask runs tasks on threads)."""
    from faster_whisper import WhisperModel

    return WhisperModel(model_path, device=device, compute_type=compute_type, cpu_threads=threads, num_workers=workers)


@dataclass
class WhisperEngine:
    """faster-whisper (CTranslate2). With `workers` > 1, that many windows are transcribed at once: on these
    2-core machines two windows on one thread each finish in half the time of one window on two threads."""

    model_path: Path
    language: str = "ru"
    device: str = "cpu"
    compute_type: str = "int8"
    threads: int = 1
    workers: int = 2
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4
    name: ClassVar[str] = "whisper"

    @classmethod
    def from_settings(cls, settings: Settings) -> WhisperEngine:
        return cls(
            model_path=whisper_model_path(settings),
            language=settings.language,
            device=settings.whisper_device,
            compute_type=settings.whisper_compute_type,
            threads=settings.whisper_threads,
            workers=settings.whisper_workers,
            no_speech_threshold=settings.asr_no_speech_threshold,
            logprob_threshold=settings.asr_logprob_threshold,
            compression_ratio_threshold=settings.asr_compression_ratio_threshold,
        )

    def cache_key(self) -> str:
        return (
            f"{package_version('faster-whisper')}|{package_version('ctranslate2')}|{folder_fingerprint(self.model_path)}|"
            f"{self.compute_type}|{self.language}|{self.no_speech_threshold}|{self.logprob_threshold}|"
            f"{self.compression_ratio_threshold}|gap{GAP_SECONDS}"
        )

    def warm_up(self) -> None:
        self._model()

    def _model(self) -> Any:
        with _lock:
            return _load_whisper(str(self.model_path), self.device, self.compute_type, self.threads, self.workers)

    def guard(self, no_speech_prob: float, avg_logprob: float, compression_ratio: float) -> str:
        """Why a Whisper segment is a likely hallucination, or '' when it is kept."""
        if no_speech_prob > self.no_speech_threshold and avg_logprob < self.logprob_threshold:
            return f"no-speech {no_speech_prob:.2f}"
        if compression_ratio > self.compression_ratio_threshold:
            return f"repetitive {compression_ratio:.1f}"
        return ""

    def transcribe(self, samples: np.ndarray, window: Window) -> WindowResult:
        """Whisper on one window, word timestamps mapped to the recording, suspect segments dropped."""
        audio, time_map = window_audio(samples, window)
        segments, _ = self._model().transcribe(
            audio,
            language=self.language,
            beam_size=5,
            word_timestamps=True,
            condition_on_previous_text=False,
            vad_filter=False,
            no_speech_threshold=self.no_speech_threshold,
            log_prob_threshold=self.logprob_threshold,
            compression_ratio_threshold=self.compression_ratio_threshold,
        )
        result = WindowResult(index=window.index)
        for segment in list(segments):
            reason = self.guard(segment.no_speech_prob, segment.avg_logprob, segment.compression_ratio)
            if reason:
                result.dropped.append(f"{reason}: {segment.text.strip()[:80]}")
                continue
            for word in segment.words or []:
                start, end = to_original_span(word.start, word.end, time_map)
                result.words.append(
                    Word(
                        text=word.word, start=round(start, 2), end=round(end, 2), probability=round(word.probability, 3)
                    )
                )
        return result


def join_words(words: list[Word]) -> list[Word]:
    """Whisper's own rule across window edges: a token starting with a space starts a new word; one that does
    not is glued to the word before it («заключ» + «ение» → «заключение»)."""
    joined: list[Word] = []
    for word in words:
        if joined and word.text and not word.text[0].isspace():
            last = joined[-1]
            joined[-1] = Word(
                text=last.text + word.text,
                start=last.start,
                end=max(last.end, word.end),
                probability=min(last.probability, word.probability),
            )
        else:
            joined.append(word)
    return joined


_NORMALISE = re.compile(r"[^\w]+", re.UNICODE)


def _norm(word: Word) -> str:
    return _NORMALISE.sub("", word.text.lower())


def collapse_repeats(words: list[Word], max_repeats: int, longest_phrase: int = 8) -> tuple[list[Word], int]:
    """A phrase of 1..`longest_phrase` words said more than `max_repeats` times in a row is kept once.

    Returns the words kept and how many repetitions were removed.
    """
    out: list[Word] = []
    removed = 0
    i = 0
    keys = [_norm(w) for w in words]
    while i < len(words):
        collapsed = False
        for n in range(1, longest_phrase + 1):
            phrase = keys[i : i + n]
            if len(phrase) < n or not any(phrase):
                break
            repeats = 1
            while keys[i + repeats * n : i + (repeats + 1) * n] == phrase:
                repeats += 1
            if repeats > max_repeats:
                out.extend(words[i : i + n])
                removed += repeats - 1
                i += repeats * n
                collapsed = True
                break
        if not collapsed:
            out.append(words[i])
            i += 1
    return out, removed


def paragraphs(words: list[Word], pause: float = 1.5, longest: float = 20.0) -> list[SpeechSegment]:
    """Words → paragraphs: a new one after a pause, or after a sentence end once a paragraph runs long."""
    result: list[SpeechSegment] = []
    current: list[Word] = []
    for word in words:
        if current:
            gap = word.start - current[-1].end
            long_enough = current[-1].end - current[0].start >= longest
            sentence_end = current[-1].text.rstrip().endswith((".", "?", "!", "…"))
            if gap >= pause or (long_enough and sentence_end):
                result.append(_paragraph(current))
                current = []
        current.append(word)
    if current:
        result.append(_paragraph(current))
    return result


def _paragraph(words: list[Word]) -> SpeechSegment:
    return SpeechSegment(start=words[0].start, end=words[-1].end, text="".join(w.text for w in words).strip())

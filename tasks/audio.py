"""PARSE for recordings: ffmpeg decodes to 16 kHz mono, faster-whisper transcribes, speech is grouped by time.

The foundation transcribes a file in one pass; VAD segmentation, per-window fan-out, cleaning filters and the
hallucination guard are the audio issue's work. Timecodes are kept from the start: every stretch of speech knows
its start and end second, and the transcript heads each paragraph with `[чч:мм:сс]`.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from korpus.settings import Settings

SAMPLE_RATE = 16_000


class AudioDecodeError(RuntimeError):
    """ffmpeg could not read the file as audio."""


class SpeechSegment(BaseModel):
    start: float
    end: float
    text: str


def timecode(seconds: float) -> str:
    whole = max(0, int(seconds))
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def decode_audio(path: str) -> np.ndarray:
    """Any format ffmpeg reads → 16 kHz mono float32 samples."""
    if shutil.which("ffmpeg") is None:
        raise AudioDecodeError("ffmpeg is not installed: apt-get install ffmpeg")
    command = ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-vn", "-ac", "1", "-ar", str(SAMPLE_RATE)]
    done = subprocess.run(
        [*command, "-f", "f32le", "-"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise AudioDecodeError(f"ffmpeg cannot decode the file: {message[-300:] or 'no audio stream'}")
    samples = np.frombuffer(done.stdout, dtype=np.float32)
    if samples.size == 0:
        raise AudioDecodeError("the file holds no audio samples")
    return samples


_model_lock = threading.Lock()


@lru_cache(maxsize=2)
def _whisper(model_path: str, device: str, compute_type: str, threads: int):
    from faster_whisper import WhisperModel

    return WhisperModel(model_path, device=device, compute_type=compute_type, cpu_threads=threads)


def whisper_engine_key(model_path: Path, settings: Settings) -> str:
    return f"faster-whisper 1.2.1|{model_path.name}|{settings.whisper_compute_type}|{settings.language}"


def transcribe(samples: np.ndarray, model_path: Path, settings: Settings) -> list[SpeechSegment]:
    """Whisper segments with times in seconds from the start of the recording."""
    with _model_lock:  # one load per process even when Dask threads ask at once
        model = _whisper(
            str(model_path), settings.whisper_device, settings.whisper_compute_type, settings.whisper_threads
        )
    segments, _info = model.transcribe(
        samples,
        language=settings.language,
        beam_size=5,
        condition_on_previous_text=False,
        vad_filter=False,
    )
    return [
        SpeechSegment(start=round(s.start, 2), end=round(s.end, 2), text=s.text.strip())
        for s in segments
        if s.text.strip()
    ]


def group_speech(segments: list[SpeechSegment], seconds: float) -> list[list[SpeechSegment]]:
    """Consecutive segments in groups of about `seconds` of recording; a segment is never cut."""
    groups: list[list[SpeechSegment]] = []
    for segment in segments:
        if groups and segment.end - groups[-1][0].start <= seconds:
            groups[-1].append(segment)
        else:
            groups.append([segment])
    return groups


def transcript_text(segments: list[SpeechSegment]) -> str:
    """Paragraphs headed by `[чч:мм:сс]`, one per segment."""
    return "\n".join(f"[{timecode(s.start)}] {s.text}" for s in segments)

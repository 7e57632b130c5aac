"""Speech segments: the `Vad` interface and Silero VAD (the `silero-vad` package), block by block over a
memory-mapped recording.

Importing `silero_vad` sets `torch.set_num_threads(1)` for the whole process (FACTS.md); korpus restores the
previous value so the embedder in the same process keeps its threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Protocol

import numpy as np

from korpus.core.settings import Settings
from tasks.audio.decode import SAMPLE_RATE
from tasks.runtime.versions import package_version

BLOCK_SECONDS = 600
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _silero():
    import torch

    threads = torch.get_num_threads()
    from silero_vad import load_silero_vad

    # ONNX (onnxruntime, installed with faster-whisper) runs the same model ~2x faster than TorchScript here.
    model = load_silero_vad(onnx=True)
    torch.set_num_threads(threads)
    return model


class Vad(Protocol):
    """Speech → (start, end) seconds of each stretch of speech, capped at the ASR window length. Configured from the
    settings, loads its model in `warm_up()`, names its version and options in `cache_key()`."""

    name: str

    @classmethod
    def from_settings(cls, settings: Settings) -> Vad: ...

    def cache_key(self) -> str: ...

    def warm_up(self) -> None: ...

    def segments(self, samples: np.ndarray) -> list[tuple[float, float]]: ...


@dataclass
class SileroVad:
    threshold: float = 0.5
    min_silence_ms: int = 300
    speech_pad_ms: int = 150
    window_seconds: float = 30.0  # the ASR window: a segment is at most a second shorter
    block_seconds: int = BLOCK_SECONDS
    name: ClassVar[str] = "silero"

    @classmethod
    def from_settings(cls, settings: Settings) -> SileroVad:
        return cls(
            threshold=settings.vad_threshold,
            min_silence_ms=settings.vad_min_silence_ms,
            speech_pad_ms=settings.vad_speech_pad_ms,
            window_seconds=settings.asr_window_seconds,
        )

    def cache_key(self) -> str:
        return (
            f"{package_version('silero-vad')}|{self.threshold}|{self.min_silence_ms}|{self.speech_pad_ms}|"
            f"{self.window_seconds}"
        )

    def warm_up(self) -> None:
        with _lock:
            _silero()

    def segments(self, samples: np.ndarray) -> list[tuple[float, float]]:
        """(start, end) seconds of speech. Segments are capped at the ASR window length (Silero splits long speech
        at its best pause), so a window never has to cut inside one."""
        import torch
        from silero_vad import get_speech_timestamps

        block = self.block_seconds * SAMPLE_RATE
        found: list[tuple[float, float]] = []
        edge_slack = (self.min_silence_ms + 2 * self.speech_pad_ms) / 1000
        with _lock:
            model = _silero()
            for offset in range(0, len(samples), block):
                chunk = torch.from_numpy(np.array(samples[offset : offset + block], dtype=np.float32))
                stamps = get_speech_timestamps(
                    chunk,
                    model,
                    threshold=self.threshold,
                    sampling_rate=SAMPLE_RATE,
                    min_silence_duration_ms=self.min_silence_ms,
                    speech_pad_ms=self.speech_pad_ms,
                    max_speech_duration_s=self.window_seconds - 1,
                )
                model.reset_states()
                base = offset / SAMPLE_RATE
                for stamp in stamps:
                    start, end = base + stamp["start"] / SAMPLE_RATE, base + stamp["end"] / SAMPLE_RATE
                    # speech running across a block edge: join the two halves again
                    joins_edge = found and abs(found[-1][1] - base) < edge_slack and start - base < edge_slack
                    if joins_edge and end - found[-1][0] <= self.window_seconds - 1:
                        found[-1] = (found[-1][0], end)
                    else:
                        found.append((start, end))
        return [(round(s, 3), round(e, 3)) for s, e in found]

"""Decode and clean recordings with ffmpeg; time codes; transcript text and WebVTT.

Decoding streams ffmpeg's output (16 kHz mono float32, after the configured filter chain) into a file under the
data directory, in blocks: a three-hour recording never sits in memory at once. Later stages read it through a
memory map.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from korpus.core.datamodel import timecode
from tasks.runtime.processes import kill_group

SAMPLE_RATE = 16_000
_BLOCK = 1 << 20
MIN_SECONDS = 0.1


class AudioDecodeError(RuntimeError):
    """ffmpeg could not read the file as audio (corrupt, truncated, not audio, empty)."""


class SpeechSegment(BaseModel):
    start: float
    end: float
    text: str = ""


def _vtt_time(seconds: float) -> str:
    ms = max(0, round(seconds * 1000))
    return f"{ms // 3_600_000:02d}:{ms % 3_600_000 // 60_000:02d}:{ms % 60_000 // 1000:02d}.{ms % 1000:03d}"


def declared_duration(path: str) -> float | None:
    """Seconds a WAV header promises (its `data` chunk size); None for other containers.

    ffprobe estimates a WAV's duration from the file size, so a cut-off file looks whole to it.
    """
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, byte_rate = 12, 0
    while pos + 8 <= len(head):
        kind, size = head[pos : pos + 4], struct.unpack_from("<I", head, pos + 4)[0]
        if kind == b"fmt " and pos + 20 <= len(head):
            byte_rate = struct.unpack_from("<I", head, pos + 16)[0]
        if kind == b"data":
            return size / byte_rate if byte_rate else None
        pos += 8 + size + (size & 1)
    return None


_DAMAGE = ("invalid data", "truncat", "corrupt", "error while decoding")


def decode_to_file(path: str, out: Path, filters: str = "") -> float:
    """Any format ffmpeg reads → `out` as raw 16 kHz mono float32; returns the duration in seconds.

    Refused: no audio stream, under 0.1 s of samples, or a file that ends well before its header says (truncated).
    """
    if shutil.which("ffmpeg") is None:
        raise AudioDecodeError("ffmpeg is not installed: apt-get install ffmpeg")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.part")
    command = ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-vn", "-ac", "1", "-ar", str(SAMPLE_RATE)]
    if filters:
        command += ["-af", filters]
    written = 0
    # its own process group, killed on the way out whatever happened (tasks/runtime/processes.py); stderr goes to a
    # file, so a decoder that writes many errors can never block on a full pipe while stdout is read
    with (
        tempfile.TemporaryFile() as said,
        subprocess.Popen([*command, "-f", "f32le", "-"], stdout=subprocess.PIPE, stderr=said, process_group=0) as proc,
    ):
        assert proc.stdout is not None
        try:
            with open(tmp, "wb") as sink:
                while block := proc.stdout.read(_BLOCK):
                    sink.write(block)
                    written += len(block)
            proc.wait()
        finally:
            kill_group(proc.pid)
        said.seek(0)
        errors = said.read().decode("utf-8", "replace").strip()
    seconds = written / 4 / SAMPLE_RATE
    declared = declared_duration(path)
    problem = ""
    if proc.returncode != 0:
        problem = f"ffmpeg cannot decode the file: {errors[-300:] or 'no audio stream'}"
    elif seconds < MIN_SECONDS:
        problem = f"no audio samples ({seconds:.3f} s decodable)"
    elif declared and seconds < declared * 0.98 - 0.5:
        problem = f"truncated: the header promises {declared:.1f} s, only {seconds:.1f} s decode"
    elif any(marker in errors.lower() for marker in _DAMAGE):
        problem = f"damaged stream: {errors[-300:]}"
    if problem:
        tmp.unlink(missing_ok=True)
        raise AudioDecodeError(problem)
    tmp.replace(out)
    return seconds


def open_samples(path: Path) -> np.ndarray:
    """The decoded file as a read-only memory map of float32 samples."""
    return np.memmap(path, dtype=np.float32, mode="r")


def transcript_text(segments: list[SpeechSegment]) -> str:
    """Paragraphs headed by `[чч:мм:сс]`, one per segment."""
    return "\n".join(f"[{timecode(s.start)}] {s.text}" for s in segments)


def transcript_vtt(segments: list[SpeechSegment]) -> str:
    cues = [f"{_vtt_time(s.start)} --> {_vtt_time(s.end)}\n{s.text}" for s in segments]
    return "WEBVTT\n\n" + "\n\n".join(cues) + ("\n" if cues else "")


def group_speech(segments: list[SpeechSegment], seconds: float) -> list[list[SpeechSegment]]:
    """Consecutive segments in groups of about `seconds` of recording; a segment is never cut."""
    groups: list[list[SpeechSegment]] = []
    for segment in segments:
        if groups and segment.end - groups[-1][0].start <= seconds:
            groups[-1].append(segment)
        else:
            groups.append([segment])
    return groups

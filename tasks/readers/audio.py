"""Recordings: their suffixes only. The work — ffmpeg clean-up, VAD, Whisper windows fanned out, the transcript —
is tasks/audio/speech.py, which the flow drives window by window."""

from __future__ import annotations

from typing import Any

from korpus.core.datamodel import PageResult, Source, SourceKind
from korpus.core.settings import Settings
from tasks.ocr.engine import PageImageSource
from tasks.readers.base import ParseOutcome, UnreadableSourceError


class AudioReader:
    kind = SourceKind.audio
    suffixes = (".wav", ".mp3", ".m4a", ".ogg", ".opus", ".flac", ".aac", ".wma", ".mp4", ".mkv", ".webm")

    def read(self, source: Source, settings: Settings) -> ParseOutcome:
        raise UnreadableSourceError("recordings are read by tasks/audio/speech.py, window by window")

    def page_image(self, source: Source, page: int, settings: Settings) -> PageImageSource:
        raise UnreadableSourceError("a recording has no page images")

    def searchable_copy(self, source: Source, pages: list[PageResult], settings: Settings) -> dict[str, Any] | None:
        return None

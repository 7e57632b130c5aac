"""PARSE for recordings, in three stages the flow fans out:

1. `prepare_recording` — ffmpeg clean-up to a decoded file, Silero VAD, windows (VAD result cached);
2. `transcribe_windows` — Whisper on a batch of windows, each window cached under (sha256, window, model,
   settings), so a crash or a re-run never transcribes a finished window again;
3. `assemble_recording` — words joined across window edges, repetitions collapsed, paragraphs with
   `[чч:мм:сс]`, transcript `.txt` and `.vtt` under `<data>/transcripts/`, ~1-minute stretches for chunking.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from korpus.core.datamodel import PageResult, QuarantineItem, ReasonCode, Source
from korpus.core.model_store import ModelMissingError, whisper_model_path
from korpus.core.settings import Settings
from tasks.audio.asr import (
    AsrEngine,
    WhisperEngine,
    Window,
    WindowResult,
    collapse_repeats,
    join_words,
    paragraphs,
    plan_windows,
)
from tasks.audio.decode import (
    AudioDecodeError,
    SpeechSegment,
    decode_to_file,
    group_speech,
    open_samples,
    transcript_text,
    transcript_vtt,
)
from tasks.audio.vad import SileroVad, Vad
from tasks.readers.base import failure
from tasks.runtime.page_cache import PageCache
from tasks.runtime.versions import ffmpeg_version
from tasks.text.structure import transcript_structure


class _VadResult(BaseModel):
    duration: float
    speech: list[tuple[float, float]]


class RecordingPlan(BaseModel):
    source_id: str
    version: str
    duration: float = 0.0
    windows: list[Window] = Field(default_factory=list)
    pending: list[int] = Field(default_factory=list, description="Windows not in the cache yet.")
    decoded: str | None = None
    problem: QuarantineItem | None = None

    @property
    def speech_seconds(self) -> float:
        return sum(w.speech_seconds for w in self.windows)


class RecordingOutcome(BaseModel):
    pages: list[PageResult] = Field(default_factory=list)
    problems: list[QuarantineItem] = Field(default_factory=list)
    audio_seconds: float = 0.0
    speech_seconds: float = 0.0
    segments_dropped: int = 0
    repeats_collapsed: int = 0
    transcript: str | None = None


def _decoded_path(settings: Settings, version: str) -> Path:
    return settings.data / "cache" / "audio" / f"{version}.f32"


def speech_engines(settings: Settings) -> tuple[Vad, AsrEngine]:
    """The configured VAD and ASR engines (Silero, faster-whisper)."""
    return SileroVad.from_settings(settings), WhisperEngine.from_settings(settings)


def _vad_key(settings: Settings, vad: Vad | None = None) -> str:
    """The cached VAD result depends on the decoding too: ffmpeg's version and the filters."""
    vad = vad or SileroVad.from_settings(settings)
    return f"{ffmpeg_version()}|{settings.audio_filters}|{vad.cache_key()}"


def _window_unit(window: Window) -> str:
    return f"w{window.index:05d}-{window.start:.2f}-{window.end:.2f}"


def _problem(source: Source, reason: ReasonCode, detail: str) -> QuarantineItem:
    return QuarantineItem(source_id=source.source_id, source_version=source.version, reasons=[reason], detail=detail)


def prepare_recording(source: Source, settings: Settings) -> RecordingPlan:
    """Decode (only if something is not cached), find speech, plan windows, list the windows still to do."""
    plan = RecordingPlan(source_id=source.source_id, version=source.version)
    cache = PageCache(settings.page_cache_location)
    decoded = _decoded_path(settings, source.version)
    try:
        detector, engine = speech_engines(settings)
        vad_key = _vad_key(settings, detector)
        vad = cache.get(_VadResult, source.version, "vad", detector.name, vad_key)
        if vad is None:
            duration = decode_to_file(source.path, decoded, settings.audio_filters)
            vad = _VadResult(duration=duration, speech=detector.segments(open_samples(decoded)))
            cache.put(vad, source.version, "vad", detector.name, vad_key)
        plan.duration = vad.duration
        plan.windows = plan_windows(vad.speech, settings.asr_window_seconds)
        key = engine.cache_key()
        plan.pending = [
            w.index
            for w in plan.windows
            if cache.get(WindowResult, source.version, _window_unit(w), engine.name, key) is None
        ]
        if plan.pending and not decoded.is_file():
            decode_to_file(source.path, decoded, settings.audio_filters)
    except AudioDecodeError as exc:
        plan.problem = _problem(source, ReasonCode.unreadable_file, str(exc))
        return plan
    except ModelMissingError:
        raise  # not this recording's fault: every recording would fail the same way — the refresh says so
    except Exception as exc:  # containment: the VAD or a decoder failing on this recording is this recording's item
        plan.problem = _problem(source, ReasonCode.asr_failed, f"speech detection failed: {failure(exc)}")
        return plan
    plan.decoded = str(decoded) if plan.pending else None
    return plan


def transcribe_windows(plan: RecordingPlan, indices: list[int], settings: Settings) -> list[tuple[WindowResult, bool]]:
    """Whisper on the given windows, through the cache. Each result says whether the engine ran."""
    cache = PageCache(settings.page_cache_location)
    engine = WhisperEngine.from_settings(settings)
    key = engine.cache_key()
    samples = open_samples(Path(plan.decoded)) if plan.decoded else None
    results = []
    for index in indices:
        window = plan.windows[index]
        unit = _window_unit(window)
        cached = cache.get(WindowResult, plan.version, unit, engine.name, key)
        if cached is not None:
            results.append((cached, False))
            continue
        if samples is None:
            raise RuntimeError(f"{plan.source_id}: window {index} is not cached and no decoded audio is at hand")
        result = engine.transcribe(samples, window)
        cache.put(result, plan.version, unit, engine.name, key)
        results.append((result, True))
    return results


def assemble_recording(
    source: Source, plan: RecordingPlan, results: list[WindowResult], settings: Settings
) -> RecordingOutcome:
    """Join, guard, write the transcript, cut ~1-minute stretches; the decoded audio is removed afterwards."""
    outcome = RecordingOutcome(audio_seconds=plan.duration, speech_seconds=round(plan.speech_seconds, 2))
    ordered = sorted(results, key=lambda r: r.index)
    words = join_words([w for r in ordered for w in r.words])
    words, outcome.repeats_collapsed = collapse_repeats(words, settings.asr_max_repeats)
    outcome.segments_dropped = sum(len(r.dropped) for r in ordered)
    paras = paragraphs(words)
    outcome.transcript = str(write_transcript(source, paras, settings.transcripts_dir))
    if not paras:
        detail = f"no speech recognised in {plan.duration:.0f} s ({plan.speech_seconds:.0f} s flagged by VAD)"
        outcome.problems.append(_problem(source, ReasonCode.no_speech, detail))
    for group in group_speech(paras, settings.speech_chunk_seconds):
        outcome.pages.append(
            PageResult(
                source_id=source.source_id,
                source_version=source.version,
                t_start=group[0].start,
                t_end=group[-1].end,
                text=(text := transcript_text(group)),
                method="whisper",
                engine=whisper_model_path(settings).name,
                units=transcript_structure(text),
            )
        )
    _decoded_path(settings, source.version).unlink(missing_ok=True)
    return outcome


def write_transcript(source: Source, paras: list[SpeechSegment], out_root: Path) -> Path:
    """`<data>/transcripts/<source path>.txt` and `.vtt` — never beside the source."""
    path = out_root / f"{source.source_id}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# {source.source_id} (sha256 {source.version[:12]}…)\n"
    path.write_text(header + transcript_text(paras) + "\n", encoding="utf-8")
    path.with_suffix(".vtt").write_text(transcript_vtt(paras), encoding="utf-8")
    return path

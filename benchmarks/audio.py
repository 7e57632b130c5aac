"""Speech path: korpus (clean-up, VAD, windows, Whisper per window) vs faster-whisper over the whole file.

    .venv/bin/python benchmarks/audio.py [--source ../shared/data/audio/ru.wav] [--hour] [--json]

From a plain clone without ../shared, the source is a 70-second Russian recording espeak-ng speaks here (a synthetic
voice: the word figures are not comparable with a person's recording; the timing ratios are).

1. A recording that is more than half silence (the source speech cut into pieces with low noise between):
   wall time of korpus's speech stages vs `WhisperModel.transcribe` on the whole file without VAD, same model,
   threads, beam and word timestamps, run side by side in this process. Target: ratio ≤ 0.6.
2. Real-time factor of korpus on that recording.
3. With --hour: peak memory (max RSS of a fresh child process) of korpus's speech stages over a one-hour file,
   against a child that only decodes the same file whole the way faster-whisper does. Target: ≤ 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from korpus.core.datamodel import Source, SourceKind
from korpus.core.model_store import ensure_models, whisper_model_path
from korpus.core.settings import Settings
from tasks.audio.asr import _load_whisper
from tasks.audio.speech import assemble_recording, prepare_recording, transcribe_windows
from tasks.receive import file_sha256

RATE = 16_000
DEFAULT_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "audio" / "ru.wav"


def silent_recording(source: Path, out: Path, repeats: int = 1, piece: float = 8.0, gap: float = 11.0) -> float:
    """Speech pieces of `piece` s separated by `gap` s of low pink-ish noise; returns the silence share."""
    speech, rate = soundfile.read(source, dtype="float32")
    if speech.ndim > 1:
        speech = speech.mean(axis=1)
    assert rate == RATE, "the benchmark source must be 16 kHz"
    rng = np.random.default_rng(0)
    parts, silent = [], 0
    for _ in range(repeats):
        for start in range(0, len(speech), int(piece * RATE)):
            parts.append(speech[start : start + int(piece * RATE)])
            noise = (rng.standard_normal(int(gap * RATE)) * 0.003).astype(np.float32)
            parts.append(noise)
            silent += len(noise)
    audio = np.concatenate(parts)
    soundfile.write(out, audio, RATE, subtype="PCM_16")
    return silent / len(audio)


def korpus_speech(path: Path, settings: Settings) -> dict:
    """korpus's speech stages, windows fanned out on a Dask LocalCluster of threads as corpus_refresh does."""
    from distributed import Client, LocalCluster

    source = Source(
        source_id=path.name,
        version=file_sha256(path),
        path=str(path),
        kind=SourceKind.audio,
        owner="b",
        access="public",
    )
    plan = prepare_recording(source, settings)
    batches = [[i] for i in range(len(plan.windows))]
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=settings.dask_threads_per_worker, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        futures = client.map(lambda batch: transcribe_windows(plan, batch, settings), batches, pure=False)
        results = [r for batch in client.gather(futures) for r, _ in batch]
    outcome = assemble_recording(source, plan, results, settings)
    return {
        "duration": plan.duration,
        "windows": len(plan.windows),
        "speech_s": outcome.speech_seconds,
        "words": sum(len(r.words) for r in results),
    }


def whole_file(path: Path, settings: Settings) -> int:
    """The baseline: one faster-whisper pass over the whole file, no VAD, both cores on the one stream."""
    model = _load_whisper(
        str(whisper_model_path(settings)), settings.whisper_device, settings.whisper_compute_type, 2, 1
    )
    segments, _ = model.transcribe(
        str(path),
        language=settings.language,
        beam_size=5,
        word_timestamps=True,
        condition_on_previous_text=False,
        vad_filter=False,
    )
    return sum(len(s.words or []) for s in segments)


def _child_peak_mb(code: str) -> float:
    """Run `code` in a fresh interpreter; it reports its own peak RSS (VmHWM) on its last line.

    Not ru_maxrss: Linux carries it over from the forking parent (this process, models loaded) through exec."""
    code += "; print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=dict(os.environ)
    )
    return int(done.stdout.strip().splitlines()[-1]) / 1024


SPOKEN = (
    "Совещание по ремонту склада открыл директор. Подрядчик доложил, что кровля будет заменена до конца месяца, "
    "а ворота отремонтированы к началу отопительного сезона. Бухгалтерия подтвердила оплату первого этапа работ. "
    "Решили поручить отделу снабжения закупить утеплитель и проверить огнетушители на всех этажах. "
)


def spoken_recording(out: Path, repeats: int = 4) -> Path:
    """A Russian recording made here when ../shared is not beside the clone: espeak-ng reads SPOKEN `repeats` times,
    ffmpeg makes it 16 kHz mono (a synthetic voice: Whisper hears it worse than a person, docs/audio.md)."""
    raw = out.with_suffix(".espeak.wav")
    subprocess.run(["espeak-ng", "-v", "ru", "-w", str(raw), SPOKEN * repeats], check=True, capture_output=True)
    subprocess.run(
        ["ffmpeg", "-y", "-loglevel", "error", "-i", str(raw), "-ac", "1", "-ar", str(RATE), str(out)],
        check=True,
        capture_output=True,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=DEFAULT_SOURCE if DEFAULT_SOURCE.is_file() else None,
        help="a 16 kHz recording (default ../shared/data/audio/ru.wav, else one espeak-ng speaks)",
    )
    parser.add_argument("--hour", action="store_true", help="also measure peak memory on a one-hour file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ensure_models(Settings())
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="korpus-audio-bench-") as tmp:
        args.source = args.source or spoken_recording(Path(tmp) / "spoken.wav")
        report["source"] = str(args.source)
        recording = Path(tmp) / "silent.wav"
        report["silence_share"] = round(silent_recording(args.source, recording), 3)
        settings = Settings(data=Path(tmp) / "data")
        whole_file(recording, settings)  # load both models once, outside the timings
        korpus_speech(recording, Settings(data=Path(tmp) / "warm-up"))
        started = time.perf_counter()
        whole_words = whole_file(recording, settings)
        t_whole = time.perf_counter() - started
        started = time.perf_counter()
        stats = korpus_speech(recording, settings)
        t_korpus = time.perf_counter() - started
        report.update(
            audio_s=round(stats["duration"], 1),
            whole_file_s=round(t_whole, 2),
            korpus_s=round(t_korpus, 2),
            korpus_over_whole=round(t_korpus / t_whole, 3),
            korpus_rtf=round(t_korpus / stats["duration"], 3),
            whole_file_rtf=round(t_whole / stats["duration"], 3),
            words_korpus=stats["words"],
            words_whole_file=whole_words,
            windows=stats["windows"],
        )
        if args.hour:
            hour = Path(tmp) / "hour.wav"
            silent_recording(args.source, hour, repeats=max(1, round(3600 / report["audio_s"])))
            root = Path(__file__).resolve().parents[1]
            code_korpus = (
                f"import sys; sys.path.insert(0, {str(root)!r}); from pathlib import Path; "
                "from korpus.core.settings import Settings; from benchmarks.audio import korpus_speech; "
                f"print(korpus_speech(Path({str(hour)!r}), Settings(data=Path({tmp!r}) / 'hour-data')))"
            )
            code_whole = (
                f"from faster_whisper.audio import decode_audio; a = decode_audio({str(hour)!r}); print(len(a) / 16000)"
            )
            started = time.perf_counter()
            report["hour_korpus_peak_mb"] = round(_child_peak_mb(code_korpus))
            report["hour_korpus_s"] = round(time.perf_counter() - started, 1)
            report["hour_whole_decode_peak_mb"] = round(_child_peak_mb(code_whole))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key:>26}: {value}")


if __name__ == "__main__":
    main()

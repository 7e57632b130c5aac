"""Cache keys name the engines' installed versions, so an upgrade never serves what the older engine produced."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

import tasks.runtime.versions
from korpus.core.settings import Settings
from tasks.audio.asr import WhisperEngine
from tasks.audio.speech import _vad_key

pytestmark = pytest.mark.unit


def test_keys_carry_the_installed_versions(tmp_path: Path) -> None:
    model = tmp_path / "whisper-x"
    model.mkdir()
    (model / "model.bin").write_bytes(b"0" * 10)
    settings = Settings(data=tmp_path)
    key = WhisperEngine(model_path=model, compute_type=settings.whisper_compute_type).cache_key()
    assert f"faster-whisper {version('faster-whisper')}" in key and f"ctranslate2 {version('ctranslate2')}" in key
    assert f"silero-vad {version('silero-vad')}" in _vad_key(settings) and "ffmpeg" in _vad_key(settings)


def test_an_upgrade_or_a_rebuilt_model_changes_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "whisper-x"
    model.mkdir()
    (model / "model.bin").write_bytes(b"0" * 10)
    settings = Settings(data=tmp_path)
    before = WhisperEngine(model_path=model, compute_type=settings.whisper_compute_type).cache_key()
    tasks.runtime.versions.folder_fingerprint.cache_clear()
    (model / "model.bin").write_bytes(b"0" * 11)  # the same name, other weights
    rebuilt = WhisperEngine(model_path=model, compute_type=settings.whisper_compute_type).cache_key()
    assert rebuilt != before
    monkeypatch.setattr(tasks.runtime.versions, "version", lambda name: "99.0")
    tasks.runtime.versions.package_version.cache_clear()
    try:
        assert WhisperEngine(model_path=model, compute_type=settings.whisper_compute_type).cache_key() not in (
            before,
            rebuilt,
        )
    finally:
        tasks.runtime.versions.package_version.cache_clear()

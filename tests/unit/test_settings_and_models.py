from pathlib import Path

import numpy as np
import pytest

from korpus.core.model_build import _dequantise_q4
from korpus.core.model_store import ModelMissingError, embed_model_path, whisper_model_path
from korpus.core.settings import Settings

pytestmark = pytest.mark.unit


def test_env_overrides_yaml_and_manifest_keys_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "korpus.yaml"
    config.write_text("ocr_dpi: 200\nrrf_k: 10\ndefaults:\n  access: public\n", encoding="utf-8")
    monkeypatch.setenv("KORPUS_CONFIG", str(config))
    monkeypatch.setenv("KORPUS_RRF_K", "30")
    monkeypatch.setenv("KORPUS_DEFAULT_SCOPES", "public, hr")
    settings = Settings()
    assert settings.ocr_dpi == 200
    assert settings.rrf_k == 30
    assert settings.default_scopes == ["public", "hr"]


def test_missing_models_name_themselves(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    with pytest.raises(ModelMissingError, match=r"multilingual-e5-small.*korpus models"):
        embed_model_path(settings)
    with pytest.raises(ModelMissingError, match=r"Whisper model.*KORPUS_WHISPER_MODEL"):
        whisper_model_path(settings)
    with pytest.raises(ModelMissingError, match=r"KORPUS_EMBED_MODEL=.*bge-m3"):
        embed_model_path(Settings(home=tmp_path, embed_model=tmp_path / "nowhere"))


def test_q4_block_dequantisation() -> None:
    # One block: scale 0.5, low nibbles 0..15 → values 0..15, high nibbles 15..0 → values 16..31.
    nibbles = bytes(((15 - i) << 4) | i for i in range(16))
    raw = np.float16(0.5).tobytes() + nibbles
    values = _dequantise_q4(memoryview(raw), 32)
    assert values[:16].tolist() == [(i - 8) * 0.5 for i in range(16)]
    assert values[16:].tolist() == [(15 - i - 8) * 0.5 for i in range(16)]


def test_run_refresh_passes_explicit_settings_to_the_flow(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import flows.corpus_refresh as module

    seen: dict = {}
    monkeypatch.setattr(module, "corpus_refresh", lambda **kwargs: seen.update(kwargs) or {})
    module.run_refresh(tmp_path, Settings(data=tmp_path / "d", chunk_policy="structure-v1", api_keys={"k": ["hr"]}))
    assert seen["data"] == str(tmp_path / "d")
    assert seen["overrides"] == {"chunk_policy": "structure-v1"}  # explicit fields travel; API keys never do
    module.run_refresh(tmp_path, Settings(data=tmp_path / "d"))
    assert seen["overrides"] is None

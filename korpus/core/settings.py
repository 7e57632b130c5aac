"""One settings object for the whole pipeline: `KORPUS_*` environment variables over `korpus.yaml`.

Precedence, highest first: arguments given in code, `KORPUS_*` environment variables, the settings file
(`KORPUS_CONFIG`, else `./korpus.yaml` when present), defaults. A `korpus.yaml` may also be a corpus manifest
(`defaults:`/`rules:`): those keys are the manifest's and are ignored here.

It runs over 400 lines because every setting is one declared field with its description (its validation and
documentation in one place), and splitting them would scatter one table.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

MANIFEST_KEYS = {"defaults", "rules"}


def _default_home() -> Path:
    return Path(os.path.expanduser("~")) / ".cache" / "korpus"


def parse_scopes(value: str) -> list[str]:
    """`"public, hr"` → `["public", "hr"]`."""
    return [s.strip() for s in value.split(",") if s.strip()]


class Reviewer(BaseModel):
    """A reviewer key's holder: the name written into the audit trail, and the scopes whose items they may see."""

    name: str = Field(min_length=1, max_length=200)
    scopes: list[str] = Field(min_length=1)


class YamlSettingsSource(PydanticBaseSettingsSource):
    """Reads settings from `KORPUS_CONFIG` or `./korpus.yaml`; manifest keys are skipped."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        path = Path(os.environ.get("KORPUS_CONFIG", "korpus.yaml"))
        data: dict[str, Any] = {}
        if path.is_file():
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if not isinstance(loaded, dict):
                raise ValueError(f"{path}: expected a mapping of settings, got {type(loaded).__name__}")
            data = {k: v for k, v in loaded.items() if k not in MANIFEST_KEYS}
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._data.items() if k in self.settings_cls.model_fields}


class Settings(BaseSettings):
    """Every knob of korpus. Each field maps to `KORPUS_<NAME>` and to a `korpus.yaml` key."""

    model_config = SettingsConfigDict(env_prefix="KORPUS_", extra="ignore")

    home: Path = Field(default_factory=_default_home, description="Model cache (built offline models).")
    data: Path = Field(default=Path("korpus-data"), description="Catalog, index, caches, transcripts.")
    embed_model: Path | None = Field(
        default=None,
        description="Any sentence-transformers model folder, or an ONNX one `korpus models` exported; default: "
        "e5-small-onnx under home/models.",
    )
    embed_threads: int = Field(
        default=0,
        ge=0,
        description="Cores one ONNX embedding run uses. 0: in a refresh, the process's cores divided by the Dask "
        "worker's threads (embedding tasks run side by side); elsewhere (search, serve, reindex) every core.",
    )
    index_group_sources: int = Field(
        default=128,
        ge=1,
        description="Documents are chunked, gated, embedded and published together in groups of up to this many (or "
        "128 pages): one task and one embedding pass across them. The first groups of a refresh are smaller (8, 16, "
        "32, …), so the first documents are searchable early. 1: each document alone.",
    )
    first_documents: int = Field(
        default=8,
        ge=0,
        description="A refresh's first small text files (≤ 256 KiB, read by Python alone) read, embedded and "
        "published in the flow's own process before any work goes to Dask — also on a cluster of your own "
        "(KORPUS_DASK_ADDRESS), where the flow's machine then loads the embedding model — so the first documents are "
        "searchable seconds into the run. 0: every document goes to the cluster.",
    )
    whisper_model: Path | None = Field(
        default=None, description="A CTranslate2 Whisper folder; default: Whisper base under home/models."
    )
    whisper_device: str = Field(default="cpu", description="cpu | cuda | auto")
    whisper_compute_type: str = Field(default="int8")
    whisper_threads: int = Field(default=1, ge=0, description="CTranslate2 threads per transcription.")
    whisper_workers: int = Field(
        default=2, ge=1, description="Transcriptions one process runs at once (match the Dask threads)."
    )
    language: str = Field(default="ru", description="Corpus language (Whisper language code).")
    ocr_language: str = Field(
        default="rus+eng",
        description="Tesseract language(s): rus+eng keeps Latin names, commands and codes as printed.",
    )
    ocr_dpi: int = Field(default=300, ge=72, le=600)
    ocr_orientation: bool = Field(
        default=True,
        description="A page Tesseract reads with low confidence is checked for 90/180/270° rotation (OSD) and "
        "read again upright.",
    )
    ocr_tiers: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["tesseract", "vlm"],
        description="The OCR cascade, in order (tasks/ocr: tesseract, vlm); vlm only runs when KORPUS_VLM_URL is set.",
    )
    pdfa: Literal["2b", "2u", "3b", "3u", "off"] = Field(
        default="2b",
        description="The searchable copies korpus writes are PDF/A of this flavour (ISO 19005: 2b as OCRmyPDF "
        "writes; 2u also demands a Unicode map for every glyph; 3b, 3u allow attachments) — or of a PDF/A "
        "source's own level when that is higher; off: plain PDF.",
    )
    pdf_optimize: int = Field(
        default=1,
        ge=0,
        le=3,
        description="How the searchable copies' page images are stored, as OCRmyPDF's --optimize: 0 as read (a "
        "photo's own JPEG bytes, other images' pixels losslessly); 1 the same, each JPEG also deflated where that "
        "saves 1 % (lossless); 2 and 3 a page image korpus writes re-encoded as JPEG of quality 75 or 50 where that "
        "is smaller — below the source's quality, so only when asked. A PDF's own page images are never re-encoded.",
    )
    layer_agreement: float = Field(
        default=0.75,
        ge=0,
        le=1,
        description="A flagged text layer is kept when it and the page's OCR agree this closely (word F1).",
    )
    office_timeout: float = Field(default=180.0, gt=0, description="Seconds LibreOffice may take to convert a file.")
    text_layer_min_chars: int = Field(default=20, description="Below this a page's text layer counts as absent.")
    text_layer_min_cyrillic: float = Field(
        default=0.5, ge=0, le=1, description="Below this Cyrillic share a layer is suspect and checked against OCR."
    )
    text_layer_max_mixed_script: float = Field(default=0.1, description="Words mixing Cyrillic and Latin.")
    text_layer_max_glyph_codes: float = Field(
        default=0.05, description="Words with glyph codes inside («M]heh\\guc»): a font without a Unicode map."
    )
    text_layer_max_case_flips: float = Field(default=0.15, description="Words flipping case inside («npoTOKon»).")
    text_layer_max_mojibake: float = Field(default=0.1, description="Letters of mojibake («Ð¡Ð¾», «РЎРѕ»).")
    text_layer_max_foreign_script: float = Field(default=0.05, description="Letters of other scripts (CJK, …).")
    text_layer_max_repeated_lines: float = Field(default=0.3, description="Lines that occur 3+ times.")
    text_layer_max_empty_table: float = Field(default=0.3, description="Lines that are empty table rows.")
    text_layer_max_one_letter: float = Field(default=0.35, description="One-letter tokens among tokens.")
    text_layer_max_punctuation: float = Field(default=0.3, description="Punctuation among visible characters.")
    text_layer_image_coverage: float = Field(default=0.5, description="A page this covered by images is a scan…")
    text_layer_min_chars_on_image: int = Field(default=200, description="…and needs this much text to be trusted.")
    vlm_url: str | None = Field(default=None, description="OpenAI-compatible endpoint of the VLM OCR tier (2).")
    vlm_model: str = Field(default="deepseek-ocr", description="Model name sent to the VLM endpoint.")
    vlm_prompt: str = Field(
        default="Распознай весь текст на изображении страницы. Выведи только текст, построчно, без комментариев.",
        description="Instruction sent with each page image.",
    )
    vlm_timeout: float = Field(default=120.0, gt=0)
    vlm_dpi: int = Field(default=200, ge=72, le=400, description="Page image resolution sent to the VLM.")
    reader_isolation: bool = Field(
        default=True,
        description="Read PDFs, images, DjVu, office files, spreadsheets, archives and mail in a child process with "
        "a memory and a time limit: a reader's crash is that file's `reader-crashed` item "
        "(tasks/runtime/reader_child.py).",
    )
    reader_memory_mb: int = Field(default=4096, ge=256, description="The reading child's address-space limit, MB.")
    reader_seconds: float = Field(default=600.0, gt=0, description="The longest a reader may take on one file.")
    reader_files_per_child: int = Field(
        default=200,
        ge=1,
        description="Files a reading child reads with native code (text files and web pages do not count) before a new "
        "child takes over.",
    )
    retry_attempts: int = Field(
        default=4, ge=1, description="Calls made to an engine or service before a transient fault counts as failed."
    )
    retry_backoff: float = Field(default=0.5, ge=0, description="Seconds before the first retry; doubled each time.")
    retry_max_delay: float = Field(default=10.0, ge=0, description="The longest wait between two retries.")
    pending_max_refreshes: int = Field(
        default=3,
        ge=1,
        description="A page a transient fault keeps from being read is retried by this many refreshes, then "
        "quarantined ocr-failed.",
    )
    quarantine_whole_document: bool = Field(
        default=False, description="A page that fails every tier quarantines its whole document."
    )
    speech_chunk_seconds: float = Field(default=60.0, gt=0, description="Speech per stretch of transcript.")
    chunk_policy: str = Field(
        default="structure-v2", description="structure-v2 | structure-v1 | page-v1 (docs/chunking.md)."
    )
    splitter_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint of an LLM boundary splitter (optional)."
    )
    splitter_model: str = Field(default="splitter", description="Model name sent to the splitter endpoint.")
    splitter_timeout: float = Field(default=20.0, gt=0, description="Seconds before the splitter counts as down.")
    audio_filters: str = Field(
        default="highpass=f=80,afftdn=nf=-25,dynaudnorm=f=500:g=31:m=5",
        description="ffmpeg -af chain before VAD and ASR: hum high-pass, FFT denoise, level normalisation.",
    )
    vad_threshold: float = Field(default=0.5, gt=0, lt=1, description="Silero speech probability threshold.")
    vad_min_silence_ms: int = Field(default=300, ge=0, description="Silence that separates two speech segments.")
    vad_speech_pad_ms: int = Field(default=150, ge=0, description="Padding kept around each speech segment.")
    asr_window_seconds: float = Field(default=30.0, gt=1, le=30, description="Most speech per Whisper window.")
    asr_windows_per_task: int = Field(default=1, ge=1, description="Windows batched into one Dask task.")
    asr_no_speech_threshold: float = Field(default=0.6, description="Drop a segment above this no-speech prob…")
    asr_logprob_threshold: float = Field(default=-1.0, description="…when its average log-probability is below.")
    asr_compression_ratio_threshold: float = Field(default=2.4, description="Drop segments more repetitive.")
    asr_max_repeats: int = Field(default=2, ge=1, description="A phrase repeated more times in a row is collapsed.")
    dask_address: str | None = Field(default=None, description="An existing Dask scheduler, tcp://host:8786.")
    dask_workers: int = Field(default=1, ge=1, description="LocalCluster workers (threads share one process).")
    dask_threads_per_worker: int = Field(default=2, ge=1)
    dask_embed_resources: str | None = Field(
        default=None,
        description="Dask resources the embedding tasks ask for (`GPU=1`): only workers started with "
        "`--resources GPU=1` take them. Unset: any worker (a LocalCluster has no resources).",
    )
    default_scopes: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["public"], description="Scopes a search sees unless given others (a,b,c)."
    )
    api_keys: dict[str, list[str]] = Field(
        default_factory=dict,
        description='API key → scopes for `korpus serve`, as JSON: {"key": ["public", "hr"]}. Empty: anonymous.',
    )
    review_keys: dict[str, Reviewer] = Field(
        default_factory=dict,
        description="Reviewer key → who and which scopes, for the /review page of `korpus serve`, as JSON: "
        '{"key": {"name": "Иванова", "scopes": ["public", "hr"]}}. Separate from api_keys; empty: no /review.',
    )
    session_hours: float = Field(
        default=8.0, gt=0, description="How long a viewer or review login lasts (korpus/apps/sessions.py)."
    )
    review_url: str | None = Field(
        default=None,
        description="The address reviewers open /review at (http://host:8765/review): linked from the refresh "
        "summary artifact and the korpus.refresh.completed event.",
    )
    page_cache_url: str | None = Field(
        default=None,
        description="Any fsspec URL for the OCR/ASR page cache (s3://…, file://…); unset: <data>/cache/pages.",
    )
    backend: Literal["sqlite", "opensearch"] = Field(
        default="sqlite",
        description="Where searches are answered. opensearch: every refresh and review decision is mirrored from "
        "the SQLite catalog to KORPUS_OPENSEARCH_URL, and /search, /exact, /count read the cluster.",
    )
    opensearch_url: str | None = Field(
        default=None,
        description="http://host:9200, or every node comma-separated (a read a node cannot take goes to the next); "
        "credentials in the URL or env.",
    )
    opensearch_prefix: str = Field(default="korpus", description="Index, alias, template and pipeline name prefix.")
    opensearch_knn_candidates: int = Field(
        default=100,
        ge=0,
        le=10_000,
        description="The cluster's kNN beam (the lucene engine's k) where kNN ranks alone (mode dense), when wider "
        "than the search's depth: more candidates, nearer the exact neighbours, slower queries. A hybrid search keeps "
        "its depth as its beam. 0: the depth (KORPUS_RRF_DEPTH).",
    )
    opensearch_user: str | None = Field(
        default=None, description="The cluster's user (HTTP basic auth, with KORPUS_OPENSEARCH_PASSWORD)."
    )
    opensearch_password: SecretStr | None = Field(
        default=None, description="That user's password: from the environment, never written anywhere by korpus."
    )
    opensearch_ca: Path | None = Field(
        default=None,
        description="A CA bundle (PEM) an https:// cluster's certificate is verified against; unset: the system's "
        "(certifi). Verification is never turned off.",
    )
    catalog_url: str | None = Field(
        default=None,
        description="postgresql://user@host:5432/db: the catalog's serving part — which chunk is current and "
        "visible to which scope — on PostgreSQL (tasks/index/pg_catalog.py), so `korpus serve` with the OpenSearch "
        "backend checks every hit there and needs no file of its own. The password from PGPASSWORD or ~/.pgpass.",
    )
    mirror_max_lag_seconds: float = Field(
        default=60.0,
        ge=0,
        description="How long the OpenSearch mirror may lack a change of the catalog before /health and `korpus "
        "status` say degraded (a refresh streams its documents to the cluster as it publishes them). 0: at once.",
    )
    retention_days: float = Field(
        default=30.0,
        ge=0,
        description="Days a superseded or removed version stays stored after it stopped being served; then `korpus "
        "gc` (or a refresh, with gc_after_refresh) removes its chunks, vectors, pages and files.",
    )
    unpack_max_members: int = Field(
        default=10_000, ge=1, description="Members one letter, mailbox or archive may give; the rest are refused."
    )
    unpack_max_member_bytes: int = Field(
        default=1 << 30, ge=1, description="Bytes one member may unpack to (1 GiB); a bigger one is refused."
    )
    unpack_max_total_bytes: int = Field(
        default=4 << 30, ge=1, description="Bytes a file on disk may unpack to, nested containers included (4 GiB)."
    )
    unpack_max_ratio: float = Field(
        default=200.0,
        gt=1,
        description="A container unpacking to more than this many times its own size (and over "
        "64 MiB) is a zip bomb: what would pass it is refused.",
    )
    unpack_max_depth: int = Field(
        default=5, ge=1, description="Containers inside containers (a letter in a letter in an archive) followed."
    )
    gc_after_refresh: bool = Field(
        default=True,
        description="Each refresh ends with `korpus gc`: versions past retention_days removed (a no-op until then).",
    )
    no_answer_threshold: float = Field(
        default=0.815,
        description="A no-answer question passes when no hit the retriever returned comes this close to it (dense "
        "similarity); a lexical retriever passes only by returning nothing. Calibrated with "
        "`korpus eval --calibrate` on the archive-style set (e5-small): no-answer ≤ 0.806, answerable ≥ 0.826.",
    )
    rrf_k: int = Field(default=60, ge=1)
    rrf_depth: int = Field(default=50, ge=1, description="Hits taken from each side before fusion.")
    hybrid_min_coverage: float = Field(
        default=0.35,
        ge=0.0,
        le=1.0,
        description="When BM25's best hit holds less than this IDF-weighted share of the query's terms, the query "
        "is likely a paraphrase: the convex fusion weighs BM25 by hybrid_alpha_low, the routed one leaves BM25 out. "
        "Chosen on archive-style, checked on XQuAD-ru and the sample; fitted with hybrid_alpha_low leave-one-set-out "
        "(docs/retrieval.md).",
    )
    hybrid_lexical_coverage: float = Field(
        default=0.6,
        ge=0.0,
        le=1.01,
        description="Hybrid routing the other way: when BM25's best hit holds at least this share of the query's "
        "terms, the query is worded as the text and BM25 ranks alone (1.01: never). Fitted leave-one-set-out on "
        "archive-style, the sample, XQuAD-ru and real-colloquial (0.6 in every fold); on real-typed, never fitted, "
        "nDCG@10 0.913 with it and 0.898 without (benchmarks/fusion.py).",
    )
    hybrid_fusion: Literal["routed", "convex"] = Field(
        default="convex",
        description="How `hybrid` fuses BM25 and kNN: `convex` (default) — hybrid_alpha × min-max-normalised BM25 + "
        "(1 - hybrid_alpha) × min-max-normalised cosine over both top lists, BM25 weighing hybrid_alpha_low below "
        "hybrid_min_coverage; `routed` — RRF with the two coverage cuts above (docs/retrieval.md: benchmarks/fusion.py "
        "on six kinds of question and five sets, one cell of 30 below the better side against routed's three).",
    )
    hybrid_alpha: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="BM25's weight in the convex fusion (hybrid_fusion=convex). Fitted leave-one-set-out on "
        "archive-style, the sample, XQuAD-ru and real-colloquial (0.4-0.5 in every fold); 0.933 nDCG@10 on "
        "real-typed, never fitted.",
    )
    hybrid_alpha_low: float | None = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="BM25's weight in the convex fusion when its best hit covers less than hybrid_min_coverage of "
        "the query (a paraphrase's stray match); unset: hybrid_alpha for every query. 0.3 was fitted "
        "leave-one-set-out on archive-style, the sample, XQuAD-ru and real-colloquial (four folds of five); on "
        "real-typed, never fitted, 0.934 nDCG@10 (benchmarks/fusion.py, docs/retrieval.md).",
    )
    rerank_model: Path | None = Field(
        default=None, description="A local sentence-transformers CrossEncoder folder for retriever hybrid+rerank."
    )
    rerank_top: int = Field(default=20, ge=1, description="Fused hits the cross-encoder reorders.")
    llm_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint that also extracts dated events for the chronology (optional; "
        "records are validated, merging stays code — docs/meta.md).",
    )
    llm_model: str = Field(default="extractor", description="Model name sent to KORPUS_LLM_URL.")
    llm_timeout: float = Field(default=60.0, gt=0, description="Seconds before the extraction endpoint counts as down.")
    refresh_wait: float = Field(
        default=0.0,
        ge=0,
        description="Seconds a refresh waits for another refresh of the same data directory to finish before it "
        "stops with a clear message (tasks/runtime/refresh_lock.py).",
    )
    prefect_port: int = Field(
        default=4200,
        ge=0,
        le=65535,
        description="Port of korpus's local Prefect server (started once, reused; UI at http://127.0.0.1:PORT). "
        "Another free port is taken when it is busy. Ignored when PREFECT_API_URL is set.",
    )
    verify: bool = Field(
        default=False,
        description="Hash every file at discovery instead of trusting the last reading of a file whose size, "
        "modification and status-change times and inode are unchanged (`korpus refresh --verify`).",
    )
    quick_unchanged: bool = Field(
        default=True,
        description="`korpus refresh` answers an unchanged tree without a Prefect flow run when the last full refresh "
        "did nothing and neither the tree's stats, the settings, the catalog nor the retention clock changed since "
        "(tasks/unchanged.py); false: every refresh is a flow run.",
    )
    meta_documents: bool = Field(
        default=True,
        description="After a refresh, build the collection's table of contents, chronology and registers of "
        "persons and organisations per access scope, and index them (docs/meta.md).",
    )

    @field_validator("default_scopes", "ocr_tiers", mode="before")
    @classmethod
    def _split_scopes(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_scopes(value)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, YamlSettingsSource(settings_cls))

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    def api_scopes(self, key: str | None) -> list[str] | None:
        """The scopes this API key grants (`api_keys`), compared in constant time; None for any other key."""
        if not key:
            return None
        found = None
        for known, scopes in self.api_keys.items():  # every key compared: the time says nothing about which matched
            if hmac.compare_digest(known.encode(), key.encode()):
                found = list(scopes)
        return found

    def reviewer(self, key: str | None) -> Reviewer | None:
        """Who holds this reviewer key (`review_keys`), compared in constant time; None for any other key."""
        if not key:
            return None
        for known, reviewer in self.review_keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                return reviewer
        return None

    @property
    def index_path(self) -> Path:
        return self.data / "korpus.db"

    @property
    def page_cache_dir(self) -> Path:
        return self.data / "cache" / "pages"

    @property
    def page_cache_location(self) -> Path | str:
        """Where OCR pages and transcripts are cached: KORPUS_PAGE_CACHE_URL, or under the data directory."""
        return self.page_cache_url or self.page_cache_dir

    @property
    def meta_cache_dir(self) -> Path:
        """Facts extracted for the meta-documents, per source version."""
        return self.data / "cache" / "meta"

    @property
    def converted_dir(self) -> Path:
        """PDFs that LibreOffice made of office documents, by the source's sha256 (the source stays untouched)."""
        return self.data / "converted"

    @property
    def transcripts_dir(self) -> Path:
        return self.data / "transcripts"

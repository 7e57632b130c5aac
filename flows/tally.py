"""What a refresh counts as its documents come in (flows/refresh_stream.py): the summary's pages by method and tier,
engine calls, cache hits, retries and audio, added up document by document."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from korpus.core.datamodel import Source, SourceKind
from tasks.parse import ParseOutcome


@dataclass
class Tally:
    """The summary's counts, added up document by document as each is parsed (the pages themselves are let go once
    their document is published)."""

    by_method: Counter[str] = field(default_factory=Counter)
    by_tier: Counter[str] = field(default_factory=Counter)
    layers: Counter[str] = field(default_factory=Counter)
    ocr_calls: int = 0
    asr_calls: int = 0
    vlm_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    audio: Counter[str] = field(default_factory=Counter)

    def add(self, source: Source, outcome: ParseOutcome) -> None:
        self.by_tier.update(f"tier {p.tier}" for p in outcome.pages if p.tier is not None)
        self.layers.update(p.layer_check.decision for p in outcome.pages if p.layer_check)
        if source.kind is SourceKind.audio:
            self.asr_calls += outcome.engine_calls
        elif source.kind and source.kind.paged:
            self.ocr_calls += outcome.engine_calls
        self.vlm_calls += outcome.vlm_calls
        self.cache_hits += outcome.cache_hits
        self.retries += outcome.retries
        self.audio.update(outcome.stats)

    def summary(self) -> dict[str, Any]:
        audio, speech = self.audio["audio_seconds"], self.audio["speech_seconds"]
        return {
            "pages_by_method": dict(self.by_method),
            "pages_by_tier": dict(self.by_tier),
            "ocr_engine_calls": self.ocr_calls,
            "layers_checked": dict(self.layers),
            "vlm_calls": self.vlm_calls,
            "asr_engine_calls": self.asr_calls,
            "page_cache_hits": self.cache_hits,
            "audio_seconds": round(audio, 1),
            "speech_share": round(speech / audio, 3) if audio else None,
            "asr_segments_dropped": int(self.audio["segments_dropped"]),
            "asr_repeats_collapsed": int(self.audio["repeats_collapsed"]),
            "transient_retries": self.retries,
        }

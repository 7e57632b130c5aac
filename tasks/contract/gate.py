"""ROUTE: the contract gate. Pure and deterministic, outside any model; every chunk passes it before indexing.

`indexable = policy approved and checks passed`. A failing chunk becomes a quarantine item
with its reason codes — never a silent drop, never a silent index. Reason codes: docs/lifecycle.md.
"""

from __future__ import annotations

from korpus.core.datamodel import Chunk, QuarantineItem, ReasonCode
from tasks.contract.policies import POLICIES, ChunkPolicy
from tasks.text.quality import PageFacts, measure

MIN_BAD_WORDS = 3
"""A short chunk with one odd word printed in the source («UГИС», «Xxxxгорисполком») is not garbage."""


def text_quality_problems(text: str, policy: ChunkPolicy) -> list[str]:
    """Garbage, not language: few words mixing Cyrillic and Latin look-alikes («npoTOKon»), few glyph codes of a
    font without a Unicode map («M]heh\\guc»), little mojibake («Ð¡Ð¾»), few
    words flipping case inside («cocTaB», a Latin-only earlier OCR). An English chunk or a numbered list
    passes; the same signals as the page detector (tasks/text/quality.py), with the chunk policy's thresholds."""
    signals = measure(text, PageFacts())
    problems = []
    for signal, words, limit, name in (
        ("mixed_script_share", "mixed_script_words", policy.max_mixed_script, "mixed-script words"),
        ("glyph_code_share", "glyph_code_words", policy.max_glyph_codes, "glyph codes in words"),
        ("mojibake_share", None, policy.max_mojibake, "mojibake letters"),
        ("case_flip_share", None, policy.max_case_flips, "case flips in words"),
    ):
        if signals[signal] > limit and (words is None or signals[words] >= MIN_BAD_WORDS):
            problems.append(f"{name} {signals[signal]:.2f} > {limit}")
    return problems


def gate_chunk(chunk: Chunk, *, approved_exception: bool = False) -> list[tuple[ReasonCode, str]]:
    """Every rule the chunk breaks, as (reason code, detail). Empty: the chunk may be indexed.

    Only rules a real chunk can break are here. Identity, access and locator are not checked again: a `Chunk`
    cannot be built without them (korpus/core/datamodel.py), and a source without owner or access never gets past
    admission (`missing-metadata`). `policy-not-approved`: the chunk was cut by a policy korpus no longer has —
    a quarantined chunk kept from an older release and released by a reviewer. `approved_exception` (a
    reviewer's release) lifts the length and text-quality rules only.
    """
    policy = POLICIES.get(chunk.policy_version)
    if policy is None:
        return [(ReasonCode.policy_not_approved, f"policy {chunk.policy_version!r} is not one of {sorted(POLICIES)}")]
    failures: list[tuple[ReasonCode, str]] = []
    if not approved_exception:
        if len(chunk.body) > policy.max_chars:
            failures.append((ReasonCode.oversized, f"{len(chunk.body)} chars > {policy.max_chars}"))
        for problem in text_quality_problems(chunk.body, policy):
            failures.append((ReasonCode.text_quality, problem))
    return failures


def route_chunks(chunks: list[Chunk]) -> tuple[list[Chunk], list[QuarantineItem]]:
    """Split chunks into those the gate lets through and quarantine items for the rest (with the chunk kept)."""
    passed: list[Chunk] = []
    refused: list[QuarantineItem] = []
    for chunk in chunks:
        failures = gate_chunk(chunk)
        if not failures:
            passed.append(chunk)
            continue
        refused.append(
            QuarantineItem(
                source_id=chunk.source_id,
                source_version=chunk.source_version,
                page=chunk.locator.page,
                t_start=chunk.locator.t_start,
                chunk_id=chunk.chunk_id,
                reasons=list(dict.fromkeys(code for code, _ in failures)),
                detail="; ".join(detail for _, detail in failures),
                evidence=chunk.body[:4000],
                chunk=chunk,
            )
        )
    return passed, refused

"""ROUTE: the contract gate. Pure and deterministic, outside any model; every chunk passes it before indexing.

`indexable = policy approved and checks passed`. A failing chunk becomes a quarantine item
with its reason codes — never a silent drop, never a silent index. Reason codes: docs/lifecycle.md.

The garbage rules (`text-quality`) are for text whose quality is uncertain — OCR, a transcript. The text a file
itself holds as it is — a PDF or DjVu layer kept as the page's text, what LibreOffice gives of a Word file, a web
page, a spreadsheet, a letter — is the source: an estimate that writes «Kзпл=0,2» with a Latin K is not garbage,
and refusing it would make the index worse than the file (`holds_its_own_text`). A plain text file stays under the
rules: nothing says where its text came from (FineReader and older OCR export `.txt`), and no detector judged it.
"""

from __future__ import annotations

from collections.abc import Collection

from korpus.core.datamodel import Chunk, PageResult, QuarantineItem, ReasonCode
from tasks.contract.policies import POLICIES, ChunkPolicy
from tasks.text.quality import PageFacts, measure

MIN_BAD_WORDS = 3
"""A short chunk with one odd word printed in the source («UГИС», «Xxxxгорисполком») is not garbage."""


OWN_TEXT_METHODS = frozenset({"markup", "spreadsheet", "mail", "archive"})


def holds_its_own_text(page: PageResult) -> bool:
    """The page's text is what the file itself holds, read exactly (not recognised): a web page, a spreadsheet, a
    letter, or a text layer kept as the page's text — a PDF's, a DjVu's, the PDF LibreOffice makes of a Word file —
    whether the detector trusted it at once or flagged it and kept it after comparing it with the page's OCR (a
    real estimate's «Kзпл=0,2» is flagged for its Latin K, and the OCR reads the same)."""
    return page.method in OWN_TEXT_METHODS or (page.method == "text-layer" and not page.tier)


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


def gate_chunk(
    chunk: Chunk, *, approved_exception: bool = False, own_text: bool = False
) -> list[tuple[ReasonCode, str]]:
    """Every rule the chunk breaks, as (reason code, detail). Empty: the chunk may be indexed.

    Only rules a real chunk can break are here. Identity, access and locator are not checked again: a `Chunk`
    cannot be built without them (korpus/core/datamodel.py), and a source without owner or access never gets past
    admission (`missing-metadata`). `policy-not-approved`: the chunk was cut by a policy korpus no longer has —
    a quarantined chunk kept from an older release and released by a reviewer. `approved_exception` (a
    reviewer's release) lifts the length and text-quality rules only; `own_text` (the chunk's page holds the file's
    own text, `holds_its_own_text`) lifts the text-quality rules.
    """
    policy = POLICIES.get(chunk.policy_version)
    if policy is None:
        return [(ReasonCode.policy_not_approved, f"policy {chunk.policy_version!r} is not one of {sorted(POLICIES)}")]
    failures: list[tuple[ReasonCode, str]] = []
    if not approved_exception:
        if len(chunk.body) > policy.max_chars:
            failures.append((ReasonCode.oversized, f"{len(chunk.body)} chars > {policy.max_chars}"))
        for problem in [] if own_text else text_quality_problems(chunk.body, policy):
            failures.append((ReasonCode.text_quality, problem))
    return failures


def route_chunks(chunks: list[Chunk], own_text_pages: Collection[int] = ()) -> tuple[list[Chunk], list[QuarantineItem]]:
    """Split chunks into those the gate lets through and quarantine items for the rest (with the chunk kept).
    `own_text_pages`: the pages whose text the file itself holds (no text-quality rules for their chunks)."""
    passed: list[Chunk] = []
    refused: list[QuarantineItem] = []
    for chunk in chunks:
        own = chunk.locator.page is not None and chunk.locator.page in own_text_pages
        failures = gate_chunk(chunk, own_text=own)
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

"""The approved chunk policies: one table for how a chunk is cut (tasks/contract/chunking.py) and what the contract gate
holds it to (tasks/contract/gate.py). A policy's name is stored on every chunk (`Chunk.policy_version`); a chunk whose
policy is not in this table is `policy-not-approved` at the gate. Side by side comparisons: docs/chunking.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkPolicy:
    name: str
    # cutting
    min_tokens: int = 0
    max_tokens: int = 0  # 0: one chunk per page or minute of speech
    full_path: bool = False  # every chunk carries its ancestors' headings, even when its body opens a section
    # the gate
    max_chars: int = 6_000
    max_mixed_script: float = 0.1
    max_glyph_codes: float = 0.05
    max_mojibake: float = 0.1
    max_case_flips: float = 0.25  # above the page detector's 0.15: camelCase identifiers in a code chunk


POLICIES: dict[str, ChunkPolicy] = {
    # One chunk per page or minute of speech: a page of dense print is ~4-6k characters; beyond 12k something is
    # wrong (a table dumped as text, a layer repeated).
    "page-v1": ChunkPolicy("page-v1", max_chars=12_000),
    # e5-small reads 512 tokens; the address and context lines take up to ~40 of them. 350 tokens of Russian is
    # ~2 000 characters; an oversized atomic unit (a long table row, a run-on sentence) may exceed it, up to 6 000.
    "structure-v1": ChunkPolicy("structure-v1", min_tokens=80, max_tokens=350),
    # v2: a chunk that opens a section («3. Ответственность сторон») still says which document it belongs to
    # («Договор поставки подшипников № 21-1/2019 › …»), so a question naming the document finds page 2 too.
    "structure-v2": ChunkPolicy("structure-v2", min_tokens=80, max_tokens=350, full_path=True),
}
DEFAULT_POLICY = "structure-v2"

"""What a chunk's vector is embedded from: its text, or what the dense side embeds of a meta-document's part
(`dense_text`, which the meta-documents' build embeds). Every path that gives a stored chunk its vector again —
`korpus reindex`, the embedded backend's rebuild, a chunk the cluster lost — embeds what its refresh embedded."""

from __future__ import annotations


def dense_text(part: str) -> str:
    """What the dense side embeds of a meta part: a summary part whole (it answers «сколько…», «какие документы…»),
    any other part by its first two lines — its address and what it covers («Реестр лиц: Белов К. С. — Иванов П.
    С.»). A register's body is a list of names e5 embeds poorly and BM25 finds exactly; embedding 1,200 characters of
    it cost a 1,000-letter refresh 23 s of its 52 (#32 item 2)."""
    lines = part.split("\n")
    return part if len(lines) > 1 and ": сводка." in lines[1] else "\n".join(lines[:2])


def passage_text(text: str, kind: str | None) -> str:
    """What a stored chunk's vector is embedded from, as its refresh embedded it: the chunk's text, or a meta-document
    part's `dense_text` (kind `meta`). A vector given again (a reindex, a chunk the cluster lost) is the same."""
    return dense_text(text) if kind == "meta" else text

"""What natasha's slovnet NER tagger marks, run only on the sentences that can hold a name.

The tagger is most of what the registers cost (#32: ~3 ms a short letter on this 2-core machine, its convolutions over
every token). Russian writes names, bodies and places capitalised, so a sentence whose words after the first are all
in lower case, and whose first word is a common dictionary word («Поставщик обязан …»), holds nothing it would mark.
Such sentences are not tagged unless next to one that may name someone (the tagger reads a sentence's neighbours
as context): the text it sees is each run of kept sentences as the page writes it, one run a line, and the spans it
finds are put back at their places in the page. `KORPUS_NER_ALL_SENTENCES=1` tags every sentence (the
labelled comparison row of benchmarks/scale.py).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence

from tasks.meta.models import _models, parse

NerSpan = tuple[int, int, str]
"""(start, stop, type) of a span natasha's slovnet NER marks."""

_LOCK = threading.Lock()
_SENTENCE = re.compile(r"[^\n]+?(?:(?<!\b[А-ЯЁA-Z])[.!?…](?=\s)|$)", re.MULTILINE)  # «А. А.» is no end
_FIRST_WORD = re.compile(r"[^\w]*(\w+)")
_CAPITAL_INSIDE = re.compile(r"(?<=[\s«\"'“„(\-/])[A-ZА-ЯЁ]")
_NAME_GRAMMEMES = {"Name", "Surn", "Patr", "Geox", "Orgn", "Abbr", "Trad", "UNKN"}


def may_name(sentence: str) -> bool:
    """A capitalised word after the first, or a first word that is no common word («Онопко получает мяч»)."""
    first = _FIRST_WORD.match(sentence)
    if first is None:
        return False
    if _CAPITAL_INSIDE.search(sentence, first.end()):
        return True
    word = first.group(1)
    if not word[:1].isupper():
        return False
    if word.isupper() or not _models()[2].word_is_known(word.lower()):
        return True
    return any(_NAME_GRAMMEMES & set(p.tag.grammemes) for p in parse(word))


def _kept(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The runs of kept sentences (those that may name someone and their neighbours), one run a line, and (offset in
    the kept text, offset in `text`) of each run."""
    if os.environ.get("KORPUS_NER_ALL_SENTENCES") == "1":
        return text, [(0, 0)]
    sentences = list(_SENTENCE.finditer(text))
    naming = [may_name(m.group(0)) for m in sentences]
    last = len(sentences) - 1
    keep = [naming[i] or (i > 0 and naming[i - 1]) or (i < last and naming[i + 1]) for i in range(len(sentences))]
    runs: list[list[int]] = []  # [start, end] in `text` of each run of kept sentences, as the page writes it
    for i, match in enumerate(sentences):
        if not keep[i]:
            continue
        if runs and i > 0 and keep[i - 1]:
            runs[-1][1] = match.end()
        else:
            runs.append([match.start(), match.end()])
    pieces, places, at = [], [], 0
    for start, end in runs:
        places.append((at, start))
        pieces.append(text[start:end])
        at += end - start + 1
    return "\n".join(pieces), places


def _back(spans: list[NerSpan], places: list[tuple[int, int]]) -> list[NerSpan]:
    out = []
    for start, stop, kind in spans:
        kept_at, text_at = next(p for p in reversed(places) if p[0] <= start)
        out.append((start - kept_at + text_at, stop - kept_at + text_at, kind))
    return out


def ner_spans(texts: Sequence[str]) -> list[list[NerSpan]]:
    """What the NER tagger marks in each text, the texts tagged in batches (slovnet's own batches of 8): on 270
    generated letters 0.64 s against 1.98 s one text at a time, the same spans."""
    _, tagger, _ = _models()
    reduced = [_kept(text) for text in texts]
    filled = [kept for kept, _ in reduced if kept.strip()]
    with _LOCK:  # the tagger keeps state while it runs
        marked = iter([[(s.start, s.stop, s.type) for s in markup.spans] for markup in tagger.map(filled)])
    return [_back(next(marked), places) if kept.strip() else [] for kept, places in reduced]

"""Typo-tolerant lexical matching: a query term the index has never seen is joined by the indexed terms a typo away.

People mistype content words («огнетушитлей», «протакол»); the stem of a mistyped word is a term no chunk holds,
so BM25 loses the word entirely. `near_terms` finds, for such a term only, indexed terms within a small edit
distance (optimal string alignment: a letter changed, dropped, added, or two neighbours swapped) and the lexical
side searches them too. Bounded so it does not flood precision:

- only terms absent from the index (a known word is never "corrected" into another);
- only terms of 5+ letters, never one holding a digit (identifiers, numbers and codes are matched as written);
- distance 1 for terms of 5-9 letters, 2 for 10 or more, and only the nearest found (a term one edit away hides
  those two away); candidates of a similar length sharing the first letter;
- at most `MAX_VARIANTS` variants per term, the most frequent first.

A mistype of the first letter is not corrected (candidates are read by first letter, an index range scan).

Per caller: both "the index does not know it" and "a variant" are judged over the chunks the caller's scopes may
see (`expand(..., holds=…)`), so a surname only `hr` documents hold is never offered to `public` as a "did you
mean", and a word only `hr` holds does not hide `public`'s variants of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rapidfuzz.distance import OSA

MIN_LENGTH = 5
MAX_VARIANTS = 3


def allowed_distance(term: str) -> int:
    return 1 if len(term) < 10 else 2


def correctable(term: str) -> bool:
    return len(term) >= MIN_LENGTH and term.isalpha()


def near_terms(
    term: str, candidates: Iterable[tuple[str, int]], holds: Callable[[str], bool] | None = None
) -> list[str]:
    """Indexed terms a typo away from `term`, most frequent first. `candidates` are (term, document frequency)
    pairs sharing the term's first letter; `holds(name)` keeps only those a chunk the caller may see holds (asked
    of the close candidates alone, nearest first)."""
    limit = allowed_distance(term)
    close = [
        (name, df)
        for name, df in candidates
        if abs(len(name) - len(term)) <= limit
        and name != term
        and OSA.distance(term, name, score_cutoff=limit) <= limit
    ]
    scored = sorted((OSA.distance(term, name), -df, name) for name, df in close)
    if holds is not None:
        scored = [entry for entry in scored if holds(entry[2])]
    nearest = scored[0][0] if scored else 0
    return [name for distance, _, name in scored if distance == nearest][:MAX_VARIANTS]


def expand(
    terms: Iterable[str],
    frequency: Callable[[str], int],
    candidates: Callable[[str], Iterable[tuple[str, int]]],
    holds: Callable[[str], bool] | None = None,
) -> dict[str, list[str]]:
    """term → variants for each unknown, correctable term of the query (terms the index knows are left out).
    `frequency(term)` is the term's document frequency; `candidates(term)` lists indexed (term, df) pairs sharing
    its first letter (a superset of the near ones: `near_terms` measures the distance). With `holds` (whether a
    chunk the caller may see holds a term) a term is unknown when no such chunk holds it, and variants are only such
    terms."""
    variants: dict[str, list[str]] = {}
    for term in dict.fromkeys(terms):
        if correctable(term) and (not holds(term) if holds is not None else frequency(term) == 0):
            found = near_terms(term, candidates(term), holds)
            if found:
                variants[term] = found
    return variants

"""The models the name rules read with, loaded once per process: natasha's segmenter and NER tagger (slovnet, news
embeddings; inside the `natasha` wheel) and pymorphy3's Russian dictionary."""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any


@cache
def _models() -> tuple[Any, Any, Any]:
    from natasha import NewsEmbedding, NewsNERTagger, Segmenter
    from pymorphy3 import MorphAnalyzer

    return Segmenter(), NewsNERTagger(NewsEmbedding()), MorphAnalyzer()


@lru_cache(maxsize=100_000)
def parse(word: str) -> list[Any]:
    """pymorphy3's readings of a word, most likely first: asked several times per word by the body and name rules."""
    return _models()[2].parse(word)


def known(word: str) -> bool:
    """The dictionary knows the word, in either spelling of ё."""
    morph, lowered = _models()[2], word.lower()
    return morph.word_is_known(lowered) or morph.word_is_known(lowered.replace("ё", "е"))


def warm_up() -> None:
    """Load the NER model and the morphological dictionary (~0.7 s) now rather than at the first text."""
    _models()

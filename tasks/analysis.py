"""One Russian analysis for every backend, equal in intent to OpenSearch's built-in `russian` analyzer.

Lucene's RussianAnalyzer: standard (UAX#29-like) word segmentation, lowercase, Russian stop words, Snowball
Russian stemmer. Word segmentation here is a regular expression that keeps digits joined by `.`/`,` (dates,
amounts) and letters joined by `.`/`'` whole, as UAX#29 does, and splits at hyphens and slashes.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer

# Lucene's RussianAnalyzer default stop set (org/apache/lucene/analysis/snowball/russian_stop.txt).
RUSSIAN_STOP_WORDS = frozenset(
    """
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот от
    меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас нибудь опять уж
    вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб без
    будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один
    почти мой тем чтобы нее сейчас были куда зачем всех никогда можно при наконец два об другой хоть после
    над больше тот через эти нас про всего них какая много разве три эту моя впрочем хорошо свою этой перед
    иногда лучше чуть том нельзя такой им более всегда конечно всю между
    """.split()
)

_WORD = re.compile(r"\w+(?:(?:[.'’]\w+)|(?:(?<=\d)[,:](?=\d)\d*))*", re.UNICODE)
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # PyStemmer objects are not thread-safe; Dask runs tasks on threads.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("russian")
    return stemmer


def words(text: str) -> list[str]:
    """Lowercased words in order, before stop-word removal and stemming (the `exact` field)."""
    return [m.group(0).lower() for m in _WORD.finditer(text)]


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def analyse(text: str) -> list[str]:
    """The `text` field's terms: lowercase, stop words removed, Snowball Russian stems."""
    return [_stem(w) for w in words(text) if w not in RUSSIAN_STOP_WORDS]

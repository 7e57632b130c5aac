"""One Russian analysis for every backend, equal in intent to OpenSearch's built-in `russian` analyzer.

Lucene's RussianAnalyzer: standard (UAX#29-like) word segmentation, lowercase, Russian stop words, Snowball
Russian stemmer. Word segmentation is a regular expression implementing UAX#29's rules for letters and digits
(dates `12.03.2023` and amounts `000,50` stay whole, `т.е` stays whole, hyphens, slashes and `10:30` split);
tests/fixtures/analyzer/ pins its output on 300 sentences and says how to check it against OpenSearch `_analyze`.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer

# Lucene's RussianAnalyzer default stop set (org/apache/lucene/analysis/snowball/russian_stop.txt), all 159 words:
# tests/integration/test_lucene_analyzer.py compares it with Lucene's own `getDefaultStopSet()`.
RUSSIAN_STOP_WORDS = frozenset(
    """
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот от
    меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас нибудь опять уж
    вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб без
    будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один
    почти мой тем чтобы нее сейчас были куда зачем всех никогда можно при наконец два об другой хоть после
    над больше тот через эти нас про всего них какая много разве три эту моя впрочем хорошо свою этой перед
    иногда лучше чуть том нельзя такой им более всегда конечно всю между сказал сказала сказать говорил жизнь
    кажется сегодня человек
    """.split()
)

# UAX#29 word boundaries for letters and digits, as Lucene's StandardTokenizer applies them: a MidLetter (`:`, `·`)
# joins two letters (WB6/7), a MidNum (`,`, `;`) joins two digits (WB11/12), a MidNumLet (`.`, apostrophes) joins
# either pair; letters, digits and `_` (ExtendNumLet) join directly (WB8-10, WB13a/b); everything else breaks.
_LETTER = r"[^\W\d_]"
_WORD = re.compile(
    rf"\w+(?:(?:(?<={_LETTER})[:·'’‘.․﹒＇．](?={_LETTER})|(?<=\d)[,;.'’‘․﹒＇．;](?=\d))\w+)*", re.UNICODE
)
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
    return terms_of(words(text))


def terms_of(tokens: list[str]) -> list[str]:
    """`analyse` from already segmented words (the indexer has them for the `exact` field)."""
    return [_stem(w) for w in tokens if w not in RUSSIAN_STOP_WORDS]

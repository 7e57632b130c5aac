"""The facts cache and the compact form `refresh_meta` holds: what is read back, and what the meta-documents say from
it, equals what was extracted, for any facts (#32: memory, not meaning)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from korpus.core.datamodel import Source
from tasks.meta.documents import meta_texts
from tasks.meta.facts import (
    DatedSentence,
    FactCache,
    OrganisationMention,
    PersonMention,
    Place,
    SourceFacts,
    compact,
)

pytestmark = pytest.mark.unit

_WORD = st.text(alphabet="абвгдеёжзиклмнопрстуфхцчшщэюяАБВГДЕЖЗИКЛМНОПРСТabcXYZ «»-.", min_size=1, max_size=20)
_INITIAL = st.one_of(st.none(), st.sampled_from("АБВГДЕЖЗИКЛМН"))


@st.composite
def _facts(draw: st.DrawFn) -> SourceFacts:
    source_id = draw(st.sampled_from(["a.txt", "дела/письмо 1.txt", "x/y/z.pdf"]))
    audio = draw(st.booleans())
    places = st.builds(
        Place,
        source_id=st.just(source_id),
        page=st.none() if audio else st.integers(1, 4),
        t_start=st.floats(0, 5000, allow_nan=False) if audio else st.none(),
    )
    date = st.sampled_from(["2020-01-02", "2021-05", "1998", "2024-12-31"])
    return SourceFacts(
        source_id=source_id,
        version=draw(st.sampled_from(["v1", "v2"])),
        kind="audio" if audio else "text",
        title=draw(_WORD),
        pages=draw(st.integers(0, 5)),
        seconds=5000.0 if audio else None,
        owner=draw(st.sampled_from(["Канцелярия", None])),
        access="public",
        tenant="default",
        events=draw(
            st.lists(st.builds(DatedSentence, first=date, last=date, sentence=_WORD, place=places), max_size=4)
        ),
        persons=draw(
            st.lists(
                st.builds(
                    PersonMention,
                    surname=_WORD,
                    first_initial=_INITIAL,
                    middle_initial=_INITIAL,
                    shown=_WORD,
                    fullness=st.integers(0, 6),
                    certain=st.booleans(),
                    place=places,
                ),
                max_size=6,
            )
        ),
        organisations=draw(
            st.lists(
                st.builds(
                    OrganisationMention,
                    key=_WORD,
                    name=_WORD,
                    inn=st.one_of(st.none(), st.sampled_from(["7707083893", "7830002293"])),
                    ogrn=st.none(),
                    place=places,
                ),
                max_size=4,
            )
        ),
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(_facts(), min_size=1, max_size=5))
def test_compact_facts_read_from_the_cache_say_what_the_extracted_facts_say(
    tmp_path_factory: pytest.TempPathFactory, sources: list[SourceFacts]
) -> None:
    cache = FactCache(tmp_path_factory.mktemp("facts"))
    read = []
    for n, facts in enumerate(sources):
        source = Source(source_id=f"{n}/{facts.source_id}", version=facts.version, path="p")
        cache.put(facts, source, served="chunks")
        read.append(cache.get(source, served="chunks"))
    assert read == sources  # the round trip loses nothing
    assert [compact(copy.deepcopy(f)) for f in sources] == sources
    assert meta_texts(read) == meta_texts(sources)


def test_compact_shares_one_place_object_for_each_place(tmp_path: Path) -> None:
    page = Place(source_id="a.txt", page=2)
    facts = SourceFacts(
        source_id="a.txt",
        version="v",
        kind="text",
        title="t",
        pages=2,
        owner="o",
        access="public",
        tenant="default",
        persons=[
            PersonMention(
                surname="лапин",
                first_initial="С",
                middle_initial="Н",
                shown="Лапин С. Н.",
                fullness=2,
                place=Place(source_id="a.txt", page=2),
            )
            for _ in range(3)
        ],
        organisations=[OrganisationMention(key="ООО ромашка", name="ООО «Ромашка»", inn=None, ogrn=None, place=page)],
    )
    cache = FactCache(tmp_path)
    source = Source(source_id="a.txt", version="v", path="a.txt")
    cache.put(facts, source)
    read = cache.get(source)
    assert read == facts
    places = {id(m.place) for m in [*read.persons, *read.organisations]}
    assert len(places) == 1  # four mentions on one page: one Place, not four
    assert read.persons[0].place.source_id is read.source_id


def test_a_broken_cache_file_is_read_again(tmp_path: Path) -> None:
    cache = FactCache(tmp_path)
    source = Source(source_id="a.txt", version="v", path="a.txt")
    cache.put(
        SourceFacts(
            source_id="a.txt", version="v", kind="text", title="t", pages=1, owner=None, access=None, tenant=None
        ),
        source,
    )
    written = next(tmp_path.rglob("*.json"))
    written.write_text('{"source_id": "a.txt", "persons": [{"surname": 1}]}', encoding="utf-8")
    assert cache.get(source) is None


_ROW = st.fixed_dictionaries(
    {
        "version": st.sampled_from(["v1", "v2"]),
        "owner": st.sampled_from(["o", None]),
        "switched_at": st.sampled_from(["2026-01-01T00:00:00", None]),
        "served": st.text(alphabet="0123456789abcdef", max_size=4),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(alphabet="ab/ёя. -", min_size=1, max_size=6), _ROW, max_size=8),
    st.sampled_from(["", "llm:m"]),
)
def test_a_scope_fingerprint_hashed_line_by_line_equals_the_joined_one(rows: dict, variant: str) -> None:
    from tasks.meta.documents import LAYOUT_VERSION
    from tasks.meta.facts import EXTRACTOR_VERSION
    from tasks.meta.publish import scope_fingerprint

    # ids are paths: never a NUL, so ordering by id is ordering by line
    listed = [{"source_id": source_id, **row} for source_id, row in reversed(rows.items())]
    lines = sorted(f"{r['source_id']}\0{r['version']}\0{r['owner']}\0{r['switched_at']}\0{r['served']}" for r in listed)
    joined = hashlib.sha256("\n".join([EXTRACTOR_VERSION, LAYOUT_VERSION, variant, *lines]).encode()).hexdigest()
    assert scope_fingerprint(listed, variant) == joined  # the form built catalogs hold: no scope rebuilt by the change

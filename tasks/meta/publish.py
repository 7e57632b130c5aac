"""Meta-documents as sources of kind `meta`: built per access scope, switched in like a new version, retired when
their scope is gone.

One set of four documents per (tenant, access) that current sources carry, built only from those sources: a person
named only in an `hr` document appears only in the `hr` register, which only callers with `hr` retrieve. A caller
with several scopes reads several registers, one per scope.

What is rebuilt: a scope whose sources (ids, versions, owners, the chunks they serve) are what they were at its
last build is skipped whole; otherwise only sources whose facts are not in the cache are read again, the four
documents are merged anew, and only a document whose text changed is re-chunked, embedded and published. A review
decision (release, withdraw) reaches the meta-documents at the next refresh.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from korpus.core.datamodel import FURNITURE_SECTION, META_PREFIX, Chunk, PageResult, Source, SourceKind, scope_of
from tasks.contract.chunking import page_chunks
from tasks.index.sqlite import SqliteIndex
from tasks.meta.documents import LAYOUT_VERSION, TITLES, meta_texts
from tasks.meta.facts import EXTRACTOR_VERSION, FactCache, SourceFacts, compact, extract_facts, name_texts
from tasks.meta.llm import LlmEvents
from tasks.meta.ner import ner_spans
from tasks.text.passages import dense_text

logger = logging.getLogger("korpus.meta")
META_OWNER = "korpus"


def meta_source_id(tenant: str, access: str, kind: str) -> str:
    """`korpus://meta/public/Реестр лиц` (a tenant other than the default comes first). The `//` keeps it apart
    from every file's id: those are root-relative paths."""
    scope = scope_of(access, tenant)
    return f"{META_PREFIX}{scope}/{TITLES[kind]}"


def meta_kind(source_id: str) -> str | None:
    """`toc`, `chronology`, `persons` or `organisations` for a meta-document's id, else None."""
    if not source_id.startswith(META_PREFIX):
        return None
    title = source_id.rsplit("/", 1)[-1]
    return next((kind for kind, name in TITLES.items() if name == title), None)


def scope_fingerprint(rows: list[dict[str, Any]], variant: str) -> str:
    """What a scope's meta-documents were built from: each current source's id, version, owner, switch time and served
    chunks, in source id order (one current version a source), after the extractor, layout and model variant. Hashed
    line by line: a scope of 100,000 sources is ~50 MB as one string."""
    digest = hashlib.sha256("\n".join([EXTRACTOR_VERSION, LAYOUT_VERSION, variant]).encode())
    for r in sorted(rows, key=lambda r: r["source_id"]):
        digest.update(f"\n{r['source_id']}\0{r['version']}\0{r['owner']}\0{r['switched_at']}\0{r['served']}".encode())
    return digest.hexdigest()


def served_pages(index: SqliteIndex, row: dict[str, Any]) -> tuple[Source, list[PageResult]]:
    """A source as its current chunks serve it: the bodies of each page (or stretch of speech) in order. Built from
    chunks, not stored page texts, so text the gate or a reviewer kept out never reaches a meta-document."""
    source = Source(
        source_id=row["source_id"],
        version=row["version"],
        path=row["source_id"],
        kind=row["kind"],
        owner=row["owner"],
        access=row["access"],
        tenant=row["tenant"],
    )
    pages: dict[tuple[int | None, float | None], list[dict[str, Any]]] = {}
    for chunk in index.source_chunks(row["source_id"]):
        if chunk["section_path"] == [FURNITURE_SECTION]:
            continue  # a stamp frame's labels name no one
        place = (chunk["page"], None) if chunk["page"] is not None else (None, chunk["t_start"])
        pages.setdefault(place, []).append(chunk)
    results = [
        PageResult(
            source_id=source.source_id,
            source_version=source.version,
            page=page,
            t_start=t_start,
            t_end=max((c["t_end"] or 0.0 for c in chunks), default=None) if t_start is not None else None,
            text="\n".join(c["body"] for c in chunks),
            method="chunks",
        )
        for (page, t_start), chunks in pages.items()
    ]
    return source, results


NER_BATCH_SOURCES = 64
"""Sources whose texts go to the NER tagger together (batched tagging is ~3× faster on short letters)."""


def _all_facts(
    index: SqliteIndex, cache: FactCache, rows: list[dict[str, Any]], counts: dict[str, int], llm: LlmEvents | None
) -> list[SourceFacts]:
    """Each row's facts: from the cache, else extracted (only a source without cached facts has its chunks read) —
    read and NER-tagged NER_BATCH_SOURCES at a time."""
    found: dict[str, SourceFacts] = {}
    missing = []
    for row in rows:
        facts = cache.get(
            Source(source_id=row["source_id"], version=row["version"], path=row["source_id"]), row["served"]
        )
        if facts is not None:
            counts["facts_cached"] += 1
            found[row["source_id"]] = facts
        else:
            missing.append(row)
    for at in range(0, len(missing), NER_BATCH_SOURCES):
        read = [(row, *served_pages(index, row)) for row in missing[at : at + NER_BATCH_SOURCES]]
        texts = list(dict.fromkeys(t for _row, _source, pages in read for t in name_texts(pages) if t.strip()))
        try:
            ner = dict(zip(texts, ner_spans(texts), strict=True))
        except Exception:  # containment: each source is then tagged alone, and one that fails is listed bare
            logger.exception("batched NER failed; the %d sources are tagged one by one", len(read))
            ner = {}
        for row, source, pages in read:
            found[row["source_id"]] = compact(_extracted(cache, row, source, pages, counts, llm, ner))
    return [_labelled(found[row["source_id"]], row) for row in rows]


def _extracted(
    cache: FactCache,
    row: dict[str, Any],
    source: Source,
    pages: list[PageResult],
    counts: dict[str, int],
    llm: LlmEvents | None,
    ner: dict[str, list],
) -> SourceFacts:
    try:
        facts = extract_facts(source, pages, llm=llm, ner=ner)
    except Exception as exc:  # one source's text must not stop the collection's documents: it is listed bare
        logger.exception("meta facts of %s could not be extracted; listed without dates or names", source.source_id)
        counts["facts_failed"] += 1
        facts = SourceFacts(
            source_id=source.source_id,
            version=source.version,
            kind=row["kind"],
            title="",
            pages=len(pages),
            owner=row["owner"],
            access=row["access"],
            tenant=row["tenant"],
            extraction_error=f"{type(exc).__name__}: {exc}",
        )
    else:
        cache.put(facts, source, row["served"])
        counts["facts_extracted"] += 1
        if llm is not None:
            counts["llm_records"] += facts.llm_records
            counts["llm_added"] += facts.llm_added
            counts["llm_refused"] += facts.llm_refused
    return facts


def _labelled(facts: SourceFacts, row: dict[str, Any]) -> SourceFacts:
    # Labels, size and the switch time belong to the catalog, not to the file's contents.
    pages_count = facts.pages if facts.seconds is not None else (row["pages"] or facts.pages)
    return replace(facts, owner=row["owner"], access=row["access"], switched_at=row["switched_at"], pages=pages_count)


EMBED_SLICE = 512
"""Meta parts embedded at a time: the table of contents of 100,000 letters is ~18,000 parts, and the embedder holds
every text it is given as tokens at once."""


def _version(parts: list[str]) -> str:
    """The sha256 of the parts joined by form feeds, fed part by part (a large document's text is not copied)."""
    digest = hashlib.sha256()
    for n, part in enumerate(parts):
        digest.update((f"\f{part}" if n else part).encode())
    return digest.hexdigest()


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _publish(
    index: SqliteIndex,
    source: Source,
    parts: list[str],
    embed: Callable[[list[Chunk]], np.ndarray],
    model: str,
    counts: dict[str, int],
) -> bool:
    current = index.current_source(source.source_id)
    if current is not None and current[0].version == source.version:
        return False
    pages = [
        PageResult(
            source_id=source.source_id,
            source_version=source.version,
            page=n,
            text=text,
            method="meta",
            engine=f"korpus {EXTRACTOR_VERSION}",
        )
        for n, text in enumerate(parts, start=1)
    ]
    chunks, _ = page_chunks(source, pages)
    # parts whose text did not change keep their vectors; texts are keyed by digest, not held twice
    keys = [_digest(c.text) for c in chunks]
    known = index.current_vectors(source.source_id, key=_digest)
    fresh = [(key, c) for key, c in zip(keys, chunks, strict=True) if key not in known]
    for at in range(0, len(fresh), EMBED_SLICE):
        batch = fresh[at : at + EMBED_SLICE]
        dense = [c.model_copy(update={"text": dense_text(c.text)}) for _, c in batch]
        known.update(zip([key for key, _ in batch], embed(dense), strict=True))
    vectors = np.stack([known[key] for key in keys]) if chunks else np.zeros((0, 0))
    del known
    index.publish_version(source, chunks, vectors, pages, embed_model=model)
    counts["parts_embedded"] += len(fresh)
    counts["parts_reused"] += len(chunks) - len(fresh)
    return True


def refresh_meta(
    index: SqliteIndex,
    cache: FactCache,
    embed: Callable[[list[Chunk]], np.ndarray],
    embed_model: str,
    llm: LlmEvents | None = None,
) -> dict[str, Any]:
    """Bring every scope's meta-documents in step with the catalog; returns what was done (for the summary)."""
    started = time.perf_counter()
    counts: dict[str, int] = defaultdict(int)
    served = index.served_chunk_keys()
    rows, built_before = [], []  # the catalog's current rows: one dict a source, held for the whole build
    for row in index.sources():
        if row["lifecycle"] != "current":
            continue
        if row["kind"] == SourceKind.meta.value:
            built_before.append(row["source_id"])
        else:
            row["served"] = served.pop(row["source_id"], "")
            rows.append(row)
    del served
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["tenant"] or "default", row["access"])].append(row)
    del rows
    scopes = sorted(groups)
    built = index.meta_fingerprints()
    # What is built is let go as soon as it is used — a scope's rows once its facts are read, the facts once merged
    # into text, each document's text once published — so the build holds one stage of one scope at a time (#32).
    for tenant, access in scopes:
        members = groups.pop((tenant, access))
        fingerprint = scope_fingerprint(members, cache.variant)
        if built.get(f"{tenant}/{access}") == fingerprint:
            counts["scopes_unchanged"] += 1
            continue
        facts = _all_facts(index, cache, members, counts, llm)
        sources_read = len(members)
        del members
        texts = meta_texts(facts)
        del facts
        for kind in list(texts):
            parts = texts.pop(kind)
            source_id = meta_source_id(tenant, access, kind)
            version = _version(parts)
            source = Source(
                source_id=source_id,
                version=version,
                path=source_id,
                kind=SourceKind.meta,
                owner=META_OWNER,
                access=access,
                tenant=tenant,
            )
            counts["documents_published"] += _publish(index, source, parts, embed, embed_model, counts)
        index.set_meta_fingerprint(f"{tenant}/{access}", fingerprint)
        counts["scopes_built"] += 1
        logger.info("meta-documents of %s/%s built from %d sources", tenant, access, sources_read)
    wanted = {meta_source_id(t, a, kind) for t, a in scopes for kind in TITLES}
    for source_id in built_before:  # read before the builds above: each of those replaced one that is in `wanted`
        if source_id not in wanted:
            index.retire_source(source_id)
            counts["documents_retired"] += 1
    for scope in set(built) - {f"{t}/{a}" for t, a in scopes}:
        index.set_meta_fingerprint(scope, None)
    return dict(counts) | {"seconds": round(time.perf_counter() - started, 2)}


def of_kind(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The meta-documents of `kind` among these (a replica's, read from PostgreSQL: `PgCatalog.meta_documents`)."""
    if kind not in TITLES:
        raise ValueError(f"unknown meta-document {kind!r}: one of {', '.join(TITLES)}")
    return [document for document in documents if meta_kind(document["source_id"]) == kind]


def read_meta(index: SqliteIndex, kind: str, scopes: list[str]) -> list[dict[str, Any]]:
    """The current meta-documents of `kind` these scopes may read, one per scope: id, access, parts."""
    if kind not in TITLES:
        raise ValueError(f"unknown meta-document {kind!r}: one of {', '.join(TITLES)}")
    found = []
    for row in index.sources():
        visible = scope_of(row["access"], row["tenant"]) in scopes
        if row["kind"] != SourceKind.meta.value or row["lifecycle"] != "current" or not visible:
            continue
        if meta_kind(row["source_id"]) != kind:
            continue
        stored = index.current_source(row["source_id"])
        if stored is not None:
            found.append(
                {
                    "source_id": row["source_id"],
                    "access": row["access"],
                    "version": row["version"],
                    "built_at": row["switched_at"],
                    "parts": [page.text for page in stored[1]],
                }
            )
    return found

"""The OpenSearch mirror of the SQLite catalog: one sync makes the cluster hold exactly what the catalog holds.

A sync reads only what changed. Every write to the catalog's chunks leaves its chunk id in the outbox
(`chunk_outbox`, tasks/index/schema.py), numbered in order; the mirror records the last number it holds, and the
largest chunk rowid there was when its sync began. A sync takes the outbox rows past that number, a batch at a
time, and sends each chunk's catalog state without asking the cluster what it holds: a current chunk written since
the last sync began (a rowid past the mark) indexed, from the stored text and vectors (nothing re-parsed or
re-embedded); every other one a partial update of its lifecycle and labels, which the cluster answers `noop` where
it has them already; a delete for what the catalog no longer holds (versions `korpus gc` and retention removed).
An update the cluster answers "document missing" (a chunk an earlier sync missed, or a rowid SQLite gave again) is
indexed then, if the catalog serves it. So its cost follows the change, not the corpus: one review decision is one
bulk of a few updates and an index refresh. (Until session 44 a multi-get of the batch's states came first: 0.027 s
of a decision's 0.142 s at 10,000 chunks, 0.091 s of 0.327 s at 1,000,000 — the part that grew most.)

Each chunk is written once. Until session 34 a new chunk was indexed `staged` and switched current by a second
write, so that a version's chunks became current together — which the catalog's per-hit check already guarantees:
a hit is served only if the catalog holds its chunk current and visible (tasks/index/catalog_check.py), and the
catalog switches a version in one transaction. While a sync is half-way, a superseded chunk the cluster still calls
current is dropped by that check, never served; the staging cost a second write of every chunk (the mirror took
1.9× as long as `helpers.bulk` of the same documents, #64).

A reconcile (`full=True`: `korpus opensearch reconcile`, the weekly `verify` refresh, and a mirror's first sync)
compares every chunk of the catalog with every document of the cluster instead — for repair, never on a request's
path. Both sides are walked in chunk id order, the catalog by keyset pages and the cluster by `search_after` pages
of one point in time, and merged as they come (`in_step`): its memory is a page of each at any corpus size.

The catalog keeps a chunk's vector only until the cluster holds it (since session 45, with KORPUS_BACKEND=opensearch:
`SqliteIndex.keep_vectors`). Once a bulk of indexed chunks landed, their vectors are dropped from the file
(`hand_off_vectors`), and a reconcile drops those of the chunks the cluster already held. A chunk the cluster lacks
later (lost behind korpus's back, or a withdrawn chunk released) is indexed with its stored text embedded again by
the configured model (`OpenSearchIndex.embedder`, checked against the catalog's): the vector the refresh gave it. A
mirror without the model raises and stays pending. The text stays in the catalog: the repair, `korpus reindex` and
the review read it. After `korpus reindex` the catalog's model is not the one whose index the alias serves: the sync
fills the new model's index from the catalog, then moves the alias to it and deletes the old one (`_moved`).

Every bulk is bounded in actions and bytes. Idempotent: a sync interrupted anywhere is completed by the next one. The
catalog generation and outbox number read before the catalog's states are recorded once the last bulk landed
(tasks/index/catalog_check.py): a change made meanwhile leaves the mirror `behind`, never marked synced.
"""

from __future__ import annotations

import copy
import fcntl
import json
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.index import catalog_check
from tasks.index.opensearch_requests import STATE_FIELDS, absent, chunk_document, index_name
from tasks.index.vector_tables import embedder_of
from tasks.text.passages import passage_text

if TYPE_CHECKING:
    from tasks.index.sqlite import SqliteIndex

BULK_BYTES = 8 * 2**20
"""A bulk request's body at most (OpenSearch refuses one over `http.max_content_length`, 100 MB by default)."""
BULK_ACTIONS = 2_000
"""Actions a bulk holds at most (an index action is two lines: its header and its document)."""
State = tuple[Any, ...]


def sync_from(cluster: Any, catalog: SqliteIndex, batch: int = 500, full: bool = False) -> dict[str, int]:
    """Indexed, updated and deleted chunk counts of one sync of `catalog` to `cluster` (an `OpenSearchIndex`, which
    calls this: not imported here, so the two modules import in one direction).

    One sync at a time per catalog (an exclusive lock on a file beside it, across processes): a reviewer's decision
    mirrored while a refresh syncs would otherwise send partial updates of the same documents at once — the
    cluster refuses one with a version conflict (409), and a sync that read the catalog earlier could land its
    older state after a later sync marked the mirror current (found by the lifecycle state machine)."""
    with open(Path(catalog.conn.filename).with_name("opensearch-sync.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        model = catalog.embedding_model()
        if model is None:
            return {"indexed": 0, "updated": 0, "deleted": 0, "compared": 0}
        serving = cluster._retrying("setup", cluster.serving)
        moving = bool(serving) and serving != [index_name(cluster.prefix, *model)]
        if not moving:
            cluster._retrying("setup", partial(cluster.ensure, *model, serving))
        # read first: a change after these leaves the mirror behind
        reached, head = catalog_check.generation(catalog.conn), catalog_check.outbox_head(catalog.conn)
        top = catalog_check.top_rowid(catalog.conn)
        since = None if full else catalog_check.synced_outbox(catalog.conn, cluster.alias)
        if moving:
            report = _moved(cluster, catalog, model, batch)
        elif since is None:
            report = _sync_all(cluster, catalog, batch)
        else:
            known = catalog_check.synced_rowid(catalog.conn, cluster.alias)
            report = _sync_changes(cluster, catalog, batch, since, head, known)
        with catalog.write_transaction():
            catalog_check.mark_synced(catalog.conn, cluster.alias, reached, head, top)
            catalog_check.prune_outbox(catalog.conn)
        if catalog.serving is not None:
            catalog.serving.mark_synced(cluster.alias, reached, head)
        return report


def _sync_all(cluster: Any, catalog: SqliteIndex, batch: int) -> dict[str, int]:
    """Every chunk of the catalog against every document of the cluster, both walked in chunk id order and merged
    (`in_step`), so memory holds a page of each, never the corpus."""
    report = {"indexed": 0, "updated": 0, "deleted": 0, "compared": 0}
    missing: dict[str, State] = {}
    actions: list[dict[str, Any]] = []
    held: list[str] = []
    for chunk_id, want, have in in_step(catalog.chunk_states_in_order(batch), cluster.states_in_order(batch)):
        report["compared"] += (want is not None) + (have is not None)
        if _lacks(want, have):
            missing[chunk_id] = want
        elif have is not None:
            updated, deleted = _switch(cluster, {chunk_id: want} if want else {}, {chunk_id: have}, actions)
            report["updated"] += updated
            report["deleted"] += deleted
            if want is not None:  # its vector is the cluster's: the catalog need not keep it
                held.append(chunk_id)
        if len(missing) >= batch:
            report["indexed"] += _index(cluster, catalog, missing)
            missing = {}
        if len(held) >= batch:
            catalog.hand_off_vectors(held)
            held = []
        if len(actions) >= 2 * BULK_ACTIONS:
            send(cluster, actions)
            actions = []
    report["indexed"] += _index(cluster, catalog, missing)
    catalog.hand_off_vectors(held)
    send(cluster, actions)
    if report["indexed"] or report["updated"] or report["deleted"]:
        _searchable(cluster)
    return report


def _moved(cluster: Any, catalog: SqliteIndex, model: tuple[str, int], batch: int) -> dict[str, int]:
    """The catalog moved to another embedding model (`korpus reindex`) while the alias serves the old model's index:
    the new model's index is filled from the catalog — every current chunk's text with its new vector — while the
    alias still serves the old one, then one alias update moves it, and the old index is deleted. Interrupted, the
    next sync fills the same index again (writes by chunk id) and moves the alias."""
    name = cluster._retrying("setup", partial(cluster.made, *model))
    building = copy.copy(cluster)
    building.alias = name  # every read and write of the walk goes to the new index itself
    report = _sync_all(building, catalog, batch)
    cluster._retrying("setup", partial(cluster.moved_to, name))
    return report


def in_step(
    catalog: Iterable[tuple[str, State]], cluster: Iterable[tuple[str, State]]
) -> Iterator[tuple[str, State | None, State | None]]:
    """(chunk id, the catalog's state or None, the cluster's state or None) for every id either holds, from two walks
    in chunk id order (a merge join: one item of each in hand)."""
    mine, theirs = iter(catalog), iter(cluster)
    want, have = next(mine, None), next(theirs, None)
    while want is not None or have is not None:
        if have is None or (want is not None and want[0] < have[0]):
            yield want[0], want[1], None
            want = next(mine, None)
        elif want is None or have[0] < want[0]:
            yield have[0], None, have[1]
            have = next(theirs, None)
        else:
            yield want[0], want[1], tuple(have[1])
            want, have = next(mine, None), next(theirs, None)


def _sync_changes(
    cluster: Any, catalog: SqliteIndex, batch: int, since: int, head: int, known: int | None
) -> dict[str, int]:
    """The chunks of the outbox rows numbered in (`since`, `head`], a batch at a time, sent without reading the
    cluster first: those written since the mirror's last sync began (a rowid past `known`) and current indexed; every
    other one its catalog state as a partial update, or a delete when the catalog no longer holds it. The cluster
    answers `noop` to an update of what it holds already, and `document_missing` to one of what it lacks: those the
    catalog serves are then indexed (a chunk the last sync missed, or a row whose rowid SQLite gave again)."""
    report = {"indexed": 0, "updated": 0, "deleted": 0, "compared": 0}
    for ids in catalog_check.changed_since(catalog.conn, since, head, batch):
        want = catalog.chunk_states_of(ids)
        new = catalog_check.inserted_after(catalog.conn, ids, known) if known is not None else set()
        fresh = {chunk_id: want[chunk_id] for chunk_id in new if _lacks(want.get(chunk_id), None)}
        report["indexed"] += _index(cluster, catalog, fresh)
        actions: list[dict[str, Any]] = []
        for chunk_id in ids:
            if chunk_id in fresh:
                continue
            if chunk_id in want:
                actions += cluster._updates([chunk_id], dict(zip(STATE_FIELDS, want[chunk_id], strict=True)))
            else:  # gone from the catalog (korpus gc, retention): gone from the cluster too
                actions.append({"delete": {"_index": cluster.alias, "_id": chunk_id}})
        items = send(cluster, actions, absent_ok=True)
        lacking = {item["_id"] for item in items if absent(item)}
        report["indexed"] += _index(cluster, catalog, {c: want[c] for c in lacking if _lacks(want[c], None)})
        report["updated"] += sum(item.get("result") == "updated" for item in items)
        report["deleted"] += sum(item.get("result") == "deleted" for item in items)
        report["compared"] += len(ids)
    if report["indexed"] or report["updated"] or report["deleted"]:
        _searchable(cluster)
    return report


def _lacks(want: State | None, have: State | None) -> bool:
    """The cluster lacks a chunk the catalog serves."""
    return have is None and want is not None and want[0] == "current"


def _searchable(cluster: Any) -> None:
    """What the sync sent becomes searchable now (a refresh of the index behind the alias)."""
    cluster._retrying("refresh", lambda: cluster.client.indices.refresh(index=cluster.alias))


def _index(cluster: Any, catalog: SqliteIndex, wanted: dict[str, State]) -> int:
    """Index these chunks in the catalog's state (`wanted`: lifecycle and labels), from their stored text and
    vectors, in bounded bulks; how many. A chunk whose vector the catalog handed to the cluster earlier (which has
    lost it since) is embedded again from its text with the catalog's model; once the bulks landed, the catalog
    drops the vectors it no longer needs (`hand_off_vectors`)."""
    stored = list(catalog.stored_chunks(list(wanted))) if wanted else []
    lacking = [s for s in stored if s.vector is None]
    again = iter(_embedded(cluster, catalog, [passage_text(s.chunk.text, s.kind) for s in lacking]) if lacking else ())
    actions: list[dict[str, Any]] = []
    for s in stored:
        vector = next(again) if s.vector is None else s.vector
        doc = chunk_document(s.chunk, s.ordinal, vector, s.kind, s.exception)
        doc.update(zip(STATE_FIELDS, wanted[s.chunk.chunk_id], strict=True))
        actions += [{"index": {"_index": cluster.alias, "_id": s.chunk.chunk_id}}, doc]
    send(cluster, actions)
    catalog.hand_off_vectors([s.chunk.chunk_id for s in stored])
    return len(stored)


def _embedded(cluster: Any, catalog: SqliteIndex, texts: list[str]) -> Any:
    """Vectors for these chunk texts again, from the cluster's embedder (`OpenSearchIndex.embedder`, the configured
    model, checked against the catalog's)."""
    return embedder_of(catalog, cluster.embedder).embed_passages(texts)


def _switch(
    cluster: Any, want: dict[str, State], have: dict[str, State], actions: list[dict[str, Any]]
) -> tuple[int, int]:
    """The actions (added to `actions`) that make what the cluster holds (`have`) the catalog's state (`want`):
    updates where labels or lifecycle differ, deletes of what the catalog no longer holds; (updated, deleted) — a
    chunk a sync before this release left `staged` and this one makes current is not counted as updated."""
    updated = deleted = 0
    for chunk_id, state in have.items():
        target = want.get(chunk_id)
        if target is None:  # gone from the catalog (korpus gc, retention): gone from the cluster too
            actions.append({"delete": {"_index": cluster.alias, "_id": chunk_id}})
            deleted += 1
        elif tuple(state) != tuple(target):
            actions += cluster._updates([chunk_id], dict(zip(STATE_FIELDS, target, strict=True)))
            updated += state[0] != "staged"
    return updated, deleted


def bulks(
    actions: Iterable[dict[str, Any]], max_bytes: int = BULK_BYTES, max_actions: int = BULK_ACTIONS
) -> Iterator[str]:
    """`actions` as bulk request bodies (newline-delimited JSON, each line serialized once) of at most `max_bytes`
    and `max_actions` actions, never cut between an action and its document (an `index` or `update` header is
    followed by its body line; a `delete` stands alone)."""
    current: list[str] = []
    size = count = 0
    pending = iter(actions)
    for header in pending:
        item = [header] if "delete" in header else [header, next(pending)]
        lines = [json.dumps(line, ensure_ascii=False) for line in item]
        weight = sum(len(line.encode()) + 1 for line in lines)
        if current and (size + weight > max_bytes or count + 1 > max_actions):
            yield "\n".join(current) + "\n"
            current, size, count = [], 0, 0
        current += lines
        size += weight
        count += 1
    if current:
        yield "\n".join(current) + "\n"


def send(cluster: Any, actions: list[dict[str, Any]], absent_ok: bool = False) -> list[dict[str, Any]]:
    """`actions` in bounded bulks; their items, in order (`absent_ok`: an update of a document the cluster lacks
    comes back as its item, not raised)."""
    return [item for body in bulks(actions) for item in cluster._bulk(body, absent_ok=absent_ok)]

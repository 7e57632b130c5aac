"""The OpenSearch mirror of the SQLite catalog: one sync makes the cluster hold exactly what the catalog holds.

The current chunks the cluster lacks are indexed as `staged`, from the stored text and vectors (nothing re-parsed or
re-embedded), 500 to a bulk; then one bulk of partial updates switches lifecycles and labels, and deletes what the
catalog no longer holds (versions `korpus gc` and retention removed). Idempotent: a sync interrupted anywhere is
completed by the next one. The catalog generation read before the catalog's states is recorded once the last bulk
landed (tasks/index/catalog_check.py): a change made meanwhile leaves the mirror `behind`, never marked synced.
"""

from __future__ import annotations

import fcntl
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.index import catalog_check
from tasks.index.opensearch_requests import chunk_document

if TYPE_CHECKING:
    from tasks.index.sqlite import SqliteIndex


def sync_from(cluster: Any, catalog: SqliteIndex, batch: int = 500) -> dict[str, int]:
    """Indexed, updated and deleted chunk counts of one sync of `catalog` to `cluster` (an `OpenSearchIndex`, which
    calls this: not imported here, so the two modules import in one direction).

    One sync at a time per catalog (an exclusive lock on a file beside it, across processes): a reviewer's decision
    mirrored while a refresh syncs would otherwise send partial updates of the same documents at once — the
    cluster refuses one with a version conflict (409), and a sync that read the catalog earlier could land its
    older state after a later sync marked the mirror current (found by the lifecycle state machine)."""
    with open(Path(catalog.conn.filename).with_name("opensearch-sync.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return _sync(cluster, catalog, batch)


def _sync(cluster: Any, catalog: SqliteIndex, batch: int) -> dict[str, int]:
    model = catalog.embedding_model()
    if model is None:
        return {"indexed": 0, "updated": 0, "deleted": 0}
    cluster._retrying("setup", partial(cluster.ensure, *model))
    reached = catalog_check.generation(catalog.conn)  # read first: a change after it leaves the mirror behind
    want = catalog.chunk_states()
    have = cluster.states()
    missing = [c for c, state in want.items() if state[0] == "current" and c not in have]
    for start in range(0, len(missing), batch):
        part = missing[start : start + batch]
        actions: list[dict[str, Any]] = []
        for stored in catalog.stored_chunks(part):
            doc = chunk_document(stored.chunk, stored.ordinal, stored.vector, stored.kind, stored.exception)
            actions += [{"index": {"_index": cluster.alias, "_id": stored.chunk.chunk_id}}, doc]
        cluster._bulk(actions)
        for chunk_id in part:
            have[chunk_id] = ("staged", None, None, None, None)
    switch: list[dict[str, Any]] = []
    staged, updated, deleted = set(missing), 0, 0
    for chunk_id, state in have.items():
        target = want.get(chunk_id)
        if target is None:  # gone from the catalog (korpus gc, retention): gone from the cluster too
            switch.append({"delete": {"_index": cluster.alias, "_id": chunk_id}})
            deleted += 1
        elif tuple(state) != target:  # labels or lifecycle moved, or just staged above
            lifecycle, access, owner, tenant, exception = target
            switch += cluster._updates(
                [chunk_id],
                {"lifecycle": lifecycle, "access": access, "owner": owner, "tenant": tenant, "exception": exception},
            )
            updated += chunk_id not in staged
    cluster._bulk(switch, refresh="wait_for")
    with catalog.write_transaction():
        catalog_check.mark_synced(catalog.conn, cluster.alias, reached)
    return {"indexed": len(missing), "updated": updated, "deleted": deleted}

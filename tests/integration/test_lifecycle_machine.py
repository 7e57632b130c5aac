"""The access and lifecycle guarantees as invariants over random sequences of operations (a hypothesis
`RuleBasedStateMachine`): files written, changed and removed — one of them a letter whose attachment is a child
source under the letter's access, or under a manifest rule naming children —, a file in no encoding korpus reads
(a version refused as a whole), manifest relabels to another access rule or another tenant, refreshes, reviewers
with random scopes (of two tenants) releasing, rejecting, editing and re-OCR'ing whatever the queue holds, and a
decision running while a refresh does. After every step:

- no caller sees a chunk outside its scopes — on search (bm25, dense, hybrid), exact search and the review queue —
  judged by the model's own record (#46 item 7): the manifest it wrote, the bytes it wrote and what was on disk at
  the last refresh, the decisions it saw made; never by the catalog's rows (which are checked against it too);
- no superseded or withdrawn chunk is served;
- every current version's chunks are cut from its stored pages, and a version is current only for bytes a refresh
  read.

A second run turns the meta-documents and `quarantine_whole_document` on, with a scan one of whose pages OCR reads
nothing (its document refused whole at every version; its items must follow relabels like any). The model found
two faults the catalog-judged machine could not: a changed file refused as a whole kept serving its old version under
labels the manifest no longer gave it (now, #61 item 3, the old version stays served until a new one is in — under
the manifest's labels: the model says which version and scope), and a refresh's `reconcile` failed with `database
is locked` when a decision committed during it (every write now takes the lock first: `SqliteIndex.write_transaction`).

It runs over both backends with the same assertions: the embedded SQLite index, and (KORPUS_BACKEND=opensearch) the
session's real OpenSearch node mirroring the catalog, with cluster outages among the steps (a proxy in front of the
node goes down and comes back: syncs of refreshes and review decisions fail meanwhile and the mirror falls behind).
On the cluster, searches are answered by the node itself — whatever it holds, stale or not — through the backend
korpus serves with (every hit checked against the catalog).

The refresh here is the flow's own task functions (`.fn`: access-changes, read-source, chunk-and-gate, publish,
catalog-changes, and the mirror's syncs) run in order without Prefect and Dask, so 200 sequences fit in CI time; the
Prefect flow is the same calls fanned out
(flows/refresh_stream.py), and `test_relabel_then_release_through_the_cli` walks the reported sequence through the
real CLI. Vectors are the real embedding model's, memoised per text.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
import uuid
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pymupdf
import pytest
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import flows.refresh_tasks as refresh_tasks
from corpora.sample_archive import typeset_pdf
from flows.after_documents import build_meta_documents
from korpus.core.datamodel import META_PREFIX, scope_of, scope_sql
from korpus.core.model_store import embed_model_path
from korpus.core.settings import Settings
from tasks.index.opensearch import mirror_or_pending, opensearch_index
from tasks.index.pg_catalog import CatalogUnavailable
from tasks.index.sqlite import SqliteIndex
from tasks.receive import plan_refresh
from tasks.retrieval.embedding import shared_embedder
from tasks.retrieval.retriever import retrieve
from tasks.review.actions import Action, ReviewError, apply_decision
from tasks.review.queue import QueueQuery, queue_page
from tasks.runtime.reader_child import stop_children

from .fault_proxy import Faults, fault_proxy
from .tcp_proxy import Cut, proxied_url, tcp_proxy

pytestmark = pytest.mark.integration

SCOPES = ("public", "hr", "finance")
TENANTS = ("default", "acme")
PRINCIPALS = (("public",), ("hr",), ("public", "hr"), ("finance",), SCOPES, ("acme/public",), ("public", "acme/hr"))
NAMES = ("приказ.txt", "записка.txt", "отдел/протокол.txt", "почта/письмо.eml")
LETTER = "почта/письмо.eml"  # a container: its attachment is a child source that takes the letter's access
ATTACHMENT = LETTER + " › вложение.txt"
CHILD_RULE = LETTER + " › *.txt"  # a manifest rule naming the attachment: it overrides what the letter gives
UNREADABLE = "<bytes no encoding reads>"  # written as binary: the version is refused as a whole (unreadable-file)
SCAN = "скан.pdf"  # the whole-document variant's: a typeset page and a page OCR reads nothing on (a page item)
GARBAGE = "M]heh\\guc dh^_dk Cl>opMa no KHA M]heh\\guc dh^_dk Cl>opMa no KHA M]heh\\guc dh^_dk Cl>opMa no KHA."
CONTENTS = (
    "Приказ о премировании сотрудников отдела снабжения.",
    "Приказ об отпусках сотрудников на второй квартал.\n\nСлужебная записка о ремонте крыши склада.",
    f"Протокол заседания комиссии по приёмке насосов.\n\n{GARBAGE}",
    f"{GARBAGE}\n\nПриказ о переводе сотрудника в отдел кадров.",
    UNREADABLE,
)
QUERIES = ("приказ сотрудников", "протокол комиссии", "записка склада")


def scan(content: str) -> bytes:
    """A PDF of the content's paragraphs, then a page with only a frame drawn on it: OCR finds no text there, so
    the document has a page item — kept out whole under `quarantine_whole_document`."""
    pdf = pymupdf.open(
        stream=typeset_pdf(
            [[("p", part)] for part in content.split("\n\n") if part != UNREADABLE] or [[("p", "Пусто.")]]
        )
    )
    pdf.new_page().draw_rect(pymupdf.Rect(60, 60, 500, 700))
    pdf.set_metadata({})
    return pdf.tobytes(no_new_id=True)


def raw(content: str) -> bytes:
    return b"\x00\xff\xfe\x01" * 300 if content == UNREADABLE else content.encode("utf-8")


def letter(content: str) -> bytes:
    """A letter whose attachment holds the content (bytes fixed: the boundary is set, not random)."""
    message = MIMEMultipart(boundary="korpus-machine")
    message["From"], message["To"], message["Subject"] = "kadry@example.ru", "sklad@example.ru", "Приказ по складу"
    message.attach(MIMEText("Направляю приказ сотрудников во вложении.", "plain", "utf-8"))
    part = MIMEApplication(raw(content))
    part.add_header("Content-Disposition", "attachment", filename=("utf-8", "", "вложение.txt"))
    message.attach(part)
    return message.as_bytes()


class Vectors:
    """The real embedder, each text embedded once across every sequence."""

    def __init__(self, settings: Settings) -> None:
        self.embedder = shared_embedder(str(embed_model_path(settings)))
        self.passages: dict[str, np.ndarray] = {}
        self.queries: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.passages]
        if todo:
            self.passages.update(zip(todo, self.embedder.embed_passages(todo), strict=True))
        return np.asarray([self.passages[t] for t in texts], dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        if text not in self.queries:
            self.queries[text] = self.embedder.embed_query(text)
        return self.queries[text]


def mirror(settings: Settings) -> None:
    """The flow's `sync-opensearch` (flows/after_documents.py): a cluster that stays down leaves the mirror pending."""
    if settings.backend != "opensearch":
        return
    with SqliteIndex(settings.index_path) as index:
        mirror_or_pending(settings, index, None)


def refresh_inline(root: Path, settings: Settings, vectors: Vectors) -> None:
    """One refresh through the flow's task functions, in the flow's order (flows/corpus_refresh.py); its reading
    children stopped at its end, as the flow stops them."""
    try:
        _refresh_inline(root, settings, vectors)
    finally:
        stop_children()


def _refresh_inline(root: Path, settings: Settings, vectors: Vectors) -> None:
    indexed, refused, listings = refresh_tasks.read_catalog.fn(settings)
    plan = plan_refresh(refresh_tasks.discover.fn(str(root), settings), indexed, refused, listings)
    refresh_tasks.apply_access_changes.fn(plan, settings)
    if plan.relabel or plan.removed or plan.rejected:
        mirror(settings)
    problems = list(plan.rejected)
    if plan.to_process:
        outcomes = refresh_tasks.read_own_text.fn(plan.to_process, settings)
        outcomes = [_with_ocr(s, o, settings) for s, o in zip(plan.to_process, outcomes, strict=True)]
        group = []
        for s, o in zip(plan.to_process, outcomes, strict=True):
            if settings.quarantine_whole_document and any(p.page for p in o.problems):  # as refresh_stream does
                problems += [*o.problems, refresh_tasks.whole_document(s, o)]
                continue
            group.append(
                refresh_tasks.Ready(s, o, quarantined_pages=any(p.page for p in o.problems), problems=list(o.problems))
            )
        cut, refused_items = refresh_tasks.chunk_and_gate.fn(group, settings, None)
        for ready, (count, passed) in zip(group, cut, strict=True):
            ready.chunks, ready.passed = count, passed
            ready.problems += [i for i in refused_items if i.source_id == ready.source.source_id]
        published = [r for r in group if r.publish]
        chunks = [c for r in published for c in r.passed]
        refresh_tasks.publish.fn(published, vectors.embed([c.text for c in chunks]), settings)
        problems += [item for r in group if not r.publish for item in r.problems]
    refresh_tasks.apply_catalog_changes.fn(plan, problems, settings)
    if settings.meta_documents:
        build_meta_documents.fn(settings)
    mirror(settings)


def _with_ocr(source: Any, outcome: Any, settings: Settings) -> Any:
    """A PDF's pages without a text layer through the flow's OCR task, merged as refresh_stream merges them."""
    for page in outcome.ocr_pending:
        read = refresh_tasks.ocr_page.fn(source, page, settings, layer=outcome.flagged.get(page))
        outcome.pages += read.pages
        outcome.problems += read.problems
    outcome.ocr_pending = []
    outcome.pages.sort(key=lambda p: p.page or 0)
    return outcome


class Archive(RuleBasedStateMachine):
    vectors: Vectors
    names: tuple[str, ...] = NAMES
    options: ClassVar[dict[str, Any]] = {}
    """Settings the sequence runs with besides the defaults (the meta-documents and whole-document variant)."""
    cluster: tuple[str, str, Faults] | None = None
    """(the node's URL, the fault proxy's URL, the proxy's faults) for the OpenSearch run; None: SQLite alone."""
    catalog_url: str | None = None
    """With `cluster`: the catalog's serving part on this PostgreSQL (KORPUS_CATALOG_URL) — the refreshes and
    decisions write through it, and every search's hits are checked there instead of in the file."""
    catalog_cut: Cut | None = None
    """With `catalog_url`: the switch of the TCP proxy `catalog_url` goes through (PostgreSQL's outages)."""
    refused_searches: ClassVar[int] = 0
    """Searches refused while PostgreSQL was down (the test asserts some were: the outage met hits to check)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="korpus-machine-"))
        self.root = self.dir / "archive"
        self.root.mkdir()
        self.settings = Settings(data=self.dir / "data", meta_documents=False).model_copy(update=self.options)
        if self.cluster is not None:
            node, proxy, self.faults = self.cluster
            self.faults.down = False
            if self.catalog_cut is not None:
                self.catalog_cut.set_down(False)
            prefix = f"m{uuid.uuid4().hex[:10]}"
            self.settings = self.settings.model_copy(
                update={
                    "backend": "opensearch",
                    "opensearch_url": proxy,
                    "opensearch_prefix": prefix,
                    "retry_attempts": 1,
                    "retry_backoff": 0.0,
                }
            )
            if self.catalog_url is not None:
                self.settings = self.settings.model_copy(update={"catalog_url": self.catalog_url})
            # searches ask the node itself: whatever it holds, through the backend korpus serves with
            self.serving = self.settings.model_copy(update={"opensearch_url": node})
            self.cluster_backend = opensearch_index(self.serving)
        self.labels: dict[str, tuple[str, str]] = {}  # manifest rules: source id → (access, tenant)
        self.child_access: str | None = None  # the rule naming the letter's attachment, when one is written
        self.files: dict[str, str] = {}  # what is on disk
        self.read: dict[str, tuple[str, str]] = {}  # at the last refresh: source id → (sha256, scope)
        self.on_disk: dict[str, str] = {}  # at the last refresh: file → what the model wrote in it
        self.served_text: dict[str, str] = {}  # file (or the attachment) → its last readable content a refresh read
        self.withdrawn: set[str] = set()  # chunk ids a reviewer rejected while they were served
        self.refreshed = False
        self._manifest()

    def teardown(self) -> None:
        if self.cluster is not None:
            if self.catalog_url is not None:
                self.cluster_backend.catalog.close()
            client = self.cluster_backend.client
            client.indices.delete(index=f"{self.settings.opensearch_prefix}-chunks-*", ignore=[404])
            client.indices.delete_index_template(name=f"{self.settings.opensearch_prefix}-chunks", ignore=[404])
        shutil.rmtree(self.dir, ignore_errors=True)

    def searcher(self, index: SqliteIndex) -> Any:
        return index.searcher if self.cluster is None else self.cluster_backend

    def _manifest(self) -> None:
        rules: list[dict[str, str]] = []
        for name, (access, tenant) in sorted(self.labels.items()):
            rules.append({"match": name, "access": access, **({"tenant": tenant} if tenant != "default" else {})})
        if self.child_access is not None:
            rules.append({"match": CHILD_RULE, "access": self.child_access})
        (self.root / "korpus.yaml").write_text(
            yaml.safe_dump({"defaults": {"owner": "Архив", "access": "public"}, "rules": rules}, allow_unicode=True),
            encoding="utf-8",
        )

    # --- rules: what users do -------------------------------------------------------------------------------

    @initialize(contents=st.lists(st.sampled_from(CONTENTS), min_size=len(NAMES) + 1, max_size=len(NAMES) + 1))
    def indexed_archive(self, contents: list[str]) -> None:
        """Every sequence starts from an archive refreshed once (the later steps are what is random)."""
        for name, content in zip(self.names, contents, strict=False):
            self.write_file(name, content)
        self.refresh()

    @rule(name=st.sampled_from((*NAMES, SCAN)), content=st.sampled_from(CONTENTS))
    def write_file(self, name: str, content: str) -> None:
        if name not in self.names:  # the scan is the whole-document variant's
            return
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(letter(content) if name == LETTER else scan(content) if name == SCAN else raw(content))
        self.files[name] = content

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def remove_file(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.files)))
        (self.root / name).unlink()
        del self.files[name]

    @rule(name=st.sampled_from((*NAMES, SCAN)), access=st.sampled_from(SCOPES), tenant=st.sampled_from(TENANTS))
    def relabel(self, name: str, access: str, tenant: str = "default") -> None:
        self.labels[name] = (access, tenant)
        self._manifest()

    @rule(access=st.one_of(st.none(), st.sampled_from(SCOPES)))
    def relabel_the_attachment(self, access: str | None) -> None:
        """A rule naming the letter's attachment (` › `) gives it an access of its own; None takes the rule away."""
        self.child_access = access
        self._manifest()

    @precondition(lambda self: self.cluster is not None)
    @rule(down=st.booleans())
    def cluster_outage(self, down: bool) -> None:
        """The cluster goes down (every request korpus sends is dropped) or comes back."""
        self.faults.down = down

    @precondition(lambda self: self.cluster is not None)
    @rule(name=st.sampled_from(NAMES), access=st.sampled_from(SCOPES), remove=st.booleans())
    def relabel_or_remove_while_the_cluster_is_down(self, name: str, access: str, remove: bool) -> None:
        """The case an outage makes dangerous, drawn as one step: the cluster goes down, a file moves to another
        scope (or is removed) and a refresh runs; the cluster keeps what it had."""
        self.faults.down = True
        if remove and name in self.files:
            (self.root / name).unlink()
            del self.files[name]
        else:
            self.relabel(name, access)
        self.refresh()

    @precondition(lambda self: self.catalog_cut is not None)
    @rule(name=st.sampled_from(NAMES), access=st.sampled_from(SCOPES), remove=st.booleans())
    def relabel_or_remove_while_the_catalog_is_down(self, name: str, access: str, remove: bool) -> None:
        """PostgreSQL goes (its connections cut, new ones refused), a file moves to another scope or is removed,
        and a refresh runs: a write it cannot narrow on the server is refused whole, never made in the file alone.
        Meanwhile every search is refused as the catalog being unavailable — never an unchecked hit. The server
        comes back and the next refresh completes what the refused one did not: the invariants after this step."""
        assert self.catalog_cut is not None
        self.catalog_cut.set_down(True)
        try:
            if remove and name in self.files:
                (self.root / name).unlink()
                del self.files[name]
            else:
                self.relabel(name, access)
            with contextlib.suppress(CatalogUnavailable):  # a refresh with nothing to narrow may complete
                refresh_inline(self.root, self.settings, self.vectors)
            for scopes in PRINCIPALS:
                for q in QUERIES:
                    try:
                        hits = retrieve(self.cluster_backend, q, None, list(scopes), k=50, mode="bm25")
                    except CatalogUnavailable:
                        type(self).refused_searches += 1
                        continue
                    assert not hits, hits  # the cluster found nothing to check: nothing unchecked is served
        finally:
            self.catalog_cut.set_down(False)
        self.refresh()

    @rule()
    def refresh(self) -> None:
        refresh_inline(self.root, self.settings, self.vectors)
        self._was_refreshed()

    def _was_refreshed(self) -> None:
        """The model's own record of what a refresh read: each file's bytes and the scope the manifest gave it."""
        self.refreshed = True
        self.read, self.on_disk = {}, dict(self.files)
        # a version refused as a whole (no encoding reads it) leaves the file's previous one served (#61 item 3)
        present = {ATTACHMENT if name == LETTER else name: text for name, text in self.files.items()}
        self.served_text = {
            name: text if text != UNREADABLE else self.served_text[name]
            for name, text in present.items()
            if text != UNREADABLE or name in self.served_text
        }
        for name, text in self.files.items():
            access, tenant = self.labels.get(name, ("public", "default"))
            if name == LETTER:  # the attachment: the letter's labels, its access from a rule naming it if any
                self.read[name] = (hashlib.sha256(letter(text)).hexdigest(), scope_of(access, tenant))
                attachment = scope_of(self.child_access or access, tenant)
                self.read[ATTACHMENT] = (
                    hashlib.sha256(raw(self.served_text.get(ATTACHMENT, text))).hexdigest(),
                    attachment,
                )
            else:
                written = scan(text) if name == SCAN else raw(self.served_text.get(name, text))
                self.read[name] = (hashlib.sha256(written).hexdigest(), scope_of(access, tenant))

    def _scope(self, source_id: str, version: str | None) -> str | None:
        """The scope the model gives a version: the manifest's at the last refresh, for the bytes it read then;
        None for a version the model did not see read (an older one, its labels the catalog's business)."""
        sha, scope = self.read.get(source_id, (None, None))
        return scope if sha == version else None

    @precondition(lambda self: self.refreshed)
    @rule(
        data=st.data(),
        action=st.sampled_from([Action.release, Action.reject, Action.edit, Action.reocr, Action.retry]),
        reviewer=st.sampled_from(PRINCIPALS),
    )
    def decide(self, data: st.DataObject, action: Action, reviewer: tuple[str, ...]) -> None:
        self._decide(data, action, reviewer, [dict(self.read)])

    @precondition(lambda self: self.refreshed)
    @rule(
        data=st.data(),
        action=st.sampled_from([Action.release, Action.reject, Action.edit, Action.retry]),
        reviewer=st.sampled_from(PRINCIPALS),
    )
    def decide_while_a_refresh_runs(self, data: st.DataObject, action: Action, reviewer: tuple[str, ...]) -> None:
        """The review page in use while a refresh runs: the refresh in another thread (its own connections), the
        decision here; it lands before or after the refresh's writes, or is refused — under the scope the model gave
        the item before the refresh or after it, never another."""
        before, failed = dict(self.read), []

        def refresh() -> None:
            try:
                refresh_inline(self.root, self.settings, self.vectors)
            except BaseException:  # the assertion below names it, with where
                import traceback

                failed.append(traceback.format_exc())

        thread = threading.Thread(target=refresh)
        thread.start()
        try:
            self._was_refreshed()  # what the refresh reads: the model's record after it
            self._decide(data, action, reviewer, [before, dict(self.read)])
        finally:
            thread.join()
        assert not failed, failed[0]

    def _decide(self, data: st.DataObject, action: Action, reviewer: tuple[str, ...], records: list[dict]) -> None:
        with SqliteIndex(self.settings.index_path) as index:
            items = index.quarantine_items()
            if not items:
                return
            item = index.quarantine_item(data.draw(st.sampled_from([i["item_id"] for i in items])))
            served = {c["chunk_id"] for c in index.source_chunks(item["source_id"])}
            catalog = index.source_version(item["source_id"], item["source_version"])
        assert item is not None
        # the model's scope for a version it saw read; an older version's is the catalog's (or the item's own)
        scopes = {
            r[item["source_id"]][1] for r in records if r.get(item["source_id"], (None,))[0] == item["source_version"]
        }
        if not scopes:
            scopes = {scope_of(catalog["access"], catalog["tenant"]) if catalog else item["scope"]}
        text = "Приказ, переписанный рецензентом." if action is Action.edit else None
        try:
            apply_decision(item["item_id"], action, "рецензент", "", self.settings, text=text, scopes=list(reviewer))
        except ReviewError:
            return
        assert scopes & set(reviewer), f"a reviewer with {reviewer} decided an item of scope {scopes}"
        if action is Action.reject and item["chunk"] is not None and item["chunk"].chunk_id in served:
            self.withdrawn.add(item["chunk"].chunk_id)
        if action is Action.release and item["chunk"] is not None:
            self.withdrawn.discard(item["chunk"].chunk_id)

    # --- invariants: what must hold after every step ---------------------------------------------------------

    @invariant()
    def nobody_sees_beyond_their_scopes(self) -> None:
        if not self.settings.index_path.is_file():
            return
        with SqliteIndex(self.settings.index_path) as index:
            current = {s["source_id"]: s for s in index.sources() if s["lifecycle"] == "current"}
            for scopes in PRINCIPALS:
                for q in QUERIES:
                    for mode in ("bm25", "dense", "hybrid"):
                        vector = None if mode == "bm25" else self.vectors.query(q)
                        for hit in retrieve(self.searcher(index), q, vector, list(scopes), k=50, mode=mode):
                            scope = self._served_scope(hit["source_id"], hit["source_version"])
                            assert scope is not None and scope in scopes, (hit, self.read, scopes)
                            row = current.get(hit["source_id"])  # the catalog agrees with the model
                            assert row is not None and row["version"] == hit["source_version"], hit["chunk_id"]
                            assert scope_of(row["access"], row["tenant"]) == scope, (row, scope)
                            assert hit["chunk_id"] not in self.withdrawn, hit["chunk_id"]
                    found = self.searcher(index).exact_occurrences("приказ", list(scopes), limit=500)
                    for occurrence in found["occurrences"]:
                        sid = occurrence["source_id"]
                        assert self._served_scope(sid, current[sid]["version"]) in scopes, (occurrence, scopes)
                queue = queue_page(index, QueueQuery(scopes=list(scopes), status="all", per_page=500))
                for item in queue.items:  # an item of a version the model saw read has the model's scope
                    scope = self._scope(item["source_id"], item["source_version"])
                    assert scope is None or scope in scopes, (item, scopes, self.read)
                    if scope is None:  # an older version's: the catalog row's labels, else the item's own
                        row = index.source_version(item["source_id"], item["source_version"])
                        assert row is None or scope_of(row["access"], row["tenant"]) in scopes, (item, scopes)

    def _served_scope(self, source_id: str, version: str) -> str | None:
        """The scope the model says a served version has: a file's from the manifest at the last refresh; a
        meta-document's from its id (one per scope, built only from that scope's current sources)."""
        if source_id.startswith(META_PREFIX):
            scope = source_id[len(META_PREFIX) :].rsplit("/", 1)[0]
            return scope if scope in {s for _, s in self.read.values()} else None
        return self._scope(source_id, version)

    @invariant()
    def nothing_readable_is_lost(self) -> None:
        """Every file the model wrote in readable text is served after a refresh (its clean paragraphs pass the gate),
        unless the refresh keeps a document with a failed page out whole (`quarantine_whole_document`)."""
        if not self.refreshed or self.settings.quarantine_whole_document:
            return
        with SqliteIndex(self.settings.index_path) as index:
            current = {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}
        for name, text in self.on_disk.items():  # what was on disk when the last refresh ran
            if name == LETTER:
                assert name in current, name
                assert (ATTACHMENT in current) == (ATTACHMENT in self.served_text), (ATTACHMENT, text[:20])
            else:  # an unreadable version keeps the one read before it served (the old stays until the new is in)
                assert (name in current) == (name in self.served_text), (name, text[:20])

    @invariant()
    def only_current_versions_are_served(self) -> None:
        if not self.settings.index_path.is_file():
            return
        with SqliteIndex(self.settings.index_path) as index:
            stray = index.conn.execute(
                "SELECT c.chunk_id FROM chunks c JOIN chunk_visibility v ON v.rowid = c.rowid WHERE v.visible IS NOT "
                "NULL AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.source_id = c.source_id AND s.version = "
                "c.source_version AND s.lifecycle = 'current' AND s.access = c.access AND "
                f"{scope_sql('s.tenant', 's.access')} = v.visible)"
            ).fetchall()
            assert not stray, stray
            for source_id, row in {
                s["source_id"]: s
                for s in index.sources()
                if s["lifecycle"] == "current" and not s["source_id"].startswith(META_PREFIX)
            }.items():
                # a version is current only for the bytes the last refresh read, and only for a file still there
                assert self.read.get(source_id, (None,))[0] == row["version"], (source_id, self.read.get(source_id))

    @invariant()
    def chunks_come_from_their_pages(self) -> None:
        if not self.settings.index_path.is_file():
            return
        with SqliteIndex(self.settings.index_path) as index:
            for source_id in {s["source_id"] for s in index.sources() if s["lifecycle"] == "current"}:
                _source, pages = index.current_source(source_id)  # type: ignore[misc]
                stored = "\n".join(p.text for p in pages)
                for chunk in index.source_chunks(source_id):
                    assert chunk["body"].strip() and chunk["body"].strip() in stored, (source_id, chunk["body"])


@pytest.fixture(scope="module")
def vectors(models: dict[str, Path]) -> Vectors:
    return Vectors(Settings())


def test_access_and_lifecycle_hold_over_random_sequences(vectors: Vectors, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine on SQLite alone: 120 sequences of 10 steps in `make test` (200 until session 36, ~300 s: the
    suite reached its 30-minute line; the cluster and PostgreSQL runs below add outages to the same steps), more
    with MACHINE_EXAMPLES."""
    monkeypatch.setattr(refresh_tasks.events, "sources_indexed", lambda *_a, **_k: None)  # no Prefect run here
    monkeypatch.setattr(Archive, "vectors", vectors, raising=False)
    monkeypatch.setattr(
        Archive.TestCase,
        "settings",
        settings(
            max_examples=int(os.environ.get("MACHINE_EXAMPLES", "120")),
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    Archive.TestCase().runTest()


def test_access_holds_with_meta_documents_and_whole_document_quarantine(
    vectors: Vectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same machine with the meta-documents on (one set per scope, found by search like any source: their scope,
    from their id, must be the caller's) and `quarantine_whole_document` on, with a scan whose second page OCR
    reads nothing: that document is refused whole at every version, and its items follow every relabel. Fewer
    sequences: each refresh builds the meta-documents and OCRs the scan's page when it changed."""
    monkeypatch.setattr(refresh_tasks.events, "sources_indexed", lambda *_a, **_k: None)
    monkeypatch.setattr(Archive, "vectors", vectors, raising=False)
    monkeypatch.setattr(Archive, "names", (*NAMES, SCAN))
    monkeypatch.setattr(Archive, "options", {"meta_documents": True, "quarantine_whole_document": True})
    monkeypatch.setattr(
        Archive.TestCase,
        "settings",
        settings(
            max_examples=int(os.environ.get("MACHINE_EXAMPLES", "10")),
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    Archive.TestCase().runTest()


def _on_the_cluster(
    vectors: Vectors,
    opensearch_url: str,
    monkeypatch: pytest.MonkeyPatch,
    examples: int,
    catalog: tuple[str, Cut] | None = None,
) -> None:
    """The machine on the session's node behind a fault proxy (cluster outages among the steps), `examples`
    sequences of 10 steps; with `catalog` (a URL through a TCP proxy and the proxy's switch), the catalog's serving
    part on that PostgreSQL, its outages among the steps too."""
    monkeypatch.setattr(refresh_tasks.events, "sources_indexed", lambda *_a, **_k: None)
    monkeypatch.setattr(Archive, "vectors", vectors, raising=False)
    monkeypatch.setattr(Archive, "catalog_url", catalog and catalog[0])
    monkeypatch.setattr(Archive, "catalog_cut", catalog and catalog[1])
    monkeypatch.setattr(Archive, "refused_searches", 0)
    monkeypatch.setattr(
        Archive.TestCase,
        "settings",
        settings(
            max_examples=examples,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    faults = Faults(path="/")
    with fault_proxy(opensearch_url, faults) as proxy:
        monkeypatch.setattr(Archive, "cluster", (opensearch_url, proxy, faults))
        Archive.TestCase().runTest()


@pytest.mark.opensearch
def test_access_and_lifecycle_hold_on_the_opensearch_mirror_through_outages(
    vectors: Vectors, opensearch_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same machine and invariants with KORPUS_BACKEND=opensearch on the real node, outages among the steps.
    Fewer sequences than on SQLite: each sync waits for the cluster's refresh (`refresh=wait_for`, up to 1 s)."""
    _on_the_cluster(vectors, opensearch_url, monkeypatch, examples=25)


@pytest.mark.opensearch
def test_access_and_lifecycle_hold_with_the_check_on_postgres(
    vectors: Vectors, opensearch_url: str, catalog_url: str, postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same machine and invariants on PostgreSQL + OpenSearch (#63): refreshes and reviewers' decisions write
    through the catalog's serving part on the session's PostgreSQL, and every search's hits are checked there — the
    answers korpus serve gives without a file. Outages of the cluster and of PostgreSQL (through a TCP proxy that
    cuts every connection) are among the steps; the label machine (tests/integration/test_pg_catalog.py) also cuts
    the server between a write's narrowing and its widening."""
    cut = Cut()
    with tcp_proxy(postgres_server.port, cut) as port:
        _on_the_cluster(vectors, opensearch_url, monkeypatch, examples=8, catalog=(proxied_url(catalog_url, port), cut))
    assert Archive.refused_searches > 0  # searches met the outage with hits to check, and were refused


def test_relabel_then_release_through_the_cli(models: dict[str, Path], tmp_path: Path) -> None:
    """The reported leak, as a user walks it: a public file with a chunk the gate refused; the manifest moves it to
    `hr`; a refresh relabels it; a reviewer releases the open item; a default-scope search must not find it."""
    from typer.testing import CliRunner

    from korpus.apps.cli import app as cli

    root, data = tmp_path / "archive", tmp_path / "data"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "записка.txt").write_text(CONTENTS[3], encoding="utf-8")
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(cli, [*args, "--data", str(data)])
        assert result.exit_code == 0, result.output
        return result.stdout

    ok("refresh", "--root", str(root))
    (root / "korpus.yaml").write_text(
        "defaults:\n  owner: Архив\n  access: public\nrules:\n  - match: записка.txt\n    access: hr\n",
        encoding="utf-8",
    )
    ok("refresh", "--root", str(root))
    with SqliteIndex(data / "korpus.db") as index:
        (item,) = [i for i in index.quarantine_items("open") if i["chunk_id"]]
        assert index.quarantine_item(item["item_id"])["access"] == "hr"
        queue = queue_page(index, QueueQuery(scopes=["public"], status="all"))
        assert not queue.items and queue.total == 0  # a public-only reviewer does not see it
    with pytest.raises(ReviewError):
        apply_decision(item["item_id"], Action.release, "рецензент", "", Settings(data=data), scopes=["public"])
    ok("review", "release", item["item_id"], "--reviewer", "рецензент")
    import json

    public = json.loads(ok("search", "M]heh guc", "--mode", "bm25", "--json", "-k", "20"))
    assert not public, public
    hr = json.loads(ok("search", "M]heh guc", "--mode", "bm25", "--json", "-k", "20", "--scopes", "public,hr"))
    assert hr and all(h["access"] == "hr" for h in hr), hr


def _one_refused_chunk(tmp_path: Path, vectors: Vectors) -> tuple[Path, Settings, dict[str, Any]]:
    """A public archive of one memo with a chunk the gate refused, refreshed: (root, settings, its open item)."""
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "записка.txt").write_text(CONTENTS[3], encoding="utf-8")
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    refresh_inline(root, settings, vectors)
    with SqliteIndex(settings.index_path) as index:
        (item,) = index.quarantine_items("open")
    return root, settings, item


def test_a_release_is_refused_when_a_refresh_supersedes_its_version_meanwhile(
    vectors: Vectors, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release computes its vector (slow: on a loaded machine, or a VLM for a re-OCR) before it writes; a refresh
    that supersedes the version in that time must win: the release is refused and nothing superseded is served."""
    import threading

    import tasks.review.actions as actions

    monkeypatch.setattr(refresh_tasks.events, "sources_indexed", lambda *_a, **_k: None)
    root, settings, item = _one_refused_chunk(tmp_path, vectors)
    real = actions.shared_embedder

    class SlowEmbedder:
        """The release's embedder; while it works, a refresh on another thread replaces the file's version."""

        def __init__(self, *args: Any) -> None:
            self.inner = real(*args)
            self.name = self.inner.name

        def embed_passages(self, texts: list[str]) -> np.ndarray:
            (root / "записка.txt").write_text(CONTENTS[1], encoding="utf-8")
            refresher = threading.Thread(target=refresh_inline, args=(root, settings, vectors))
            refresher.start()
            refresher.join()
            return self.inner.embed_passages(texts)

    monkeypatch.setattr(actions, "shared_embedder", SlowEmbedder)
    with pytest.raises(ReviewError, match="no longer current"):
        apply_decision(item["item_id"], Action.release, "рецензент", "", settings)
    with SqliteIndex(settings.index_path) as index:
        assert index.quarantine_item(item["item_id"])["status"] == "open"  # no decision recorded
        served = index.conn.execute(
            "SELECT c.chunk_id FROM chunks c JOIN sources s ON s.source_id = c.source_id "
            "AND s.version = c.source_version WHERE c.lifecycle = 'current' AND s.lifecycle != 'current'"
        ).fetchall()
        assert not served
        assert item["chunk_id"] not in {c["chunk_id"] for c in index.source_chunks("записка.txt")}
        assert "ремонте крыши" in " ".join(c["body"] for c in index.source_chunks("записка.txt"))


def test_a_decision_is_refused_when_a_relabel_takes_the_item_out_of_the_reviewers_scope_meanwhile(
    vectors: Vectors, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `public` reviewer's release computes its vector first; the file moves to `hr` in that time. The scope is
    checked again inside the write transaction, against the catalog row: the release is refused, the item stays
    open, and nothing is served to `public` (before, the scope was read only before the transaction)."""
    import tasks.review.actions as actions

    monkeypatch.setattr(refresh_tasks.events, "sources_indexed", lambda *_a, **_k: None)
    _root, settings, item = _one_refused_chunk(tmp_path, vectors)
    real = actions.shared_embedder

    class RelabellingEmbedder:
        def __init__(self, *args: Any) -> None:
            self.inner = real(*args)
            self.name = self.inner.name

        def embed_passages(self, texts: list[str]) -> np.ndarray:
            with SqliteIndex(settings.index_path) as index:  # the manifest moved it to hr; a refresh relabelled it
                source, _ = index.current_source("записка.txt")
                index.relabel_source(source.model_copy(update={"access": "hr"}))
            return self.inner.embed_passages(texts)

    monkeypatch.setattr(actions, "shared_embedder", RelabellingEmbedder)
    with pytest.raises(ReviewError, match="no quarantine item"):
        apply_decision(item["item_id"], Action.release, "рецензент", "", settings, scopes=["public"])
    with SqliteIndex(settings.index_path) as index:
        assert index.quarantine_item(item["item_id"])["status"] == "open"
        assert retrieve(index.searcher, "M]heh guc", None, ["public"], k=20, mode="bm25") == []


def test_a_refused_versions_items_follow_a_relabel(
    vectors: Vectors, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version refused as a whole has no catalog row, so the triggers that move items with a relabel did not apply:
    its items kept `public` after the file moved to `hr` (#46). Now the refresh relabels them too."""
    monkeypatch.setattr(refresh_tasks.events, "sources_indexed", lambda *_a, **_k: None)
    root = tmp_path / "archive"
    root.mkdir()
    (root / "korpus.yaml").write_text("defaults:\n  owner: Архив\n  access: public\n", encoding="utf-8")
    (root / "двоичный.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00" * 50)  # refused as a whole: not text
    settings = Settings(data=tmp_path / "data", meta_documents=False)
    refresh_inline(root, settings, vectors)
    with SqliteIndex(settings.index_path) as index:
        (item,) = index.quarantine_items("open")
        assert queue_page(index, QueueQuery(scopes=["public"], status="all")).total == 1
    (root / "korpus.yaml").write_text(
        "defaults:\n  owner: Архив\n  access: public\nrules:\n  - match: двоичный.txt\n    access: hr\n",
        encoding="utf-8",
    )
    refresh_inline(root, settings, vectors)
    with SqliteIndex(settings.index_path) as index:
        assert index.quarantine_item(item["item_id"])["access"] == "hr"
        assert queue_page(index, QueueQuery(scopes=["public"], status="all")).total == 0
        assert queue_page(index, QueueQuery(scopes=["hr"], status="all")).total == 1

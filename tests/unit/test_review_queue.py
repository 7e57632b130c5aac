"""The review queue in SQL: scopes, filters, counts, paging, the next item; and an older index gaining the
columns the queue needs."""

from __future__ import annotations

import re
from pathlib import Path

import apsw
import pytest

from korpus.core.datamodel import QuarantineItem, ReasonCode
from tasks.index.sqlite import SqliteIndex
from tasks.review.queue import QueueQuery, next_item, queue_page

pytestmark = pytest.mark.unit


def _item(source_id: str, page: int, reason: ReasonCode, access: str | None, kind: str = "pdf") -> QuarantineItem:
    return QuarantineItem(
        source_id=source_id, source_version="v1", page=page, reasons=[reason], access=access, kind=kind
    )


@pytest.fixture
def index(tmp_path: Path) -> SqliteIndex:
    with SqliteIndex(tmp_path / "korpus.db") as idx:
        idx.record_quarantine(
            [
                _item("сканы/а.pdf", 1, ReasonCode.page_quality, "public"),
                _item("сканы/а.pdf", 2, ReasonCode.empty_text, "public"),
                _item("кадры/б.pdf", 1, ReasonCode.page_quality, "hr"),
                _item("письма/в.txt", 1, ReasonCode.text_quality, "public", kind="text"),
                _item("ничьё.txt", 1, ReasonCode.missing_metadata, None, kind="text"),
            ]
        )
        yield idx


def test_a_reviewer_sees_only_items_of_their_scopes(index: SqliteIndex) -> None:
    public = queue_page(index, QueueQuery(scopes=["public"]))
    assert public.total == 3 and {i["access"] for i in public.items} == {"public"}
    assert public.counts == {"page-quality": 1, "empty-text": 1, "text-quality": 1}
    assert public.unscoped == 1 and public.folders == ["письма", "сканы"] and public.kinds == ["pdf", "text"]
    both = queue_page(index, QueueQuery(scopes=["public", "hr"]))
    assert both.total == 4 and both.counts["page-quality"] == 2
    assert queue_page(index, QueueQuery(scopes=[])).total == 0


def test_another_tenants_items_need_its_scope(index: SqliteIndex, tmp_path: Path) -> None:
    """#46 item 5: an `acme` item under `public` is in the queue of a reviewer holding `acme/public`, never of one
    holding `public`; and a decision on it by a `public` reviewer is refused like any item out of scope."""
    from korpus.core.settings import Settings
    from tasks.review.actions import Action, ReviewError, apply_decision

    acme = _item("acme/г.pdf", 1, ReasonCode.page_quality, "public").model_copy(update={"tenant": "acme"})
    index.record_quarantine([acme])
    ours = queue_page(index, QueueQuery(scopes=["public"]))
    assert "acme/г.pdf" not in {i["source_id"] for i in ours.items} and ours.total == 3
    theirs = queue_page(index, QueueQuery(scopes=["acme/public"]))
    assert [i["source_id"] for i in theirs.items] == ["acme/г.pdf"]
    assert index.quarantine_item(acme.item_id)["scope"] == "acme/public"
    settings = Settings(data=tmp_path)  # the fixture's index is tmp_path/korpus.db, as settings.index_path
    with pytest.raises(ReviewError, match="no quarantine item"):
        apply_decision(acme.item_id, Action.reject, "Петрова", "", settings, scopes=["public"])
    assert apply_decision(acme.item_id, Action.reject, "Орлов", "", settings, scopes=["acme/public"])


def test_filters_and_paging(index: SqliteIndex) -> None:
    scopes = ["public", "hr"]
    assert queue_page(index, QueueQuery(scopes=scopes, reason="page-quality")).total == 2
    assert queue_page(index, QueueQuery(scopes=scopes, folder="/сканы/")).total == 2
    assert queue_page(index, QueueQuery(scopes=scopes, folder="скан")).total == 0  # a folder, not a prefix
    assert queue_page(index, QueueQuery(scopes=scopes, kind="text")).total == 1
    pages = [queue_page(index, QueueQuery(scopes=scopes, per_page=3, page=p)).items for p in (1, 2, 3)]
    assert [len(p) for p in pages] == [3, 1, 0]
    with pytest.raises(ValueError, match="status"):
        QueueQuery(scopes=scopes, status="maybe")


def test_decided_items_leave_the_open_queue_and_next_item_wraps(index: SqliteIndex) -> None:
    query = QueueQuery(scopes=["public"])
    ids = [i["item_id"] for i in queue_page(index, query).items]
    index.record_decision(ids[0], "Петрова", "reject", "", "kept out", "rejected")
    assert [i["item_id"] for i in queue_page(index, query).items] == ids[1:]
    assert queue_page(index, QueueQuery(scopes=["public"], status="rejected")).total == 1
    assert next_item(index, query, ids[1]) == ids[2]
    assert next_item(index, query, ids[2]) == ids[1]  # wraps to the start of what is still open
    assert next_item(index, query, ids[0]) == ids[1]  # a decided item: the first open one


def test_an_older_index_gains_the_queue_columns(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "korpus.db"))
    conn.execute(
        "CREATE TABLE quarantine (item_id TEXT PRIMARY KEY, source_id TEXT NOT NULL, source_version TEXT, "
        "page INTEGER, t_start REAL, chunk_id TEXT, reasons TEXT NOT NULL, detail TEXT, evidence TEXT, "
        "evidence_path TEXT, chunk TEXT, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, "
        "status TEXT NOT NULL DEFAULT 'open');"
        "CREATE TABLE quarantine_decisions (item_id TEXT NOT NULL, decided_at TEXT NOT NULL, reviewer TEXT NOT NULL, "
        "action TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL DEFAULT '');"
        "INSERT INTO quarantine VALUES ('i1', 'а.pdf', 'v1', 1, NULL, NULL, '[\"page-quality\"]', '', '', NULL, "
        "NULL, '2026-01-01', '2026-01-01', 'open');"
    )
    conn.close()
    with SqliteIndex(tmp_path / "korpus.db") as index:
        columns = {row[1] for row in index.conn.execute("PRAGMA table_info(quarantine)")}
        assert {"access", "kind", "readings"} <= columns
        item = index.quarantine_item("i1")
        assert item is not None and item["access"] is None and item["readings"] == []
        assert queue_page(index, QueueQuery(scopes=["public"])).unscoped == 1


def test_every_reason_has_russian_advice_on_the_review_page() -> None:
    from korpus.apps.review_web import ADVICE_RU
    from korpus.core.datamodel import REASON_ADVICE

    assert set(ADVICE_RU) == set(ReasonCode) == set(REASON_ADVICE)
    assert all(re.search("[а-яё]", text) for text in ADVICE_RU.values())

"""The /review workbench of `korpus serve` over HTTP (FastAPI's TestClient, the real app): keys, scopes, filters,
the item view with its page image, and every action — edit-and-release, reject, batch — reaching the index at once
and the audit trail. The same flow in a real headless browser: test_review_browser.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from korpus.apps.api import create_app
from korpus.apps.cli import app as cli
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex
from tasks.meta.publish import META_PREFIX
from tasks.review.queue import QueueQuery, queue_page

from .review_corpus import CORRECTED, copy_data

pytestmark = pytest.mark.integration
KEYS = {
    "rev-all": {"name": "Петрова", "scopes": ["public", "hr"]},
    "rev-public": {"name": "Иванов", "scopes": ["public"]},
}
SEARCH_KEYS = {"search-1": ["public", "hr"]}


@pytest.fixture(scope="module")
def workbench(
    review_archive: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Settings, TestClient]:
    data = copy_data(review_archive[1], tmp_path_factory.mktemp("review-web") / "data")
    settings = Settings(data=data, review_keys=KEYS, api_keys=SEARCH_KEYS)
    return settings, TestClient(create_app(settings), follow_redirects=False)


def _items(client: TestClient, key: str, **params: str) -> dict:
    response = client.get("/review/api/items", params=params, headers={"X-API-Key": key})
    assert response.status_code == 200, response.text
    return response.json()


def _item_id(client: TestClient, source_id: str, key: str = "rev-all") -> str:
    items = _items(client, key, status="all", per_page="500")["items"]
    return next(i["item_id"] for i in items if i["source_id"] == source_id)


def _search(client: TestClient, q: str) -> list[dict]:
    response = client.get("/search", params={"q": q, "k": 5}, headers={"X-API-Key": "search-1"})
    assert response.status_code == 200, response.text
    return [h for h in response.json() if not h["source_id"].startswith(META_PREFIX)]


def test_keys_are_reviewer_keys_and_a_search_key_gets_403(workbench: tuple[Settings, TestClient]) -> None:
    _settings, client = workbench
    assert client.get("/review").status_code == 303  # a browser without a key goes to the login form
    assert client.get("/review").headers["location"] == "/review/login"
    assert client.get("/review/api/items").status_code == 401
    assert client.get("/review/api/items", headers={"X-API-Key": "nope"}).status_code == 401
    assert client.get("/review/api/items", headers={"X-API-Key": "search-1"}).status_code == 403
    assert client.post("/review/login", data={"key": "search-1"}).status_code == 403
    assert client.get("/review", headers={"Authorization": "Bearer rev-public"}).status_code == 200
    login = client.post("/review/login", data={"key": "rev-public"})
    assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
    assert "samesite=strict" in login.headers["set-cookie"].lower()
    page = client.get("/review")  # with the session cookie the login set
    assert page.status_code == 200 and "Иванов" in page.text and "старые/слой_1.txt" in page.text
    assert "rev-public" not in login.headers["set-cookie"]  # a session id, never the key
    # a reviewer key is not a search key
    assert client.get("/search", params={"q": "опись"}, headers={"X-API-Key": "rev-all"}).status_code == 401


def test_queue_filters_counts_paging_and_scopes(workbench: tuple[Settings, TestClient]) -> None:
    _settings, client = workbench
    everything = _items(client, "rev-all")
    assert everything["total"] == 6 and everything["counts"] == {"text-quality": 4, "empty-text": 2}
    assert everything["folders"] == ["кадры", "сканы", "старые"] and everything["kinds"] == ["pdf", "text"]
    public = _items(client, "rev-public")
    assert public["total"] == 5 and all(i["access"] == "public" for i in public["items"])
    assert "кадры/приказ.pdf" not in json.dumps(public, ensure_ascii=False)
    assert _items(client, "rev-all", reason="empty-text")["total"] == 2
    assert _items(client, "rev-all", folder="старые")["total"] == 4
    assert _items(client, "rev-all", kind="pdf", reason="empty-text")["total"] == 2
    first, second = (_items(client, "rev-all", per_page="4", page=p)["items"] for p in ("1", "2"))
    assert len(first) == 4 and len(second) == 2 and not {i["item_id"] for i in first} & {i["item_id"] for i in second}
    assert (
        client.get("/review/api/items", params={"status": "bogus"}, headers={"X-API-Key": "rev-all"}).status_code == 422
    )
    html = client.get("/review", params={"reason": "text-quality"}, headers={"X-API-Key": "rev-all"}).text
    assert html.count('class="row"') == 4 and "сканы/опись.pdf" not in html


def test_a_reviewer_without_hr_cannot_open_an_hr_item(workbench: tuple[Settings, TestClient]) -> None:
    _settings, client = workbench
    hr_item = _item_id(client, "кадры/приказ.pdf")
    for path in (f"/review/items/{hr_item}", f"/review/items/{hr_item}/image", f"/review/api/items/{hr_item}"):
        assert client.get(path, headers={"X-API-Key": "rev-public"}).status_code == 404, path
        assert client.get(path, headers={"X-API-Key": "rev-all"}).status_code == 200, path
    refused = client.post(
        f"/review/api/items/{hr_item}/decision", json={"action": "reject"}, headers={"X-API-Key": "rev-public"}
    )
    assert refused.status_code == 409
    batch = client.post(
        "/review/api/decisions", json={"item_ids": [hr_item], "action": "reject"}, headers={"X-API-Key": "rev-public"}
    )
    assert batch.json()["outcomes"][hr_item].startswith("refused")
    assert _items(client, "rev-all", folder="кадры")["items"][0]["status"] == "open"


def test_item_view_shows_the_page_image_and_what_each_tier_read(workbench: tuple[Settings, TestClient]) -> None:
    _settings, client = workbench
    item = _item_id(client, "сканы/опись.pdf")
    page = client.get(f"/review/items/{item}", headers={"X-API-Key": "rev-all"})
    assert page.status_code == 200
    assert 'id="page-image"' in page.text and "уровень 1" in page.text and "tesseract" in page.text.lower()
    image = client.get(f"/review/items/{item}/image", headers={"X-API-Key": "rev-all"})
    assert image.status_code == 200 and image.content[:8] == b"\x89PNG\r\n\x1a\n"
    detail = client.get(f"/review/api/items/{item}", headers={"X-API-Key": "rev-all"}).json()
    assert detail["page"] == 2 and detail["readings"][0]["tier"] == 1 and detail["access"] == "public"


def test_edit_the_text_of_an_ocr_page_and_release_it(workbench: tuple[Settings, TestClient]) -> None:
    settings, client = workbench
    item = _item_id(client, "сканы/опись.pdf")
    assert _search(client, "гидрант вентиль слесарь Кузьмин") == [] or all(
        "Кузьмин" not in h["text"] for h in _search(client, "гидрант вентиль слесарь Кузьмин")
    )
    done = client.post(
        f"/review/items/{item}/decision",
        data={"action": "edit", "text": CORRECTED, "note": "с листа"},
        headers={"X-API-Key": "rev-all"},
    )
    assert done.status_code == 303 and "message=" in done.headers["location"]
    hits = _search(client, "гидрант вентиль слесарь Кузьмин")
    assert hits[0]["source_id"] == "сканы/опись.pdf" and hits[0]["page"] == 2
    assert hits[0]["text"].startswith("[опись.pdf · лист 2]") and "Кузьминым" in hits[0]["text"]
    with SqliteIndex(settings.index_path) as index:
        trail = index.quarantine_item(item)
        pages = [
            json.loads(row[0])
            for row in index.conn.execute("SELECT page FROM pages WHERE source_id = 'сканы/опись.pdf'")
        ]
    assert trail["status"] == "resolved"
    assert trail["decisions"][-1]["reviewer"] == "Петрова" and trail["decisions"][-1]["text"] == CORRECTED
    manual = [p for p in pages if p["method"] == "manual"]
    assert len(manual) == 1 and manual[0]["page"] == 2 and "Петрова" in manual[0]["engine"]
    # a second edit replaces the first: the old words go, the new ones are found
    again = client.post(
        f"/review/api/items/{item}/decision",
        json={"action": "edit", "text": "Гидрант исправен."},
        headers={"X-API-Key": "rev-all"},
    )
    assert again.status_code == 200, again.text
    assert all("Кузьминым" not in h["text"] for h in _search(client, "гидрант вентиль слесарь Кузьмин"))
    empty = client.post(
        f"/review/api/items/{item}/decision", json={"action": "edit", "text": "  "}, headers={"X-API-Key": "rev-all"}
    )
    assert empty.status_code == 409 and "empty" in empty.json()["detail"]


def test_reject_and_batch_release(workbench: tuple[Settings, TestClient]) -> None:
    settings, client = workbench
    ids = [_item_id(client, f"старые/слой_{n}.txt") for n in (1, 2, 3, 4)]
    rejected = client.post(
        f"/review/items/{ids[3]}/decision",
        data={"action": "reject", "note": "мусор"},
        headers={"X-API-Key": "rev-public"},
    )
    assert rejected.status_code == 303
    batch = client.post(
        "/review/batch",
        data={"action": "release", "item_id": ids[:3], "note": "единственные копии"},
        headers={"X-API-Key": "rev-public"},
    )
    assert batch.status_code == 303 and "3" in batch.headers["location"]
    hits = _search(client, "npoTOKon Necepa")
    assert hits and hits[0]["source_id"] == "старые/слой_1.txt" and hits[0]["exception"] is True
    assert _search(client, "BeDoMocTb nocTynJIeHnR") == [] or all(
        h["source_id"] != "старые/слой_4.txt" for h in _search(client, "BeDoMocTb nocTynJIeHnR")
    )
    with SqliteIndex(settings.index_path) as index:
        statuses = {i: index.quarantine_item(i)["status"] for i in ids}
        page = queue_page(index, QueueQuery(scopes=["public"], status="open"))
    assert statuses == {ids[0]: "released", ids[1]: "released", ids[2]: "released", ids[3]: "rejected"}
    assert all(i["item_id"] not in ids for i in page.items)
    nothing = client.post(
        "/review/api/decisions", json={"item_ids": ids[:1], "action": "edit"}, headers={"X-API-Key": "rev-all"}
    )
    assert nothing.status_code == 422


def test_review_is_off_without_reviewer_keys(workbench: tuple[Settings, TestClient]) -> None:
    settings, _client = workbench
    plain = TestClient(create_app(Settings(data=settings.data)), follow_redirects=False)
    assert plain.get("/review/api/items", headers={"X-API-Key": "rev-all"}).status_code == 404


def test_cli_edit_goes_through_the_same_decision(workbench: tuple[Settings, TestClient], tmp_path: Path) -> None:
    settings, client = workbench
    item = _item_id(client, "кадры/приказ.pdf")
    text = tmp_path / "лист.txt"
    text.write_text("Приказ о переводе табельщицы Мельниковой в цех номер четыре.", encoding="utf-8")
    runner = CliRunner()
    done = runner.invoke(
        cli, ["review", "edit", item, "--text-file", str(text), "--reviewer", "Сидоров", "--data", str(settings.data)]
    )
    assert done.exit_code == 0 and "edit →" in done.stdout, done.output
    found = runner.invoke(
        cli, ["search", "табельщица Мельникова", "--json", "--scopes", "hr", "--data", str(settings.data)]
    )
    hits = [h for h in json.loads(found.stdout) if not h["source_id"].startswith(META_PREFIX)]
    assert hits[0]["source_id"] == "кадры/приказ.pdf" and hits[0]["page"] == 1 and hits[0]["access"] == "hr"
    assert _items(client, "rev-all", folder="кадры", status="resolved")["total"] == 1


def test_a_refused_chunk_has_its_words_highlighted_on_the_page(workbench: tuple[Settings, TestClient]) -> None:
    from korpus.core.datamodel import QuarantineItem, ReasonCode

    settings, client = workbench
    with SqliteIndex(settings.index_path) as index:
        row = next(r for r in index.source_chunks("сканы/опись.pdf") if r["page"] == 1)
        stored = next(index.stored_chunks([row["chunk_id"]])).chunk
        assert stored.regions  # the typed first page: its words' boxes
        refused = stored.model_copy(update={"chunk_id": "refused-" + stored.chunk_id})
        item = QuarantineItem(
            source_id=stored.source_id,
            source_version=stored.source_version,
            page=1,
            chunk_id=refused.chunk_id,
            reasons=[ReasonCode.oversized],
            chunk=refused,
            evidence=refused.body,
            access="public",
            kind="pdf",
        )
        index.record_quarantine([item])
    page = client.get(f"/review/items/{item.item_id}", headers={"X-API-Key": "rev-all"})
    assert page.status_code == 200 and page.text.count('class="region"') == len(stored.regions)


def test_the_review_flow_links_to_the_item_page_that_exists(review_archive: tuple[Path, Path], tmp_path: Path) -> None:
    """The Prefect review flow's summary links each item to the page korpus serve has for it (it linked to
    `/item/ID`, a 404)."""
    from fastapi.testclient import TestClient

    from flows.quarantine_review import item_page, summarise

    _root, data = review_archive
    settings = Settings(
        data=data, review_url="http://testserver/review", review_keys={"k": {"name": "р", "scopes": ["public", "hr"]}}
    )
    with SqliteIndex(settings.index_path) as index:
        item_id = index.quarantine_items("open")[0]["item_id"]
    assert f"({item_page(settings, item_id)})" in summarise.fn([item_id], settings)
    client = TestClient(create_app(settings))
    client.post("/review/login", data={"key": "k"})
    page = client.get(item_page(settings, item_id).removeprefix("http://testserver"))
    assert page.status_code == 200 and item_id in page.text

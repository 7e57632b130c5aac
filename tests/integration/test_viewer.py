"""`/view` (korpus/apps/viewer.py) over the session's sample index: every hit of /search links to its page with the
chunk highlighted, or to its recording from its second; the access rule of /search holds on every viewer route;
and in a real headless Chromium the highlighted rectangle is where the words are, the arrow key opens the next
chunk, and a recording plays from the hit's second."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from korpus.apps.api import create_app
from korpus.apps.viewer import view_link
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex

from .conftest import Refreshed, served_app

pytestmark = pytest.mark.integration
HR_ORDER = "кадры/приказ_17-к.txt"
SCAN = "сканы/протокол_1998.pdf"
KEYS = {"k-public": ["public"], "k-hr": ["public", "hr"]}


@pytest.fixture(scope="module")
def keyed(refreshed: Refreshed) -> Settings:
    return refreshed.settings.model_copy(update={"api_keys": KEYS})


def _view(client: TestClient, link: str, key: str | None = "k-public", **params: Any) -> Any:
    return client.get(link, params=params or None, headers={"X-API-Key": key} if key else {})


def test_every_search_hit_links_to_its_page_with_the_chunk_highlighted(keyed: Settings) -> None:
    client = TestClient(create_app(keyed))
    hits = client.get("/search", params={"q": "ремонт кровли склада", "k": 3}, headers={"X-API-Key": "k-public"}).json()
    scan = next(h for h in hits if h["source_id"] == SCAN)
    assert scan["view"] == f"/view/{quote(SCAN, safe='/')}?chunk={scan['chunk_id']}"
    page = _view(client, scan["view"])
    assert page.status_code == 200 and page.text.count('class="region"') == len(scan["regions"]) > 0
    image = _view(client, f"/view/{SCAN}", page=scan["page"], png=1)
    assert image.headers["content-type"] == "image/png"
    with Image.open(io.BytesIO(image.content)) as png:
        ratio = png.width / png.height
    assert abs(ratio - scan["regions"][0]["width"] / scan["regions"][0]["height"]) < 0.01  # the page's own shape


def test_the_viewer_keeps_the_access_rule_of_search(keyed: Settings) -> None:
    client = TestClient(create_app(keyed))
    with SqliteIndex(keyed.index_path) as index:
        hr_chunk = index.source_chunks(HR_ORDER)[0]["chunk_id"]
        scan_chunk = index.source_chunks(SCAN)[0]["chunk_id"]
    for params in ({}, {"chunk": hr_chunk}, {"page": 1, "png": 1}):
        assert _view(client, f"/view/{HR_ORDER}", **params).status_code == 404  # public key: as if absent
        assert _view(client, f"/view/{HR_ORDER}", key="k-hr", **params).status_code in (200, 404)
    assert _view(client, f"/view/{HR_ORDER}", key="k-hr", chunk=hr_chunk).status_code == 200
    assert _view(client, f"/view/{HR_ORDER}", key=None).status_code == 401
    assert _view(client, f"/view/{HR_ORDER}", key="k-public", scopes="hr").status_code == 403
    assert _view(client, f"/view/{SCAN}", chunk=hr_chunk).status_code == 404  # a chunk of another source
    assert _view(client, f"/view/{SCAN}", chunk=scan_chunk).status_code == 200
    assert _view(client, "/view/korpus://meta/public/Реестр лиц").status_code == 404
    refused = client.post("/view/login", data={"key": "wrong", "next": f"/view/{SCAN}"}, follow_redirects=False)
    assert refused.status_code == 401
    logged = client.post(
        "/view/login", data={"key": "k-public", "next": "https://elsewhere.example/"}, follow_redirects=False
    )
    assert logged.status_code == 303 and logged.headers["location"] == "/view/login"  # never off this server
    cookie = logged.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert client.get(f"/view/{SCAN}", params={"chunk": scan_chunk}).status_code == 200  # the cookie is the key
    assert client.get(f"/view/{HR_ORDER}", params={"chunk": hr_chunk}).status_code == 404  # …with its scopes only


@pytest.fixture(scope="module")
def site(keyed: Settings) -> Iterator[str]:
    with served_app(create_app(keyed)) as base:
        yield base


def _open_signed_in(browser: Any, base: str, link: str) -> None:
    """Sign in at /view/login with the viewer link as `next`, and wait until the login's redirect has landed there
    (no cookie left from an earlier test, no navigation of the login still running when the test looks)."""
    browser.delete_all_cookies()
    browser.get(f"{base}/view/login?next={quote(link, safe='')}")
    browser.find_element(By.NAME, "key").send_keys("k-public")
    browser.find_element(By.CSS_SELECTOR, "form button").click()
    WebDriverWait(browser, 60).until(lambda d: d.current_url == base + link)


def test_in_a_browser_the_highlight_is_on_the_words_and_the_arrow_opens_the_next_chunk(
    keyed: Settings, site: str, browser: Any
) -> None:
    client = TestClient(create_app(keyed))
    hits = client.get("/search", params={"q": "ремонт кровли склада", "k": 3}, headers={"X-API-Key": "k-public"}).json()
    scan = next(h for h in hits if h["source_id"] == SCAN)
    _open_signed_in(browser, site, scan["view"])
    WebDriverWait(browser, 60).until(
        lambda d: d.execute_script("const i = document.getElementById('page'); return i.complete && i.naturalWidth > 0")
    )
    sheet = browser.find_element(By.ID, "page")
    shot = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
    scale = browser.execute_script("return window.devicePixelRatio") or 1
    left, top, width = sheet.location["x"], sheet.location["y"], sheet.size["width"]
    r = scan["regions"][0]
    k = width / r["width"]  # CSS pixels per point of the page as shown
    inside = [
        shot.getpixel((round((left + x * k) * scale), round((top + (r["y0"] + r["y1"]) / 2 * k) * scale)))
        for x in (r["x0"] + 1, (r["x0"] + r["x1"]) / 2, r["x1"] - 1)
    ]
    middle = round((left + (r["x0"] + r["x1"]) / 2 * k) * scale)
    above = shot.getpixel((middle, round((top + r["y0"] * k - 12) * scale)))
    tinted = [p for p in inside if p[0] > 150 and p[2] < p[0] - 60]  # yellow over paper, or red frame
    assert len(tinted) >= 2, inside
    assert not (above[0] > 150 and above[2] < above[0] - 60), above  # above the line: the page as it is
    with SqliteIndex(keyed.index_path) as index:
        cited = index.searcher.cited(scan["chunk_id"], ["public"])
    key, neighbour = ("\ue014", cited["next_id"]) if cited["next_id"] else ("\ue012", cited["previous_id"])
    assert neighbour  # the scan has more than one chunk: the hit has a neighbour on one side
    browser.find_element(By.TAG_NAME, "body").send_keys(key)  # ArrowRight, or ArrowLeft from the last chunk
    WebDriverWait(browser, 30).until(lambda d: d.current_url.endswith(f"chunk={neighbour}"))


def test_in_a_browser_a_recording_plays_from_the_hits_second(keyed: Settings, site: str, browser: Any) -> None:
    with SqliteIndex(keyed.index_path) as index:
        source = next(r["source_id"] for r in index.sources() if r["kind"] == "audio" and r["lifecycle"] == "current")
        spoken = [c for c in index.source_chunks(source) if (c["t_start"] or 0) > 0]
    assert spoken  # a stretch that does not start at 0 s: the player must seek
    hit = {**spoken[0], "source_id": source}
    hit["view"] = view_link(hit)
    assert re.search(r"\?chunk=", hit["view"])
    _open_signed_in(browser, site, hit["view"])
    WebDriverWait(browser, 60).until(
        lambda d: d.execute_script("const a = document.getElementById('player'); return a && a.readyState >= 1")
    )
    time.sleep(0.5)
    at = browser.execute_script("return document.getElementById('player').currentTime")
    assert hit["t_start"] - 0.5 <= at <= hit["t_start"] + 5, (at, hit["t_start"])
    current = browser.find_element(By.CSS_SELECTOR, ".transcript .current")
    assert current.get_attribute("id") == f"c-{hit['chunk_id']}"


def test_a_login_cookie_is_a_session_never_the_key_and_ends_at_logout(keyed: Settings) -> None:
    """The viewer's and the review page's cookies carry a random session id (the key itself sat in the browser
    before), which grants the key's scopes until it expires or the reviewer logs out; a forged id grants nothing."""
    from korpus.core.settings import Reviewer

    settings = keyed.model_copy(
        update={"review_keys": {"rev-key": Reviewer(name="Рецензент", scopes=["public"])}, "session_hours": 1.0}
    )
    client = TestClient(create_app(settings), base_url="https://testserver")
    logged = client.post("/view/login", data={"key": "k-public", "next": f"/view/{SCAN}"}, follow_redirects=False)
    cookie = logged.headers["set-cookie"]
    assert "k-public" not in cookie and "secure" in cookie.lower() and "max-age=3600" in cookie.lower()
    with SqliteIndex(keyed.index_path) as index:
        scan_chunk = index.source_chunks(SCAN)[0]["chunk_id"]
    assert client.get(f"/view/{SCAN}", params={"chunk": scan_chunk}).status_code == 200
    forged = TestClient(create_app(settings), base_url="https://testserver", cookies={"korpus_key": "k-public"})
    assert forged.get(f"/view/{SCAN}", params={"chunk": scan_chunk}).status_code == 401  # the key is no cookie
    review = client.post("/review/login", data={"key": "rev-key"}, follow_redirects=False)
    assert "rev-key" not in review.headers["set-cookie"] and client.get("/review").status_code == 200
    client.post("/review/logout", follow_redirects=False)
    assert client.get("/review", follow_redirects=False).status_code == 303  # signed out: back to the login form

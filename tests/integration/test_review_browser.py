"""The /review workbench in a real headless browser: Debian's chromium driven by selenium through Debian's
chromedriver, against `korpus serve`'s app run by uvicorn on loopback. A reviewer logs in, filters by reason, opens
an OCR page and sees its image, rewrites its text and releases it (then `korpus search` finds the words at that page,
cited), rejects another item with a keyboard shortcut and batch-releases three; a search key and a reviewer without
`hr` are refused. Screenshots of the queue and the item view are written to `KORPUS_SCREENSHOTS` (default: the
test's temporary folder); docs/screenshots holds a set from such a run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait
from typer.testing import CliRunner

from korpus.apps.api import create_app
from korpus.apps.cli import app as cli
from korpus.core.settings import Settings
from tasks.index.sqlite import SqliteIndex

from .conftest import served_app
from .review_corpus import CORRECTED, copy_data

pytestmark = pytest.mark.integration
KEYS = {
    "rev-all": {"name": "Петрова", "scopes": ["public", "hr"]},
    "rev-public": {"name": "Иванов", "scopes": ["public"]},
}
SEARCH_KEYS = {"search-1": ["public", "hr"]}


@pytest.fixture(scope="module")
def served(
    review_archive: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Settings]]:
    data = copy_data(review_archive[1], tmp_path_factory.mktemp("review-browser") / "data")
    settings = Settings(data=data, review_keys=KEYS, api_keys=SEARCH_KEYS)
    with served_app(create_app(settings)) as base:
        yield base, settings


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("KORPUS_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _detached(element: WebElement) -> Any:
    """`staleness_of`, also for the other way Chrome says it mid-navigation: on a loaded machine the old page's node
    can be reported as «Node with given id does not belong to the document» instead of a stale reference (seen in a
    clean-clone CI run)."""
    stale = expected_conditions.staleness_of(element)

    def check(driver: webdriver.Chrome) -> bool:
        try:
            return stale(driver)
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise

    return check


def _navigating(driver: webdriver.Chrome, act: Any) -> None:
    """Do something that loads a new page (a click, a key) and wait until the new page is there."""
    old = driver.find_element(By.TAG_NAME, "html")
    act()
    WebDriverWait(driver, 60).until(_detached(old))
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")


def _click(driver: webdriver.Chrome, element: WebElement) -> None:
    _navigating(driver, element.click)


def _login(driver: webdriver.Chrome, base: str, key: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"{base}/review")
    assert driver.current_url.endswith("/review/login")
    driver.find_element(By.ID, "key").send_keys(key)
    _click(driver, driver.find_element(By.ID, "login"))


def _rows(driver: webdriver.Chrome) -> list[str]:
    return [row.get_attribute("data-item") for row in driver.find_elements(By.CSS_SELECTOR, "#queue tr.row")]


def _status(driver: webdriver.Chrome, base: str, path: str, key: str) -> int:
    """The HTTP status the browser's own fetch gets for a path, with a key in the header."""
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {headers: {'X-API-Key': arguments[1]}}).then(r => done(r.status));",
        f"{base}{path}",
        key,
    )


def _hr_item(settings: Settings) -> str:
    with SqliteIndex(settings.index_path) as index:
        return next(i["item_id"] for i in index.quarantine_items() if i["source_id"].startswith("кадры/"))


def test_reviewer_works_the_queue_in_a_browser(
    served: tuple[str, Settings], browser: webdriver.Chrome, shots: Path
) -> None:
    base, settings = served
    driver = browser
    _login(driver, base, "rev-all")
    assert driver.find_element(By.ID, "reviewer").text == "Петрова"
    assert len(_rows(driver)) == 6

    # filter by reason
    Select(driver.find_element(By.ID, "f-reason")).select_by_value("empty-text")
    _click(driver, driver.find_element(By.ID, "apply-filters"))
    assert "reason=empty-text" in driver.current_url and len(_rows(driver)) == 2
    driver.save_screenshot(str(shots / "review-queue.png"))

    # open the scan's page and see its image
    _click(driver, driver.find_element(By.LINK_TEXT, "сканы/опись.pdf"))
    image = driver.find_element(By.ID, "page-image")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return arguments[0].complete", image))
    assert driver.execute_script("return arguments[0].naturalWidth", image) > 100
    assert "уровень 1" in driver.page_source
    driver.save_screenshot(str(shots / "review-item.png"))

    # edit the OCR page's text and release it
    text = driver.find_element(By.ID, "text")
    text.clear()
    text.send_keys(CORRECTED)
    driver.find_element(By.ID, "note").send_keys("прочитано с листа")
    _click(driver, driver.find_element(By.ID, "edit-release"))
    assert "текст исправлен" in driver.find_element(By.ID, "message").text.lower()
    found = CliRunner().invoke(
        cli, ["search", "гидрант вентиль слесарь Кузьмин", "--json", "--data", str(settings.data)]
    )
    assert found.exit_code == 0, found.output
    hit = json.loads(found.stdout)[0]
    assert hit["source_id"] == "сканы/опись.pdf" and hit["page"] == 2 and hit["text"].startswith("[опись.pdf · лист 2]")

    # reject one item from its page with the keyboard (X), then batch-release three from the queue
    driver.get(f"{base}/review?reason=text-quality")
    assert len(_rows(driver)) == 4
    _click(driver, driver.find_element(By.LINK_TEXT, "старые/слой_4.txt"))
    _navigating(driver, lambda: driver.find_element(By.TAG_NAME, "body").send_keys("x"))
    assert "отклонён" in driver.find_element(By.ID, "message").text.lower()
    driver.get(f"{base}/review?reason=text-quality")
    rows = _rows(driver)
    assert len(rows) == 3
    for box in driver.find_elements(By.CSS_SELECTOR, "input.pick"):
        box.click()
    _click(driver, driver.find_element(By.ID, "batch-release"))
    assert "допущен: 3" in driver.find_element(By.ID, "message").text.lower()
    assert _rows(driver) == []
    with SqliteIndex(settings.index_path) as index:
        statuses = {i["source_id"]: i["status"] for i in index.quarantine_items() if i["source_id"].startswith("ст")}
        trail = [d for i in index.quarantine_items() for d in index.quarantine_item(i["item_id"])["decisions"]]
    assert statuses == {
        "старые/слой_1.txt": "released",
        "старые/слой_2.txt": "released",
        "старые/слой_3.txt": "released",
        "старые/слой_4.txt": "rejected",
    }
    assert len(trail) == 5 and {d["reviewer"] for d in trail} == {"Петрова"}


def test_a_search_key_and_a_reviewer_without_hr_are_refused(
    served: tuple[str, Settings], browser: webdriver.Chrome
) -> None:
    base, settings = served
    driver = browser
    _login(driver, base, "search-1")
    assert "ключ для поиска" in driver.find_element(By.ID, "message").text
    assert _status(driver, base, "/review/api/items", "search-1") == 403
    assert _status(driver, base, "/review", "search-1") == 403
    hr_item = _hr_item(settings)
    _login(driver, base, "rev-public")
    assert driver.find_element(By.ID, "reviewer").text == "Иванов"
    driver.get(f"{base}/review/items/{hr_item}")
    assert "no such item visible to this reviewer" in driver.page_source
    assert _status(driver, base, f"/review/items/{hr_item}/image", "rev-public") == 404
    assert _status(driver, base, f"/review/items/{hr_item}", "rev-all") == 200

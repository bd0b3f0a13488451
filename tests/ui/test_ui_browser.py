"""The viewer in a real browser: headless Chromium (Debian's, via Selenium) follows links as a
reader would, searches, checks that hostile entries run no script, moves by keyboard, and
saves a screenshot of each page (under $LIFELINE_UI_ARTIFACTS, default tmp/artifacts)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import ARTIFACTS_ENV, chromium, require_browser
from tests.support.paths import REPO
from tests.support.ui_project import Project, build_project
from tests.support.ui_server import running_viewer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get(ARTIFACTS_ENV) or REPO / "tmp" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Project]]:
    require_browser()
    project = build_project(tmp_path_factory.mktemp("browser") / "project")
    with running_viewer(project.root) as url:
        yield url, project


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def _shot(driver: Any, artifacts: Path, name: str) -> None:
    driver.save_screenshot(str(artifacts / f"{name}.png"))


def _pwned(driver: Any) -> object:
    return driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")


def test_truth_to_entry_to_parent_to_history(
    site: tuple[str, Project], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    url, project = site
    browser.get(url + "/")
    assert browser.current_url.endswith("/lines/ledger/")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Truth of ledger"
    _shot(browser, artifacts, "truth")
    browser.find_element(By.CSS_SELECTOR, f'a[href$="/entries/{project.ids["fix"]}"]').click()
    assert "PostgreSQL 16" in browser.find_element(By.TAG_NAME, "h1").text
    _shot(browser, artifacts, "entry")
    parents = browser.find_element(By.ID, "h-parents").find_element(By.XPATH, "..")
    parents.find_element(By.CSS_SELECTOR, "a.eid").click()
    assert browser.current_url.endswith(project.ids["db"])
    assert "Superseded by" in browser.page_source
    browser.find_element(By.LINK_TEXT, "History").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "History of ledger"
    rows = browser.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")
    assert len(rows) == len(project.ids)
    _shot(browser, artifacts, "history")


def _wait_replaced(driver: Any, element: Any) -> None:
    """Wait until a submitted form's page has replaced the one holding `element`. While Chromium
    swaps documents, asking about the old element can fail with an inspector error ("Node with
    given id does not belong to the document") rather than a stale reference: ask again."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 15, ignored_exceptions=(WebDriverException,))
    wait.until(staleness_of(element))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def test_search_and_filter_forms(site: tuple[str, Project], browser: Any, artifacts: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url, project = site
    browser.get(url + "/lines/ledger/")
    box = browser.find_element(By.ID, "q")
    box.send_keys("webhook retries")
    box.submit()
    _wait_replaced(browser, box)
    hits = browser.find_elements(By.CSS_SELECTOR, "ol.hits li a.eid")
    assert hits and any(h.get_attribute("href").endswith(project.ids["left"]) for h in hits)
    _shot(browser, artifacts, "search")
    browser.get(url + "/lines/ledger/history")
    Select(browser.find_element(By.NAME, "kind")).select_by_visible_text("decision")
    button = browser.find_element(By.CSS_SELECTOR, "form.filters button")
    button.click()
    _wait_replaced(browser, button)
    kinds = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "tbody .tag.kind")}
    assert kinds == {"decision"}


def test_hostile_entry_runs_no_script(
    site: tuple[str, Project], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    url, project = site
    for path in (
        "/lines/ledger/",
        f"/lines/ledger/entries/{project.ids['hostile']}",
        "/lines/ledger/history",
        "/mesh",
    ):
        browser.get(url + path)
        assert _pwned(browser) is None, path
    browser.get(url + f"/lines/ledger/entries/{project.ids['hostile']}")
    assert "<script>window.__pwned = 1</script>" in browser.find_element(By.TAG_NAME, "h1").text
    for link in browser.find_elements(By.CSS_SELECTOR, ".body a"):
        assert link.get_attribute("href").startswith("https://"), link.get_attribute("href")
    _shot(browser, artifacts, "hostile-entry")


def test_sessions_list_transcript_folded_call_and_bundle(
    site: tuple[str, Project], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    url, _project = site
    browser.get(url + "/")
    browser.find_element(By.LINK_TEXT, "Sessions").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sessions of sessions"
    rows = browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr")
    assert len(rows) > 5
    _shot(browser, artifacts, "sessions")
    browser.find_element(By.PARTIAL_LINK_TEXT, "fix <b>login</b>").click()
    assert _pwned(browser) is None
    assert "<script>window.__pwned = 5</script>" in browser.find_element(By.TAG_NAME, "h1").text
    assert browser.find_element(By.CSS_SELECTOR, "mark.redacted").text == "[REDACTED:env-secret]"
    call = browser.find_element(By.CSS_SELECTOR, "details.call")
    output = call.find_elements(By.TAG_NAME, "pre")[-1]
    assert not output.is_displayed()  # folded
    call.find_element(By.TAG_NAME, "summary").click()
    assert output.is_displayed()
    assert output.text == "<script>window.__pwned = 7</script> done"
    assert _pwned(browser) is None
    _shot(browser, artifacts, "transcript")
    browser.get(url + "/lines/sessions/unfinished")
    deadline = time.monotonic() + 60
    while browser.find_elements(By.ID, "not-yet"):  # found in the background
        assert time.monotonic() < deadline
        time.sleep(0.1)
        browser.refresh()
    assert browser.find_elements(By.CSS_SELECTOR, "ol.unfinished > li")
    browser.find_element(By.LINK_TEXT, "bundle").click()
    assert browser.find_element(By.ID, "bundle-text").text
    assert _pwned(browser) is None
    _shot(browser, artifacts, "bundle")


def test_graph_and_mesh_pages(site: tuple[str, Project], browser: Any, artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    url, project = site
    browser.get(url + f"/lines/ledger/graph/{project.ids['note']}")
    nodes = browser.find_elements(By.CSS_SELECTOR, "svg.dag a")
    assert len(nodes) >= 5
    _shot(browser, artifacts, "graph")
    browser.get(url + "/mesh")
    assert browser.find_element(By.CSS_SELECTOR, "svg.topology").is_displayed()
    assert "demo-mesh" in browser.find_element(By.TAG_NAME, "h1").text
    _shot(browser, artifacts, "mesh")


def test_keyboard_reaches_the_content_and_the_sections(
    site: tuple[str, Project], browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, _project = site
    browser.get(url + "/lines/ledger/")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    first = browser.switch_to.active_element
    assert first.text == "Skip to content"
    first.send_keys(Keys.ENTER)
    assert browser.current_url.endswith("#main")
    focused: list[str] = []
    browser.get(url + "/lines/ledger/")
    for _ in range(6):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        focused.append(browser.switch_to.active_element.text)
    assert "History" in focused and "Mesh" in focused


def test_pages_read_without_javascript(site: tuple[str, Project], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    url, project = site
    with chromium() as driver:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
        driver.get(url + f"/lines/ledger/entries/{project.ids['db']}")
        assert project.ids["db"] in driver.find_element(By.ID, "entry-id").text
        assert not driver.find_element(By.CSS_SELECTOR, "button.copy").is_displayed()

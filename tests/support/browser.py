"""Headless Chromium through Selenium, for the viewer's end-to-end tests and screenshots.

Uses Debian's ``chromium`` and ``chromium-driver`` (no browser download at run time). Without
them the tests skip with a message saying how to install them; with ``CI`` set they fail
instead, so a CI run can never pass by skipping them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.needs import missing

__all__ = ["ARTIFACTS_ENV", "chromium", "find_browser"]

ARTIFACTS_ENV = "LIFELINE_UI_ARTIFACTS"
HOW = "apt-get install -y chromium chromium-driver (Debian/Ubuntu), then run the tests again"


def find_browser() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def require_browser() -> tuple[str, str]:
    found = find_browser()
    if found is None:
        missing(f"headless Chromium and chromedriver are not installed: {HOW}")
    return found


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium WebDriver (closed on exit)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--no-first-run",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()

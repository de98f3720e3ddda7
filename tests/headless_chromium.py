"""Debian's chromium, headless through selenium, for the browser tests (skips cleanly where the
browser, its driver or selenium is missing; Playwright's own browser download fails here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# set RAYPRESS_SCREENSHOTS to keep a copy of each screenshot beyond the test's tmp dir
SHOTS_COPY = Path(os.environ["RAYPRESS_SCREENSHOTS"]) if os.environ.get("RAYPRESS_SCREENSHOTS") else None


def webdriver_or_skip() -> Any:
    """selenium's ``webdriver`` module, or the test skips naming what to install."""
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    if not CHROMEDRIVER.exists():
        pytest.skip(f"no chromedriver at {CHROMEDRIVER} (apt-get install chromium-driver)")
    try:
        from selenium import webdriver
    except ImportError:
        pytest.skip("selenium is not installed")
    return webdriver


def start_chromium(webdriver: Any, width: int, *extra_args: str) -> Any:
    """A headless chromium ``width`` pixels wide that keeps the page's console log."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},1000", "--disable-extensions", "--no-first-run", *extra_args):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    return driver

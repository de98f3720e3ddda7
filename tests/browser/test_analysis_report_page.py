"""report.html in a real browser: opened from disk (file://, nothing else to load), every chart drawn
at a real size, no console errors, its small script working; and the same page in a sandboxed frame
as the run page shows it, where scripts are off and it must read the same.

Headless Debian chromium through selenium (skips cleanly where either is missing).  The full-page
screenshot is left in the test's tmp_path, and copied to $RAYPRESS_SCREENSHOTS/analysis_report.png
when that is set (docs/analysis_report.png is made from it)."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headless_chromium import SHOTS_COPY, start_chromium, webdriver_or_skip

from raypress.dag.analyze.report_html import render

pytestmark = [pytest.mark.timeout(180)]

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "analysis_sample.json"
WIDTH = 1200
MAX_HEIGHT = 16000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_chromium(webdriver_or_skip(), WIDTH, "--hide-scrollbars")
    yield driver
    driver.quit()


def _errors(driver: Any) -> list[dict[str, Any]]:
    try:
        return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    except Exception:  # a driver without logs: nothing to check
        return []


SVG_SIZES = "return Array.from(document.querySelectorAll('svg')).map(s => {const r = s.getBoundingClientRect();" \
            " return [s.getAttribute('class'), r.width, r.height];})"


def test_report_page_in_a_browser(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    analysis = json.loads(SAMPLE.read_text())
    stats = analysis["outputs"][0]["stats"]
    page = tmp_path / "report.html"
    page.write_text(render(analysis), encoding="utf-8")
    _errors(browser)  # drop anything from before
    browser.get(page.as_uri())

    sizes = browser.execute_script(SVG_SIZES)
    assert sizes and all(w > 100 and h > 30 for _, w, h in sizes), sizes
    classes = [c for c, _, _ in sizes]
    assert sum("hist" in c.split() for c in classes) == len(stats)
    assert sum("line" in c.split() for c in classes) == sum(len(s["sensitivity"]) for s in stats)
    assert sum("overlap" in c.split() for c in classes) == 1
    # a histogram fits its column: two charts side by side on a 1100 px page
    hist = browser.find_element(By.CSS_SELECTOR, "svg.hist")
    assert 400 <= hist.size["width"] <= 560

    # the script's niceties: the buttons show, "expand all" opens every <details>
    button = browser.find_element(By.CSS_SELECTOR, '[data-act="open"]')
    assert button.is_displayed()
    button.click()
    assert browser.execute_script("return Array.from(document.querySelectorAll('details')).every(d => d.open)")
    browser.find_element(By.CSS_SELECTOR, '[data-act="tok"]').click()
    tok = browser.find_element(By.CSS_SELECTOR, "svg.line polyline.tok")
    assert tok.value_of_css_property("display") == "none"
    browser.find_element(By.CSS_SELECTOR, '[data-act="tok"]').click()
    browser.find_element(By.CSS_SELECTOR, '[data-act="close"]').click()
    # the shot shows one threshold's nearest rows opened, as a person would look at them
    browser.find_element(By.CSS_SELECTOR, "#o0-stat0 details > summary").click()

    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.set_window_size(WIDTH, min(height + 140, MAX_HEIGHT))  # the window's frame takes some of it
    browser.execute_script("window.scrollTo(0, 0)")
    shot = tmp_path / "analysis_report.png"
    browser.save_screenshot(str(shot))
    browser.set_window_size(WIDTH, 1000)
    print(f"screenshot: {shot}")
    if SHOTS_COPY is not None:
        SHOTS_COPY.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, SHOTS_COPY / shot.name)
    assert shot.stat().st_size > 20_000

    errors = _errors(browser)
    assert not errors, errors


def test_report_page_in_a_sandboxed_frame(browser: Any, tmp_path: Path) -> None:
    """As the run page shows it: ``<iframe sandbox srcdoc=...>``, scripts off."""
    from selenium.webdriver.common.by import By

    report = render(json.loads(SAMPLE.read_text()))
    outer = tmp_path / "frame.html"
    outer.write_text(f'<!DOCTYPE html><html><body><iframe sandbox="" style="width:1100px;height:900px" '
                     f'srcdoc="{html.escape(report, quote=True)}"></iframe></body></html>', encoding="utf-8")
    _errors(browser)
    browser.get(outer.as_uri())
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    try:
        sizes = browser.execute_script(SVG_SIZES)
        assert sizes and all(w > 100 and h > 30 for _, w, h in sizes), sizes
        # no script ran: its buttons stay hidden, the page itself is all there
        assert not browser.find_element(By.CSS_SELECTOR, '[data-act="open"]').is_displayed()
        assert browser.find_element(By.ID, "o0-stats").is_displayed()
    finally:
        browser.switch_to.default_content()
    errors = [e for e in _errors(browser) if e.get("source") == "javascript"]
    assert not errors, errors

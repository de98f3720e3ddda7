"""The run page in a real browser, as a user works it: token, a pipeline with a mistake shown at
its line, a submitted run watched to its end, the rows one filter dropped, a run cancelled.

Headless Debian chromium through selenium, against one real `raypress server` on a private local
Ray cluster (tests/pipelines_server.py) for the whole file.  Each step leaves a screenshot in the
test's tmp_path (paths printed; a copy in $RAYPRESS_SCREENSHOTS when set) for a person to look at.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from headless_chromium import SHOTS_COPY, start_chromium, webdriver_or_skip
from pipelines_server import SMALL_PIPELINE, TOKEN, Server, running_server, write_slow_inputs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RUN_TIMEOUT_S = 240
WIDTH = 1280

# SMALL_PIPELINE with its filter's op misspelled: the problem is on line 8 (`op:` of long_enough)
BROKEN = SMALL_PIPELINE.replace("op: words_num_filter", "op: words_num_filtr")
BROKEN_LINE = 8


@pytest.fixture(scope="module")
def webdriver_module() -> Any:
    return webdriver_or_skip()


@pytest.fixture(scope="module")
def server(webdriver_module: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    with running_server(tmp_path_factory.mktemp("pipelines")) as srv:
        slow = write_slow_inputs(srv.base_dir, rows=150_000)  # cancelled long before it would end
        yield srv, slow


@pytest.fixture(scope="module")
def browser(webdriver_module: Any) -> Iterator[Any]:
    driver = start_chromium(webdriver_module, WIDTH)
    yield driver
    driver.quit()


class Page:
    """The browser and the small verbs the test is written in."""

    def __init__(self, driver: Any, shots: Path) -> None:
        from selenium.webdriver.common.by import By

        self.driver, self.by, self.shots = driver, By, shots
        self.taken: list[Path] = []

    def find(self, css: str) -> Any:
        return self.driver.find_element(self.by.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        return self.driver.find_elements(self.by.CSS_SELECTOR, css)

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 20) -> Any:
        """``check()``'s first truthy value, polled; elements replaced under it are retried."""
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

        deadline = time.monotonic() + timeout
        while True:
            try:
                value = check()
                if value:
                    return value
            except (NoSuchElementException, StaleElementReferenceException):
                value = None  # the page redrew the element under us: look again on the next poll
            if time.monotonic() > deadline:
                self.shot("failed-wait")
                raise AssertionError(f"timed out after {timeout} s waiting for {what} (url {self.driver.current_url})")
            time.sleep(0.2)

    def visible(self, css: str, timeout: float = 20) -> Any:
        return self.wait(f"{css} to be shown", lambda: next((e for e in self.all(css) if e.is_displayed()), None),
                         timeout)

    def click(self, css: str, timeout: float = 20) -> None:
        """Click ``css``, again if the page re-drew it between finding and clicking."""
        from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException

        def attempt() -> bool:
            try:
                self.find(css).click()
            except (StaleElementReferenceException, ElementClickInterceptedException):
                return False
            return True

        self.wait(f"{css} to be clicked", attempt, timeout)

    def texts(self, css: str) -> list[str]:
        return [e.text for e in self.all(css)]

    def type_into(self, css: str, text: str) -> None:
        """Select all and type, as a person replacing the box's text does (a paste, in effect)."""
        from selenium.webdriver.common.keys import Keys

        box = self.find(css)
        box.click()
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)
        box.send_keys(text)

    def shot(self, name: str) -> Path:
        """A screenshot of the whole page (the window stretched to the page's height)."""
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(WIDTH, min(max(int(height) + 140, 1000), 4000))
        path = self.shots / f"{len(self.taken) + 1:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        self.driver.set_window_size(WIDTH, 1000)
        self.taken.append(path)
        print(f"screenshot: {path}")
        if SHOTS_COPY is not None:
            SHOTS_COPY.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, SHOTS_COPY / path.name)
        return path

    def run_id(self) -> str:
        match = self.wait("the run page's address", lambda: re.search(r"#/runs/([^/?]+)$", self.driver.current_url))
        return match.group(1)

    def run_state(self) -> str | None:
        return self.find("#run-state").get_attribute("data-state")


def test_run_page(server: tuple[Server, str], browser: Any, tmp_path: Path) -> None:
    srv, slow_pipeline = server
    shots = tmp_path / "shots"
    shots.mkdir()
    page = Page(browser, shots)

    # the token, asked for once
    browser.get(f"{srv.url}/")
    page.visible("#token-form")
    page.find("#token").send_keys(TOKEN)
    page.find("#token-save").click()
    page.visible("#runs")
    assert not page.find("#token-form").is_displayed()
    page.shot("runs-empty")

    # a pipeline with a mistake: the problem is shown at its line, in the gutter and the list
    page.find("#nav-new").click()
    page.visible("#yaml")
    page.type_into("#yaml", BROKEN)
    problem = page.visible(f'#problems li[data-line="{BROKEN_LINE}"]')
    assert problem.text.startswith(f"line {BROKEN_LINE}:") and "words_num_filtr" in problem.text, problem.text
    assert page.find(f'#gutter div[data-line="{BROKEN_LINE}"]').get_attribute("class") == "bad"
    assert len(page.all("#gutter div.bad")) == 1
    page.shot("new-run-problem")

    # the fixed pipeline, validated by itself after typing stops, submitted with a double click
    page.type_into("#yaml", SMALL_PIPELINE)
    page.wait("the pipeline to validate", lambda: page.find("#validate-status").get_attribute("data-ok") == "true")
    assert not page.all("#problems li") and not page.all("#gutter div.bad")
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).double_click(page.find("#submit")).perform()
    run_id = page.run_id()
    with srv.client() as client:
        made = [r["id"] for r in client.get("/v1/runs", params={"name": "api-small"}).json()["runs"]]
    assert made == [run_id], f"a double click made {made}"

    # the run page follows the run to its end
    page.visible("#dag")
    page.wait("the run to succeed", lambda: page.run_state() in ("succeeded", "failed", "crashed", "cancelled"),
              RUN_TIMEOUT_S)
    assert page.run_state() == "succeeded", page.find("#run-reason").text
    dag_states = page.wait("every DAG node to succeed", lambda: (
        states := {g.get_attribute("data-node"): g.get_attribute("data-state") for g in page.all("#dag [data-node]")})
        and set(states.values()) == {"succeeded"} and states)
    assert set(dag_states) == {"docs", "long_enough", "out"}
    assert page.visible("#run-adds-up").text == "adds up"  # the ledger's: once the run's final view is in
    cells = page.wait("long_enough's counts", lambda: (
        found := page.texts('#nodes tr[data-node="long_enough"] td')) and found[2] == "4" and found)
    assert cells[3] == "2" and "50%" in cells[4] and "num_words < min: 2" in cells[5] and cells[-1] == "adds up", cells
    page.visible('#timeline .tl-row[data-node="long_enough"]')
    page.wait("the run's log lines", lambda: len(page.all("#logs .logline")) > 3)
    page.visible('#artifacts li[data-artifact="ledger.json"]')
    assert not page.find("#cancel").is_displayed()
    page.shot("run-succeeded")

    # the rows its filter dropped, from the reason's link
    page.click('#nodes tr[data-node="long_enough"] a[data-reason="num_words < min"]')
    rows = page.wait("the 2 rejected rows", lambda: len(found := page.all("#rejects tbody tr[data-row]")) == 2 and found)
    stats = sorted(r.find_element(page.by.CSS_SELECTOR, "td.stat").text for r in rows)
    assert stats == ["1 < min_num 3", "2 < min_num 3"], stats
    assert sorted(r.get_attribute("data-row") for r in rows) == ["docs.jsonl:1", "docs.jsonl:2"]
    rows[0].find_element(page.by.TAG_NAME, "summary").click()
    assert '"text": "hello"' in rows[0].find_element(page.by.TAG_NAME, "pre").text
    assert not page.find("#next-page").is_enabled()
    page.shot("rejects")

    # a long run, cancelled from its page
    page.find("#nav-new").click()
    page.type_into("#yaml", slow_pipeline)
    page.wait("the slow pipeline to validate", lambda: page.find("#validate-status").get_attribute("data-ok") == "true")
    page.find("#submit").click()
    slow_id = page.run_id()
    assert slow_id != run_id
    page.wait("the slow run to start", lambda: page.run_state() in ("queued", "running"), 60)
    page.wait("a node of the slow run to run, shown live", lambda: page.all('#dag [data-state="running"]')
              or page.run_state() not in ("queued", "running"), RUN_TIMEOUT_S)
    assert page.run_state() == "running", page.find("#run-reason").text
    page.visible('#timeline .tl-row')
    page.shot("slow-running")
    page.click("#cancel")
    page.wait("the run to be cancelled", lambda: page.run_state() == "cancelled", RUN_TIMEOUT_S)
    page.visible("#resume")
    assert not page.find("#cancel").is_displayed()
    page.shot("cancelled")

    # the list shows both, each with its state's badge; a state filter keeps one
    page.find("#nav-runs").click()
    page.wait("both runs listed", lambda: {b.get_attribute("data-state") for b in page.all("#runs .badge[data-state]")}
              == {"succeeded", "cancelled"})
    page.shot("runs")
    from selenium.webdriver.support.select import Select

    Select(page.find("#filter-state")).select_by_value("cancelled")
    page.wait("the filtered list", lambda: [r.get_attribute("data-run") for r in page.all("#runs tr[data-run]")]
              == [slow_id])

    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE" and e.get("source") == "javascript"]
    assert not errors, errors

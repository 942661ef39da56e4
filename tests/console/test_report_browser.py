"""The report page in a real browser (headless Chromium through Playwright): no script errors, every chart
drawn with a size, every section visible, and a hostile memory shown as text, creating no element.

Needs Debian's ``chromium`` at /usr/bin/chromium and the ``playwright`` package (the ``test`` extra);
``scripts/test.sh`` installs both. Skipped without them, except under CI=true, where that is a failure."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.report import build_report
from console.report_page import render_report
from storage.records import Scope
from tests.console.test_report import HOSTILE, SCOPE, build_sample
from tests.helpers import make_runtime, settings_for

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SECTION_TITLES = ["Feedback impact", "Drift", "Corroboration clusters", "Store health"]


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: .venv/bin/pip install -e '.[test]' (or pip install playwright)"
    if not CHROMIUM.exists():
        return (
            f"{CHROMIUM} is missing: apt-get install -y chromium (Debian; scripts/test.sh does it as root). "
            "Do not run `playwright install`: the tests use the system browser"
        )
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    problem = _missing()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {problem}")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The report of the sample store (see test_report.py) and of a scope with nothing in it."""
    folder = tmp_path_factory.mktemp("report")
    runtime = make_runtime(settings_for(folder / "store"))
    try:
        build_sample(runtime)
        written = {}
        for name, scope in (("sample", SCOPE), ("empty", Scope("nobody", "nothing"))):
            written[name] = folder / f"{name}.html"
            written[name].write_text(render_report(build_report(runtime, scope)), encoding="utf-8")
        return written
    finally:
        runtime.close()


class Opened:
    """A page loaded from a file, with every page error, console error and dialog it produced."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on(
            "console",
            lambda message: (
                self.problems.append(f"console error: {message.text}") if message.type == "error" else None
            ),
        )
        self.page.on("dialog", self._dialog)
        self.page.goto(path.as_uri(), wait_until="load")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()


@pytest.fixture
def opened(browser: Any) -> Iterator[Any]:
    tabs: list[Opened] = []

    def open_page(path: Path) -> Opened:
        tabs.append(Opened(browser, path))
        return tabs[-1]

    yield open_page
    for tab in tabs:
        tab.page.close()


@pytest.mark.slow
def test_the_report_renders_every_chart_and_section_without_errors(opened, pages):
    started = time.perf_counter()
    tab = opened(pages["sample"])
    page = tab.page
    charts = page.locator("svg.chart")
    # histogram, scatter, weight history, drift timeline, cluster bars, 4 memory counts, rows, fragments
    assert charts.count() == 11
    for index in range(charts.count()):
        box = charts.nth(index).bounding_box()
        label = charts.nth(index).get_attribute("aria-label")
        assert box is not None and box["width"] > 100 and box["height"] > 40, (label, box)
    headings = page.locator("section > h2")
    assert headings.all_inner_texts() == SECTION_TITLES
    for index in range(headings.count()):
        assert headings.nth(index).is_visible()
    assert page.locator("nav a").all_inner_texts() == SECTION_TITLES
    page.locator("nav a", has_text="Store health").click()
    assert page.locator("#health").is_visible()
    assert tab.problems == [] and tab.dialogs == []
    assert time.perf_counter() - started < 30


@pytest.mark.slow
def test_a_hostile_memory_is_text_and_creates_no_element(opened, pages):
    tab = opened(pages["sample"])
    page = tab.page
    for summary in page.locator("details.cluster summary").all():  # open the clusters: members show
        summary.click()
    assert page.locator("img").count() == 0 and page.locator("[onerror]").count() == 0
    assert page.locator("script").count() == 1  # the page's own
    shown = page.locator(".preview", has_text="<script>alert(1)</script>")
    assert shown.count() >= 2 and HOSTILE in shown.first.inner_text()
    page.wait_for_timeout(200)  # an injected handler would have fired by now
    assert tab.dialogs == [] and tab.problems == []


@pytest.mark.slow
def test_sorting_a_table_by_a_column_reorders_its_rows(opened, pages):
    tab = opened(pages["sample"])
    table = tab.page.locator("#feedback table.sortable").first
    header = table.locator("th", has_text="lowered")

    def lowered() -> list[int]:
        return [int(text) for text in table.locator("tbody tr td:nth-child(5)").all_inner_texts()]

    header.click()
    assert lowered() == sorted(lowered()) and header.get_attribute("data-dir") == "asc"
    header.click()
    assert lowered() == sorted(lowered(), reverse=True) and header.get_attribute("data-dir") == "desc"
    assert tab.problems == []


@pytest.mark.slow
def test_an_empty_scope_shows_how_to_get_data(opened, pages):
    tab = opened(pages["empty"])
    page = tab.page
    assert page.locator("section > h2").all_inner_texts() == SECTION_TITLES
    hints = page.locator(".empty")
    assert hints.count() == 5 and all(hints.nth(i).is_visible() for i in range(hints.count()))
    assert "report_outcome" in hints.first.inner_text()
    for index in range(page.locator("svg.chart").count()):  # the store-wide table charts
        box = page.locator("svg.chart").nth(index).bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
    assert tab.problems == [] and tab.dialogs == []

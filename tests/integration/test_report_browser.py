"""The demo's report in a real browser: headless Chromium through Selenium and ChromeDriver.

Debian's `chromium` and `chromium-driver` packages (./run.sh test installs them when it runs as
root). Without them the tests are skipped, saying what to install. The screenshot README shows
(docs/img/report.png) is made here: UPDATE_SCREENSHOTS=1 writes it, other runs write it to a
temporary folder only, so the working tree stays clean.
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

import pytest

from eos_audit.report import report_path, write_report

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "img" / "report.png"
# Chromium on a machine without a network or a screen: no GPU, no background fetches, a fresh
# profile, and no sandbox (CI runs as root).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1000,1400",
)
CHART_SECTIONS = (
    "findings",
    "history",
    "partitions",
    "epochs",
    "transactions",
    "list-offsets",
    "offenders",
)


def _skip(reason: str) -> None:
    print(f"\ntest_report_browser skipped: {reason}", file=sys.stderr)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium driven by ChromeDriver, or a skip saying what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _skip("selenium is not installed: pip install -c constraints.txt -e '.[dev]'")
    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        _skip(
            "no headless browser: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver; ./run.sh test does it as root)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="eos-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is given by path, so Selenium never tries to download one.
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page(browser, spark, demo_run):
    """The demo run's report, opened in the browser.

    The demo's warehouse is made once per session: when test_report.py has already written its
    report there (same run, same tables), that file is opened instead of writing it again.
    """
    _, _, warehouse, _ = demo_run
    path = report_path(warehouse, "night-1")
    if not path.exists():
        path = write_report(spark, warehouse, "night-1")
    browser.get(path.as_uri())
    return browser


def test_it_renders_without_console_errors_or_network(page):
    assert page.title == "eos-audit run night-1"
    assert page.execute_script("return document.readyState") == "complete"
    problems = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert problems == []
    # Self-contained: the page fetched nothing (no script, style, font or image).
    assert page.execute_script("return performance.getEntriesByType('resource').length") == 0


def test_every_chart_is_drawn_with_marks(page):
    charts = page.execute_script(
        """
        return Object.fromEntries(arguments[0].map(id => [id,
          [...document.querySelectorAll('#' + id + ' svg')].map(svg => {
            const box = svg.getBoundingClientRect();
            const marks = [...svg.querySelectorAll('.mark')].filter(m => {
              const b = m.getBoundingClientRect(); return b.width > 0 && b.height > 0; });
            return [Math.round(box.width), Math.round(box.height), marks.length];
          })]));
        """,
        list(CHART_SECTIONS),
    )
    counts = {section: len(svgs) for section, svgs in charts.items()}
    assert counts == {
        "findings": 1,
        "history": 1,
        "partitions": 5,
        "epochs": 5,
        "transactions": 1,
        "list-offsets": 1,
        "offenders": 2,
    }
    for section, svgs in charts.items():
        for width, height, _ in svgs:
            assert width > 300 and height > 40, section
        # Every chart but the timeline of ledger-1 (a partition without findings) has marks.
        with_marks = [marks for _, _, marks in svgs if marks]
        assert len(with_marks) == len(svgs) - (section == "partitions"), (section, svgs)


def test_the_verdict_is_in_the_header_coloured_by_severity(page, demo_run):
    from selenium.webdriver.common.by import By

    verdict = page.find_element(By.CSS_SELECTOR, "header #verdict")
    assert verdict.text.startswith("CRITICAL: 5 violations")
    assert verdict.value_of_css_property("background-color") == "rgba(198, 40, 40, 1)"
    # The run's status stays next to it, as the state of the run.
    status = page.find_element(By.CSS_SELECTOR, "header .status")
    assert status.text == f"run status {demo_run[0].status}"


def test_a_mark_leads_to_its_finding(page):
    from selenium.webdriver.common.by import By

    mark = page.find_element(By.CSS_SELECTOR, "#epochs a[href^='#f-'] .gap-bar")
    href = page.execute_script("return arguments[0].closest('a').getAttribute('href')", mark)
    page.execute_script("arguments[0].closest('a').dispatchEvent(new MouseEvent('click'))", mark)
    assert page.execute_script("return location.hash") == href
    row = page.find_element(By.CSS_SELECTOR, href)
    assert "SEQUENCE_GAP" in page.find_element(By.ID, "t-SEQUENCE_GAP").text
    assert "expected sequence 9" in row.text and "offset 6: the earlier batch" in row.text


def test_screenshot(page, tmp_path):
    page.execute_script("location.hash = ''; window.scrollTo(0, 0)")
    height = page.execute_script("return document.documentElement.scrollHeight")
    # The top of the report down to the producer epochs' first row: what README shows.
    bottom = page.execute_script(
        "return document.querySelector('#epochs figure').getBoundingClientRect().bottom + 12"
    )
    shot = page.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": 1000, "height": min(height, bottom), "scale": 1},
        },
    )
    png = base64.b64decode(shot["data"])
    assert png.startswith(b"\x89PNG") and len(png) > 50_000
    target = SCREENSHOT if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path / "report.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(png)


# Every text of every chart, as the browser lays it out: its box in the chart's own units
# (getBBox), its box on screen and its chart's (getBoundingClientRect), and its class.
TEXT_BOXES = """
return [...document.querySelectorAll('svg')].map(svg => {
  const view = svg.viewBox.baseVal, shown = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].map(t => {
    const b = t.getBBox(), s = t.getBoundingClientRect();
    const own = [...t.childNodes].filter(n => n.nodeType === Node.TEXT_NODE);
    return {text: own.map(n => n.data).join(''), cls: t.getAttribute('class'),
            box: [b.x, b.y, b.x + b.width, b.y + b.height],
            screen: [s.left, s.top, s.right, s.bottom]};
  });
  return {chart: svg.getAttribute('aria-label'), view: [view.width, view.height],
          shown: [shown.left, shown.top, shown.right, shown.bottom], texts};
});
"""
SLACK = 0.5  # px: rounding of the browser's boxes


def _label_problems(driver) -> list[str]:
    """Texts cut off by their chart, overlapping another, or wider than the report measured."""
    from eos_audit.report.svg import text_size, text_width

    problems = []
    for chart in driver.execute_script(TEXT_BOXES):
        width, height = chart["view"]
        left, top, right, bottom = chart["shown"]
        for t in chart["texts"]:
            x0, y0, x1, y1 = t["box"]
            if x0 < -SLACK or y0 < -SLACK or x1 > width + SLACK or y1 > height + SLACK:
                problems.append(f"{chart['chart']}: {t['text']!r} clipped by {width}x{height}")
            s0, s1, s2, s3 = t["screen"]
            if s0 < left - SLACK or s1 < top - SLACK or s2 > right + SLACK or s3 > bottom + SLACK:
                problems.append(f"{chart['chart']}: {t['text']!r} outside the chart on screen")
            if x1 - x0 > text_width(t["text"], text_size(t["cls"])) + SLACK:
                problems.append(f"{chart['chart']}: {t['text']!r} wider than measured ({x1 - x0})")
        texts = chart["texts"]
        for i, a in enumerate(texts):
            for b in texts[i + 1 :]:
                (a0, a1, a2, a3), (b0, b1, b2, b3) = a["box"], b["box"]
                if min(a2, b2) - max(a0, b0) > SLACK and min(a3, b3) - max(a1, b1) > SLACK:
                    problems.append(f"{chart['chart']}: {a['text']!r} overlaps {b['text']!r}")
    return problems


def test_no_chart_label_is_clipped_or_overlaps_another(page):
    assert _label_problems(page) == []


@pytest.fixture
def long_labels_page(browser, tmp_path):
    """A report with long labels and two runs minutes apart, in a tab of its own.

    The sample data of tests/report/test_data.py: a NEW_EPOCH_NONZERO_SEQUENCE finding, a
    long topic name, a count in the millions, and this run a rerun four minutes after the night's.
    """
    from eos_audit.report.page import render_report
    from tests.report import test_data as sample

    path = tmp_path / "long-labels.html"
    path.write_text(render_report(sample._long_labels_data()), encoding="utf-8")
    demo = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(path.as_uri())
    try:
        yield browser
    finally:
        browser.close()
        browser.switch_to.window(demo)


def test_long_labels_and_runs_minutes_apart_are_drawn_whole_and_apart(long_labels_page):
    page = long_labels_page
    assert _label_problems(page) == []
    labels = page.execute_script(
        "return [...document.querySelectorAll('#findings svg text.label')].map(t => t.textContent)"
    )
    assert "NEW_EPOCH_NONZERO_SEQUENCE" in labels
    runs = page.execute_script(
        "return [...document.querySelectorAll('#history svg text.tick')].map(t => t.textContent)"
    )
    assert runs[-4:] == ["11-21 03:00", "11-22 03:00", "11-23 03:00", "11-23 03:04"]
    # Each run's bar stands apart from its neighbours' on screen.
    bars = page.execute_script(
        """return [...document.querySelectorAll('#history .mark.bar.batches')].map(r => {
             const b = r.getBoundingClientRect(); return [b.left, b.right]; });"""
    )
    assert len(bars) == 4
    assert all(b[0] - a[1] >= 1 and b[1] - b[0] >= 2 for a, b in pairwise(bars))

"""Every teacher page works on a phone and for everyone, in real Chromium (Debian's package, driven by Playwright):

* axe-core (Deque's accessibility engine, installed from the npm registry by ``scripts/setup.sh --dev`` into
  ``.venv/axe``; ``$MADRAG_AXE`` names another ``axe.min.js``) injected into each page and run with the WCAG 2 A
  and AA rules finds no critical and no serious violation, at a phone's width and a desktop's;
* at 390 px wide (an iPhone 12-15) the page never scrolls sideways (``scrollWidth <= 390``): a wide table
  scrolls inside its own box, which the keyboard can reach;
* every link, button and form control the teacher taps is at least 24 x 24 px (WCAG 2.2, 2.5.8).

Every ``<details>`` is opened first, so what it hides is checked too. Without Chromium, Playwright or axe-core the
tests skip, unless ``MADRAG_REQUIRE_BROWSER=1`` (as ``.ci/run`` sets) makes that a failure.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.browser.test_server_browser import CHROMIUM, LAUNCH_ARGS, REPO, Server, _free_port, to_backend
from tests.e2e.browser.test_server_browser import pytestmark as browser_mark
from tests.e2e.browser.test_teacher_browser import forms_export
from tests.web_helpers import RUBRIC, TEXTS, essays_csv

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
AXE = Path(os.environ.get("MADRAG_AXE") or REPO / ".venv" / "axe" / "node_modules" / "axe-core" / "axe.min.js")
LONG_ID = "student-" + "x" * 60  # an id with no place to break: it must wrap, not widen the page
MIN_TARGET_PX = 24

if not AXE.is_file() and os.environ.get("MADRAG_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"browser tests required but axe-core is not installed at {AXE} (bash scripts/setup.sh --dev)")
pytestmark = [
    browser_mark,
    pytest.mark.skipif(not AXE.is_file(), reason=f"axe-core not installed at {AXE} (bash scripts/setup.sh --dev)"),
]

OPEN_DETAILS = "document.querySelectorAll('details').forEach(d => { d.open = true; })"
RUN_AXE = """async () => {
  const found = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}});
  return found.violations.filter(v => v.impact === 'critical' || v.impact === 'serious').map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + n.failureSummary)}));
}"""
SMALL_TARGETS = """(min) => {
  const out = [];
  const seen = new Set();
  for (const el of document.querySelectorAll('a[href], button, select, textarea, summary, input:not([type=hidden])')) {
    let target = el;
    if ((el.type === 'radio' || el.type === 'checkbox') && el.closest('label')) { target = el.closest('label'); }
    if (seen.has(target)) { continue; }
    seen.add(target);
    const box = target.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) { continue; }  // not shown (e.g. hidden fields of another choice)
    if (box.width < min - 0.5 || box.height < min - 0.5) {
      out.push(target.tagName.toLowerCase() + (target.id ? '#' + target.id : '') + ' "' +
               (target.textContent || target.value || '').trim().slice(0, 30) + '" ' +
               Math.round(box.width) + 'x' + Math.round(box.height));
    }
  }
  return out;
}"""


def _class_file(path: Path) -> Path:
    extra = [
        {"id": LONG_ID, "text": TEXTS[0] + " " + "y" * 120, "rater1_Ideas": 2, "rater1_Style": 3, "fold": 0},
    ]
    path.write_text(essays_csv(11, extra=extra), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, list[str]]]:
    """A server with a finished class run, a calibration, drafts at every step and a column mapping; and the
    address of every teacher page."""
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("a11y")
    server = Server(tmp / "server", tmp / "cache", _free_port())
    server.start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            tab = browser.new_context(viewport=DESKTOP).new_page()
            tab.set_default_timeout(60_000)
            pages = _make_pages(server, tab, tmp)
            browser.close()
        yield server, pages
    finally:
        server.stop()


def _make_pages(server: Server, tab: Any, tmp: Path) -> list[str]:
    rubric_file = tmp / "rubric.json"
    rubric_file.write_text(json.dumps(RUBRIC), encoding="utf-8")
    data = _class_file(tmp / "class.csv")
    url = server.url
    to_backend(tab, url, rubric_file, data, pool="same")
    draft = tab.url.split("/drafts/")[1].split("/")[0]
    setup = [f"/drafts/{draft}/{step}" for step in ("rubric", "essays", "exemplars", "backend")]
    tab.check("input[name=kind][value=fake]")
    tab.evaluate(OPEN_DETAILS)
    tab.uncheck("input[name=protocols][value=MADRAG]")  # the debate without the exemplar index (quicker to build)
    tab.check("input[name=protocols][value=MAD]")
    tab.click("#calibrate")
    tab.wait_for_selector("#calibration-verdict", timeout=180_000)
    calibration = tab.url.replace(url, "")
    tab.click("#score-class")  # the class run, started from the calibration page
    tab.wait_for_selector("#run-status.finished", timeout=180_000)
    run = tab.url.replace(url, "").split("#")[0]
    essay = f"{run}/essays/s1"
    tab.goto(url + "/")
    tab.click("main button.primary")
    tab.click("button:text-is('Use this rubric')")
    forms_export(tmp / "Essay responses.csv")
    with tab.expect_navigation():  # read as soon as it is chosen
        tab.set_input_files("#upload-essays input[name=file]", str(tmp / "Essay responses.csv"))
    tab.wait_for_selector("#columns-form")
    columns = tab.url.replace(url, "")
    return [
        "/",
        *setup,
        columns,
        calibration,
        run,
        f"{run}/results",
        f"{run}/review",
        essay,
        f"{run}/essays/{LONG_ID}",
        f"{run}/gradebook",
        f"{run}/overview",
        f"{run}/feedback",
        f"{run}/feedback/s2",
        f"{run}/evaluation",
        f"{run}/report",  # the HTML report the results page links to: the same checks as the app's pages
        "/runs/no-such-run",
        "/lms",  # Canvas's connect page (connected, its other pages: test_canvas_browser.py)
    ]


def _to_confirm(tab: Any, essay_url: str) -> None:
    """The page asking before the AI's score replaces the teacher's (reached only by a form)."""
    tab.goto(essay_url)
    section = tab.locator("[id='trait-Style']")
    section.locator("button.level[value='1']").first.click()  # a level of the rubric: the teacher's score
    tab.locator("[id='trait-Style'] button[value=accept]").click()
    tab.wait_for_selector("#confirm-accept")
    tab.evaluate(OPEN_DETAILS)


def _open(tab: Any, url: str) -> None:
    tab.goto(url)
    tab.wait_for_load_state("load")
    tab.evaluate(OPEN_DETAILS)


def _axe(tab: Any) -> list[dict[str, Any]]:
    tab.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = tab.evaluate(RUN_AXE)
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


def test_every_teacher_page_was_reached(site: tuple[Server, list[str]]) -> None:
    _server, pages = site
    assert len(pages) == len(set(pages)) == 20
    assert "/calibration" in pages[6] and pages[5].endswith("/columns") and pages[10].endswith("/essays/s1")


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_axe_finds_no_critical_or_serious_violation(
    site: tuple[Server, list[str]], browser: Any, viewport: dict[str, int]
) -> None:
    server, pages = site
    tab = browser.new_context(viewport=viewport, bypass_csp=True).new_page()  # the pages allow no inline script
    found = {}
    for path in pages:
        _open(tab, server.url + path)
        if violations := _axe(tab):
            found[path] = violations
    _to_confirm(tab, server.url + pages[10])
    if violations := _axe(tab):
        found["confirm accept"] = violations
    tab.context.close()
    assert found == {}, json.dumps(found, indent=1)


def test_a_phone_never_scrolls_sideways_and_every_target_is_24_px(site: tuple[Server, list[str]], browser: Any) -> None:
    server, pages = site
    tab = browser.new_context(viewport=PHONE).new_page()
    wide, small = {}, {}
    for path in pages:
        _open(tab, server.url + path)
        width = tab.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[path] = width
        if targets := tab.evaluate(SMALL_TARGETS, MIN_TARGET_PX):
            small[path] = targets
        if path == pages[10]:
            _to_confirm(tab, server.url + path)
            if tab.evaluate("document.documentElement.scrollWidth") > PHONE["width"]:
                wide["confirm accept"] = tab.evaluate("document.documentElement.scrollWidth")
    tab.context.close()
    assert wide == {}, f"pages wider than the phone: {wide}"
    assert small == {}, json.dumps(small, indent=1)


def test_wide_tables_scroll_in_a_box_the_keyboard_reaches(site: tuple[Server, list[str]], browser: Any) -> None:
    server, pages = site
    tab = browser.new_context(viewport=PHONE).new_page()
    run = pages[7]
    _open(tab, server.url + f"{run}/gradebook")
    box = tab.locator(".table-scroll").first
    assert box.get_attribute("tabindex") == "0" and box.get_attribute("role") == "region"
    assert tab.evaluate(
        "(() => { const b = document.querySelector('.table-scroll'); return b.scrollWidth > b.clientWidth; })()"
    )
    box.focus()
    tab.keyboard.press("ArrowRight")
    # polled from here: the page's CSP (script-src 'self') refuses the string eval of Playwright's wait_for_function
    deadline = time.monotonic() + 10
    while tab.evaluate("document.querySelector('.table-scroll').scrollLeft") <= 0:
        assert time.monotonic() < deadline, "the arrow key did not scroll the table's box"
        time.sleep(0.05)
    tab.context.close()


def test_the_checks_see_a_violation_and_a_wide_page(site: tuple[Server, list[str]], browser: Any) -> None:
    """The checks are not empty: an image without a text, grey on grey and a too wide box are found."""
    server, _pages = site
    tab = browser.new_context(viewport=PHONE, bypass_csp=True).new_page()
    _open(tab, server.url + "/")
    bad = '<img src="/static/favicon.svg"><p style="color:#bbb">faint</p><div style="width:600px">w</div>'
    tab.evaluate("(html) => document.querySelector('main').insertAdjacentHTML('beforeend', html)", bad)
    found = {v["id"] for v in _axe(tab)}
    assert {"image-alt", "color-contrast"} <= found
    assert tab.evaluate("document.documentElement.scrollWidth") > PHONE["width"]
    tab.context.close()

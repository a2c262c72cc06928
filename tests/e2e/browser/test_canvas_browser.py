"""The teacher's Canvas round trip in real Chromium (Debian's package, driven by Playwright), on the local Canvas
double (tests/canvas_double.py) with a ``madrag serve`` on loopback: connect (her Canvas address and token), pick
the course and the assignment, pull the 25 submissions into a new class, start it on the fake backend, two
overrides with comments and the bulk approval on the review desk, the preview, "Send to Canvas"; every action
counted (at most 20); the double then holds her decisions; the token is on no page and not in the server's log;
axe-core finds no critical or serious violation on the Canvas pages once connected (the connect page is in
test_pages_a11y's list)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.canvas_double import CanvasDouble, class_of
from tests.e2e.browser.test_pages_a11y import AXE, _axe
from tests.e2e.browser.test_server_browser import (  # noqa: F401 (fixtures, skip mark)
    CHROMIUM,
    LAUNCH_ARGS,
    Server,
    pytestmark,
    server,
    small_shot,
)
from tests.e2e.browser.test_teacher_browser import Clicks

pytest.importorskip("canvasapi")

SENTINEL = "canvas-token-SENTINEL-browser-4b2e"
MAX_ACTIONS = 20
OVERRIDES = (("1001", "Ideas"), ("1002", "Conventions"))


@pytest.fixture()
def double() -> Iterator[CanvasDouble]:
    found = CanvasDouble(class_of(SENTINEL))
    found.start()
    yield found
    found.stop()


@pytest.fixture()
def page() -> Iterator[Any]:
    """A desktop tab that lets axe-core in (the pages allow no inline script)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        yield tab
        context.close()
        browser.close()


def _no_violations(tab: Any, found: dict[str, Any]) -> None:
    if AXE.is_file() and (violations := _axe(tab)):
        found[tab.url] = violations


def test_connect_pull_review_preview_send(
    server: Server,  # noqa: F811
    page: Any,
    double: CanvasDouble,
) -> None:
    clicks, seen, violations = Clicks(page), [], {}
    page.goto(server.url + "/")
    clicks.click("a[href='/lms']")  # From Canvas, in every page's header
    clicks.type("input[name=url]", double.base)
    clicks.type("input[name=token]", SENTINEL)
    clicks.click("#connect")
    assert double.base in page.inner_text("#connected")
    clicks.click("#pick-course")  # her one course, chosen already
    _no_violations(page, violations)
    seen.append(page.content())
    clicks.click("#pull")  # the one assignment, chosen already
    page.wait_for_url("**/backend", timeout=120_000)
    clicks.click("input[name=kind][value=fake]")
    clicks.click("button[value=start]")
    page.wait_for_selector("#review-link", timeout=180_000)
    run_url = page.url.split("#")[0]
    clicks.click("#review-link")
    for essay, trait in OVERRIDES:
        row = f"#review-queue tr[data-essay='{essay}'][data-trait='{trait}']"
        ai = int(page.inner_text(f"{row} b.score"))
        new = 0 if ai > 1 else 2
        clicks.type(f"{row} input[name=comment]", f"re-read: {trait} is {new}")
        clicks.click(f"{row} button.level[value='{new}']")
    if page.locator("#approve-agreeing").count():
        clicks.click("#approve-agreeing")
    clicks.click("a[href='/lms']")
    clicks.click(f"a[href='{run_url.replace(server.url, '')}/lms']")
    _no_violations(page, violations)
    small_shot(page, "t10-canvas-preview")
    statuses = page.locator("#lms-preview tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
    assert len(statuses) == 25 and set(statuses) <= {"send", "undecided"}
    for essay, _trait in OVERRIDES:
        assert page.get_attribute(f"#lms-preview tr[data-essay='{essay}']", "data-status") == "send"
    to_send = statuses.count("send")
    assert all(s.updates == 0 for s in double.data.subs.values())  # the preview sent nothing
    seen.append(page.content())
    clicks.click("#send")
    assert f"Sent {to_send} student" in page.inner_text("#sent")
    seen.append(page.content())
    print(f"actions from the connect to the grades in Canvas: {clicks.count}")
    assert clicks.count <= MAX_ACTIONS
    assert sum(s.updates > 0 for s in double.data.subs.values()) == to_send
    for essay, trait in OVERRIDES:
        sub = double.data.subs[int(essay)]
        criterion = {"Ideas": "_101", "Conventions": "_102"}[trait]
        assert f"re-read: {trait} is" in sub.assessment[criterion]["comments"] and len(sub.comments) == 1
    assert all(SENTINEL not in text for text in seen)
    server.stop()  # its whole log: the token is not in it
    assert server.proc is not None and server.proc.stdout is not None
    log = server.proc.stdout.read().decode("utf-8", "replace")
    assert "Uvicorn running" in log or "127.0.0.1" in log, log[-500:]
    assert SENTINEL not in log
    assert violations == {}, json.dumps(violations, indent=1)

"""A long bulk approval in Chromium: its progress page shows the count checked and, followed by the page's script,
goes back to the review with the count approved once the approval is written."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from tests.e2e.browser.test_server_browser import CHROMIUM, LAUNCH_ARGS, _free_port
from tests.e2e.browser.test_server_browser import pytestmark as browser_mark
from tests.e2e.server.test_review_desk import unscored_run
from tests.web_helpers import HTML, form_post, make_config, token_in

from madrag.server import create_app, reviews
from madrag.server.pages import review as review_page

pytestmark = [browser_mark]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """The app in this process (so its approval can be held), on a loopback port."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(make_config(tmp_path)), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_progress_page_follows_the_approval_and_goes_back_to_the_review(
    served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from playwright.sync_api import sync_playwright

    checked, release, rows = threading.Semaphore(0), threading.Event(), [0]
    real = reviews._values

    def held(review: reviews.Review) -> tuple[object, ...]:
        rows[0] += 1
        if rows[0] == 3:
            checked.release()
            release.wait(30)
        return real(review)

    monkeypatch.setattr(reviews, "_values", held)
    monkeypatch.setattr(review_page, "APPROVAL_WAIT_S", 0.2)
    with httpx.Client(base_url=served, timeout=60) as http:
        run_id = unscored_run(http, 4)  # type: ignore[arg-type]
        token = token_in(http.get(f"/runs/{run_id}/review", headers=HTML).text)
        progress = form_post(http, f"/runs/{run_id}/approve", token).headers["location"]  # type: ignore[arg-type]
        cookies: list[Any] = [{"name": k, "value": v, "url": served} for k, v in http.cookies.items()]
    assert checked.acquire(timeout=20)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_context().new_page()
            page.context.add_cookies(cookies)
            page.goto(served + progress)
            assert page.text_content("#approval-done") == "2" and page.text_content("#approval-total") == "8"
            release.set()
            page.wait_for_url(f"**/runs/{run_id}/review?approved=8", timeout=20_000)
            assert page.text_content("#approved-note") == "Approved 8 scores in bulk."
        finally:
            browser.close()

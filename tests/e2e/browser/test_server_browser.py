"""End to end in real Chromium (Debian's package, driven by Playwright): a teacher uploads a rubric and a CSV,
starts a run on the fake backend, watches it finish, opens an essay, overrides a score and exports the CSV;
script payloads render as text and fire nothing; a run killed with its server resumes after a restart.

Each page is saved as a screenshot into ``$MADRAG_SCREENSHOTS`` (default: a folder in the system's temporary
directory, so a test run leaves the checkout clean; ``MADRAG_SCREENSHOTS=docs/screenshots`` refreshes the docs'
pictures). Without Chromium
or Playwright the tests skip, unless ``MADRAG_REQUIRE_BROWSER=1`` (as ``.ci/run`` sets) makes that a failure.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import RUBRIC, TEXTS, essays_csv

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[3]
SHOTS = Path(os.environ.get("MADRAG_SCREENSHOTS", Path(tempfile.gettempdir()) / "madrag-screenshots"))
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCRIPT_TEXT = "<script>alert('essay')</script> I liked it. <img src=x onerror=\"alert('img')\">"
SCRIPT_ID = "x<img src=y onerror=alert(3)>"


def _browser_ready() -> str | None:
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


_MISSING = _browser_ready()
if _MISSING and os.environ.get("MADRAG_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"browser tests required but {_MISSING}")
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A ``madrag serve`` process on loopback."""

    data_dir: Path
    cache_dir: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "madrag.cli",
            "serve",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--cache-dir",
            str(self.cache_dir),
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/api/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("madrag serve did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def api(self, method: str, path: str, **kw: Any) -> Any:
        response = httpx.request(method, self.url + path, timeout=30, **kw)
        assert response.status_code < 300, response.text
        return response.json()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "server", tmp_path / "cache", _free_port())
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        dialogs: list[str] = []
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        tab.dialogs = dialogs  # type: ignore[attr-defined]
        yield tab
        context.close()
        browser.close()


def shot(page: Any, name: str) -> None:
    """A full-page screenshot; a page that reloads itself while it is taken (a finished run's page does, 0.3 s
    after the end) is taken again once the reload has loaded."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True, timeout=15_000)
    except PlaywrightTimeout:
        page.wait_for_load_state("load")
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def small_shot(tab: Any, name: str, element: str | None = None, height: int = 720) -> None:
    """The top ``height`` pixels of the page, or only ``element`` (a small PNG)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    if element is not None:
        tab.locator(element).screenshot(path=str(SHOTS / f"{name}.png"))
        return
    tab.evaluate("window.scrollTo(0, 0)")
    tab.screenshot(path=str(SHOTS / f"{name}.png"), clip={"x": 0, "y": 0, "width": 1280, "height": height})


def to_backend(page: Any, url: str, rubric_file: Path, data: Path, pool: str = "none") -> None:
    """Through the first steps of a new run to the backend page: ``rubric_file`` uploaded, the essays of
    ``data`` read, the exemplar ``pool`` chosen."""
    page.goto(url + "/")
    page.click("main button.primary")
    page.set_input_files("input[name=file]", str(rubric_file))
    page.click("button:text-is('Upload')")
    with page.expect_navigation():  # read as soon as it is chosen
        page.set_input_files("#upload-essays input[name=file]", str(data))
    page.click("text=Next: exemplars")
    page.check(f"input[name=pool][value={pool}]")
    page.click("text=Next: backend")


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    rubric = {**RUBRIC, "name": "Class <script>alert('rubric')</script> rubric"}
    rubric_file = tmp_path / "rubric.json"
    rubric_file.write_text(json.dumps(rubric), encoding="utf-8")
    extra = [
        {
            "id": SCRIPT_ID,
            "text": SCRIPT_TEXT,
            "rater1_Ideas": 2,
            "rater2_Ideas": 2,
            "rater1_Style": 3,
            "rater2_Style": 3,
            "fold": 0,
        },
        {"id": "s99", "text": "", "rater1_Ideas": 1, "fold": 0},
    ]
    data = tmp_path / "class.csv"
    data.write_text(essays_csv(4, extra=extra), encoding="utf-8")
    return rubric_file, data


def test_teacher_scores_reviews_and_exports(server: Server, page: Any, tmp_path: Path) -> None:
    rubric_file, data = _inputs(tmp_path)
    page.goto(server.url + "/")
    shot(page, "01-runs")
    page.click("main button.primary")
    page.set_input_files("input[name=file]", str(rubric_file))
    shot(page, "02-rubric")
    page.click("button:text-is('Upload')")
    with page.expect_navigation():  # read as soon as it is chosen
        page.set_input_files("#upload-essays input[name=file]", str(data))
    summary = page.locator("#read-summary")
    assert "Read 5 essays, refused 1" in summary.inner_text() and "empty" in summary.inner_text()
    shot(page, "03-essays")
    page.click("text=Next: exemplars")
    page.check("input[name=pool][value=none]")
    shot(page, "04-exemplars")
    page.click("text=Next: backend")
    page.check("input[name=kind][value=fake]")
    page.fill("input[name=fake_latency_s]", "0.05")
    page.fill("input[name=name]", "Period 3")
    page.click("button[value=estimate]")
    page.wait_for_selector("#estimate-calls")
    assert page.inner_text("#estimate-calls") == str(5 * 2 * 3)  # 5 essays x 2 traits x Advocate, Skeptic, Judge
    shot(page, "05-backend-estimate")
    page.click("button[value=start]")
    page.wait_for_selector("#run-log li")
    shot(page, "06-run-progress")
    page.wait_for_selector("#run-status.finished", timeout=60_000)
    assert page.inner_text("#run-done") == page.inner_text("#run-total") == "10"
    page.goto(server.url + page.get_attribute("#results-link", "href"))  # (the run page reloads itself when done)
    page.wait_for_selector("#results-grid tbody tr")
    grid = page.locator("#results-grid")
    assert grid.locator("tbody tr").count() == 5
    shot(page, "07-results")
    page.click(f'#results-grid a:text-is("{SCRIPT_ID}")')
    assert page.inner_text("#essay-id") == SCRIPT_ID
    assert page.inner_text("#essay-text") == SCRIPT_TEXT
    assert page.locator("#essay-text script, #essay-text img").count() == 0
    page.fill("#reviewer-in", "Ms. K")  # the name that signs her decisions, asked once in this browser
    page.click("#save-reviewer")
    assert page.inner_text("#reviewer-name") == "Ms. K" and page.inner_text("#essay-id") == SCRIPT_ID
    section = page.locator("[id='trait-Style']")
    section.locator("input[name=comment]").fill("strong voice <b>really</b>")
    section.locator("button.level[value='4']").first.click()  # a level of the rubric: the teacher's score
    assert "saved" in page.locator("[id='trait-Style'] .saved").inner_text()
    assert page.locator("[id='trait-Style'] b.score").first.inner_text() == "4"
    shot(page, "08-essay")
    page.goto(f"{page.url.split('/essays/')[0]}/results")
    with page.expect_download() as download:
        page.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    mine = next(r for r in rows if r["essay_id"] == SCRIPT_ID and r["trait"] == "Style")
    assert mine["review"] == "override" and mine["override_score"] == "4" and mine["final_score"] == "4"
    assert mine["review_comment"] == "strong voice <b>really</b>" and mine["reviewer"] == "Ms. K"
    assert mine["score"] != "" and all(r["final_score"] == r["grade"] for r in rows)  # one grade in every column
    page.click("text=evaluation")
    assert page.locator("table.eval").count() >= 1
    shot(page, "09-evaluation")
    page.goto(server.url + "/docs")
    page.wait_for_selector(".opblock", timeout=30_000)
    shot(page, "10-api-docs")
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_missing_scores_show_as_missing_and_forms_need_their_token(page: Any, tmp_path: Path) -> None:
    srv = Server(tmp_path / "server", tmp_path / "cache", _free_port())
    run_id = synthesize_run(srv.data_dir / "runs", 3, rubric_of(2, 0, 3), failed_every=2)
    srv.start()
    try:
        page.goto(f"{srv.url}/runs/{run_id}/results")
        cells = page.locator("#results-grid td.cell.missing")
        # the human's score is the grade; madrag's missing suggestion is said, never shown as a number
        assert cells.count() == 3 and all("madrag missing" in cells.nth(i).inner_text() for i in range(3))
        page.click("#results-grid a:text-is('e00000')")
        assert page.locator("[id='trait-Trait 2'] .suggested.missing").first.inner_text() == "madrag: missing"
        shot(page, "13-missing-score")
        forged = httpx.post(
            f"{srv.url}/runs/{run_id}/essays/e00000/review", data={"csrf_token": "forged", "trait": "Trait 2"}
        )
        assert forged.status_code == 403
        assert len(srv.api("GET", f"/api/runs/{run_id}/overrides")) == 0
    finally:
        srv.stop()


def test_restart_mid_run_resumes(server: Server, page: Any, tmp_path: Path) -> None:
    essays = [{"id": f"r{i}", "text": TEXTS[i % len(TEXTS)]} for i in range(8)]
    backend = {"kind": "fake", "fake_latency_s": 0.3, "concurrency": 2}  # two essays at a time: about 5 s
    body = {"rubric": RUBRIC, "essays": essays, "protocols": ["MAD"], "backend": backend}
    run = server.api("POST", "/api/runs", json=body)
    deadline = time.monotonic() + 30
    while server.api("GET", f"/api/runs/{run['id']}")["progress"]["done"] < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    server.kill()
    server.start()
    assert server.api("GET", f"/api/runs/{run['id']}")["status"] == "interrupted"
    page.goto(server.url + "/")
    assert run["name"] in page.inner_text("#unfinished")
    shot(page, "11-unfinished-after-restart")
    page.click(f"#unfinished a[href='/runs/{run['id']}']")
    page.click("#resume")
    page.wait_for_selector("#run-status.finished", timeout=60_000)
    assert page.inner_text("#run-done") == "16"
    shot(page, "12-resumed-run")
    rows = server.api("GET", f"/api/runs/{run['id']}/scores")["rows"]
    assert len(rows) == 16 and all(r["score"] is not None for r in rows)
    records = server.api("GET", f"/api/runs/{run['id']}")["progress"]["records"]
    assert records == 8 * 2 * 3  # every call once: the finished ones read back, none repeated


def test_test_connection_finds_a_server_without_logprobs(server: Server, page: Any, tmp_path: Path) -> None:
    from madrag.testing.stub_server import MODEL, StubServer

    rubric_file, data = _inputs(tmp_path)
    with StubServer(capacity=4, latency_s=0.0, logprobs=False) as stub:
        to_backend(page, server.url, rubric_file, data)
        page.check("input[name=kind][value=openai]")
        page.fill("input[name=base_url]", stub.base_url)
        page.fill("input[name=model]", MODEL)
        assert page.input_value("#logprobs") == "auto"
        page.click("#test-connection")
        result = page.locator("#probe-result")
        assert f"The server answered (model '{MODEL}') but returns no logprobs" in result.inner_text()
        assert "Switched to self-reported confidence" in page.inner_text("#probe-switched")
        assert page.input_value("#logprobs") == "no"  # the setting the run will use
        assert stub.stats().requests == 2 and stub.stats().by_role.get("judge", 0) == 0  # no run has started
        shot(page, "14-backend-test-connection")
        assert server.api("GET", "/api/runs") == []
    assert page.dialogs == []  # type: ignore[attr-defined]

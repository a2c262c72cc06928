"""A bulk approval is whole and off the event loop: the server answers other requests while a large approval is
written, a decision made meanwhile stays in force, and an approval interrupted midway (an error, or its process
killed inside the transaction) leaves none of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.e2e.server.test_review_desk import grades, unscored_run
from tests.web_helpers import HTML, client_for, form_post, make_config, token_in

from madrag.errors import StorageError
from madrag.server import reviews
from madrag.server.pages import review as review_page

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def test_the_server_answers_while_an_approval_holds_its_transaction(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = unscored_run(client, 4)
    token = token_in(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    ai = {k: v[0] for k, v in grades(client, run_id).items()}
    writing, release = threading.Event(), threading.Event()
    real = reviews._values

    def held(review: reviews.Review) -> tuple[object, ...]:
        if review.action == "bulk-accept":  # the approval's rows: held inside its transaction until released
            writing.set()
            release.wait(20)
        return real(review)

    monkeypatch.setattr(reviews, "_values", held)
    monkeypatch.setattr(review_page, "APPROVAL_WAIT_S", 60.0)  # the request waits for it (not its progress page)
    answers: dict[str, Any] = {}

    def post(name: str, path: str, **fields: str) -> None:
        answers[name] = form_post(client, path, token, **fields)

    approval = threading.Thread(target=post, args=("approve", f"/runs/{run_id}/approve"), kwargs={"state": "open"})
    approval.start()
    assert writing.wait(20)  # the approval is inside its transaction now
    new = 3 if ai[("e1", "Ideas")] != 3 else 0
    override = threading.Thread(
        target=post,
        args=("override", f"/runs/{run_id}/essays/e1/review"),
        kwargs={"trait": "Ideas", "protocol": "MAD", "score": str(new)},
    )
    override.start()  # her override waits for the approval's write lock, on a worker thread too
    for path in ("/api/health", f"/runs/{run_id}/results", "/"):
        started = time.monotonic()
        assert client.get(path, headers=HTML).status_code == 200
        assert time.monotonic() - started < 1.0, path  # answered while the approval runs
    assert approval.is_alive() and "approve" not in answers  # it was still running all along
    release.set()
    approval.join(30)
    override.join(30)
    assert answers["approve"].headers["location"].endswith("approved=8")
    assert answers["override"].status_code == 303
    found = grades(client, run_id)
    assert found[("e1", "Ideas")][:2] == (new, "override")  # the decision made meanwhile is the one in force
    assert {v[1] for k, v in found.items() if k != ("e1", "Ideas")} == {"bulk-accept"}


def test_a_long_approval_shows_its_progress_until_it_is_written_whole(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An approval that outlasts the request answers with its progress page: "n of N" checked, a link to check again (no
    script needed), nothing approved meanwhile; once written, the page goes back to the review with the count."""
    run_id = unscored_run(client, 4)
    token = token_in(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    checked, release = threading.Semaphore(0), threading.Event()
    real, rows = reviews._values, [0]

    def held(review: reviews.Review) -> tuple[object, ...]:
        rows[0] += 1
        if rows[0] == 3:  # two rows checked, then the approval held inside its transaction
            checked.release()
            release.wait(20)
        return real(review)

    monkeypatch.setattr(reviews, "_values", held)
    monkeypatch.setattr(review_page, "APPROVAL_WAIT_S", 0.3)
    answered = form_post(client, f"/runs/{run_id}/approve", token, state="open")
    assert answered.status_code == 303
    progress = answered.headers["location"]
    assert progress.startswith(f"/runs/{run_id}/approvals/")
    assert checked.acquire(timeout=20)
    page = client.get(progress, headers=HTML, follow_redirects=False)
    assert page.status_code == 200 and f'href="{progress}" id="approval-again"' in page.text  # no script needed
    assert 'id="approval-done">2<' in page.text and 'id="approval-total">8<' in page.text
    assert {v[1] for v in grades(client, run_id).values()} == {None}  # all or nothing: none approved yet
    assert client.get(f"/runs/{run_id}/approvals/0000", headers=HTML).status_code == 404
    release.set()
    deadline = time.monotonic() + 20
    while (page := client.get(progress, headers=HTML, follow_redirects=False)).status_code == 200:
        assert time.monotonic() < deadline, "the approval did not end"
        time.sleep(0.05)
    assert page.status_code == 303 and page.headers["location"] == f"/runs/{run_id}/review?state=open&approved=8"
    assert {v[1] for v in grades(client, run_id).values()} == {"bulk-accept"}


def test_a_long_approval_that_stops_says_that_none_was_approved(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = unscored_run(client, 2)
    token = token_in(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    real, rows = reviews._values, [0]

    def failing(review: reviews.Review) -> tuple[object, ...]:
        rows[0] += 1
        if rows[0] == 3:
            time.sleep(0.5)  # past the request's wait
            raise StorageError("the disk is full")
        return real(review)

    monkeypatch.setattr(reviews, "_values", failing)
    monkeypatch.setattr(review_page, "APPROVAL_WAIT_S", 0.1)
    progress = form_post(client, f"/runs/{run_id}/approve", token).headers["location"]
    deadline = time.monotonic() + 20
    while 'id="approval-error"' not in (page := client.get(progress, headers=HTML, follow_redirects=False)).text:
        assert page.status_code == 200 and time.monotonic() < deadline
        time.sleep(0.05)
    assert "the disk is full" in page.text and "None of the scores was approved" in page.text
    assert 'id="approval-again"' not in page.text
    assert {v[1] for v in grades(client, run_id).values()} == {None}


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from madrag.server import reviews

    real, count = reviews._values, [0]

    def tell(review):
        count[0] += 1
        if count[0] == 3000 and sys.argv[3] == "pause":
            print("midway", flush=True)  # 2,999 rows written inside the transaction, none committed
            time.sleep(60)
        return real(review)

    reviews._values = tell
    approvals = [
        reviews.Review(essay_id=f"e{i}", trait="Ideas", protocol="MAD", action="bulk-accept", agent_score=2,
                       new_score=2, reviewer="Ms. R")
        for i in range(int(sys.argv[2]))
    ]
    print("written", reviews.add_bulk_approvals(Path(sys.argv[1]), approvals), flush=True)
    """
)


def _child(run_dir: Path, n: int, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-c", CHILD, str(run_dir), str(n), mode]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)


def test_an_approval_killed_inside_its_transaction_leaves_none_of_it(tmp_path: Path) -> None:
    reviews.add_review(tmp_path, reviews.Review(essay_id="mine", trait="Ideas", protocol="MAD", action="override"))
    proc = _child(tmp_path, 6000, "pause")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "midway"
    proc.send_signal(signal.SIGKILL)  # kill -9 in the middle of the approval
    proc.wait(10)
    assert [r.essay_id for r in reviews.all_reviews(tmp_path)] == ["mine"]  # none of its 2,999 rows
    done = _child(tmp_path, 6000, "run")
    out, _ = done.communicate(timeout=60)
    assert out.strip() == "written 6000"  # the store was left whole and unlocked: the next approval is complete
    assert len(reviews.all_reviews(tmp_path)) == 6001

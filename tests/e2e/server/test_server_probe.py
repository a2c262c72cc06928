"""Testing an OpenAI-compatible backend before a run (against the stub server, with and without logprobs):
the API's test request, the backend page's "Test connection", and a run that finds out by itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.web_helpers import HTML, RUBRIC, client_for, essays_csv, essays_json, make_config, token_in, wait_status

from madrag.testing.stub_server import MODEL, StubServer


@pytest.fixture(scope="module")
def plain() -> Iterator[StubServer]:
    """A server that gives no logprobs, even when asked (as several common backends do)."""
    with StubServer(capacity=8, latency_s=0.0, debater_tokens=20, judge_tokens=10, logprobs=False) as server:
        yield server


@pytest.fixture(scope="module")
def full() -> Iterator[StubServer]:
    with StubServer(capacity=8, latency_s=0.0, debater_tokens=20, judge_tokens=10) as server:
        yield server


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def openai(server: StubServer, **fields: Any) -> dict[str, Any]:
    return {"kind": "openai", "model": MODEL, "base_url": server.base_url, "max_tokens": 64, **fields}


def test_the_test_request_reports_a_server_without_logprobs(client: TestClient, plain: StubServer) -> None:
    plain.reset_stats()
    found = client.post("/api/backends/test", json=openai(plain)).json()
    assert found["answered"] is True and found["model"] == MODEL and found["logprobs"] is False
    assert "no logprobs" in found["message"] and "self-reported confidence" in found["message"]
    assert found["error"] is None and found["latency_s"] is not None
    assert plain.stats().requests == 2  # asked with logprobs (answered without), then once without them


def test_the_test_request_reports_logprobs_and_an_unreachable_server(client: TestClient, full: StubServer) -> None:
    found = client.post("/api/backends/test", json=openai(full)).json()
    assert found["answered"] is True and found["logprobs"] is True and found["model"] == MODEL
    assert "returns logprobs" in found["message"]
    dead = client.post("/api/backends/test", json=openai(full, base_url="http://127.0.0.1:9/v1")).json()
    assert dead["answered"] is False and dead["logprobs"] is None and dead["model"] is None
    assert dead["message"].startswith("The server did not answer") and "unreachable" in dead["error"]
    wrong = client.post("/api/backends/test", json={"kind": "fake"})
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "kind"


def test_a_run_on_a_server_without_logprobs_finds_out_first_and_finishes(client: TestClient, plain: StubServer) -> None:
    body = {"rubric": RUBRIC, "essays": essays_json(2), "protocols": ["MAD"], "backend": openai(plain)}
    created = client.post("/api/runs", json=body)
    assert created.status_code == 201, created.text
    run = wait_status(client, created.json()["id"], timeout=60)
    assert run["status"] == "finished", run["error"]
    assert run["backend"]["logprobs"] is False and "self-reported" in run["backend"]["tested"]
    rows = client.get(f"/api/runs/{run['id']}/scores").json()["rows"]
    assert len(rows) == 4 and all(r["score"] is not None for r in rows)
    detail = client.get(f"/api/runs/{run['id']}/essays/e1").json()
    debate = detail["traits"][0]["protocols"][0]["debate"]
    assert debate and all(turn["confidence"] is not None for turn in debate)  # stated by the debaters


def test_a_run_whose_backend_does_not_answer_fails_before_scoring(client: TestClient) -> None:
    dead = {"kind": "openai", "model": MODEL, "base_url": "http://127.0.0.1:9/v1"}
    body = {"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": dead}
    run = wait_status(client, client.post("/api/runs", json=body).json()["id"], timeout=60)
    assert run["status"] == "failed" and run["error"].startswith("the backend did not answer a test request")
    assert run["progress"]["records"] == 0


def test_the_backend_page_tests_the_connection_and_switches_the_setting(client: TestClient, plain: StubServer) -> None:
    token = token_in(client.get("/", headers=HTML).text)
    draft = client.post("/new", data={"csrf_token": token}, follow_redirects=False).headers["location"].split("/")[2]
    rid = client.post("/api/rubrics", json=RUBRIC).json()["id"]
    client.post(f"/drafts/{draft}/rubric", data={"csrf_token": token, "mode": "shipped", "rubric_id": rid})
    form = {"csrf_token": token, "kind": "openai", "model": MODEL, "base_url": plain.base_url, "logprobs": "auto"}
    page = client.post(f"/drafts/{draft}/backend", data={**form, "action": "test"}, headers=HTML)
    assert page.status_code == 200, page.text
    assert "but returns no logprobs" in page.text and "Switched to self-reported confidence" in page.text
    assert re.search(r'<option value="no" selected>', page.text)
    saved = client.app.state.madrag.drafts.get(draft)  # type: ignore[attr-defined]
    assert saved.backend["logprobs"] is False and saved.probe["model"] == MODEL
    files = {"file": ("class.csv", essays_csv(2, folds=False).encode(), "text/csv")}
    client.post(f"/drafts/{draft}/essays", data={"csrf_token": token, "mode": "upload"}, files=files, headers=HTML)
    client.post(f"/drafts/{draft}/exemplars", data={"csrf_token": token, "pool": "none"}, headers=HTML)
    start = {**form, "logprobs": "no", "protocols": "MAD", "action": "start", "max_tokens": "64"}
    started = client.post(f"/drafts/{draft}/backend", data=start, headers=HTML, follow_redirects=False)
    assert started.status_code == 303, started.text
    run = wait_status(client, started.headers["location"].split("/")[2], timeout=60)
    assert run["status"] == "finished" and run["backend"]["logprobs"] is False and "tested" not in run["backend"]

"""The teacher's pages over HTTP, without a browser: form errors next to their field, CSRF, escaping, the
estimate and report pages (the browser tests in test_server_browser.py drive the same pages in Chromium)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.web_helpers import FAKE, HTML, RUBRIC, client_for, csrf, essays_csv, essays_json, make_config, wait_status


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def new_draft(client: TestClient) -> tuple[str, str]:
    token = csrf(client)
    response = client.post("/new", data={"csrf_token": token}, follow_redirects=False)
    assert response.status_code == 303
    return response.headers["location"].split("/")[2], token


def post(client: TestClient, path: str, token: str, **fields: Any) -> Any:
    files = fields.pop("files", None)
    return client.post(path, data={"csrf_token": token, **fields}, files=files, headers=HTML, follow_redirects=False)


def test_form_posts_need_the_csrf_token(client: TestClient) -> None:
    assert client.post("/new", data={}, headers=HTML).status_code == 403
    assert client.post("/new", data={"csrf_token": "0" * 64}, headers=HTML).status_code == 403
    page = client.post("/new", data={"csrf_token": "x"}, headers=HTML)
    assert "security token" in page.text and "<h1>" in page.text  # a page for the browser, not JSON


def test_a_written_rubric_with_a_missing_level_is_shown_next_to_its_field(client: TestClient) -> None:
    draft, token = new_draft(client)
    fields = {"mode": "form", "name": "mine", "trait-0-name": "Ideas", "trait-0-min": "0", "trait-0-max": "2"}
    page = post(client, f"/drafts/{draft}/rubric", token, **fields, **{"trait-0-levels": "2: good\n0: weak"})
    assert page.status_code == 400
    error = re.search(r'id="error-trait-0-levels">([^<]+)<', page.text)
    assert error is not None and "[1]" in error.group(1)
    assert 'value="Ideas"' in page.text  # what was typed stays
    fixed = post(client, f"/drafts/{draft}/rubric", token, **fields, **{"trait-0-levels": "2: good\n1: ok\n0: weak"})
    assert fixed.status_code == 303 and fixed.headers["location"].endswith("/essays")


def test_steps_report_refused_rows_and_run_with_an_estimate(client: TestClient) -> None:
    draft, token = new_draft(client)
    rubric = {**RUBRIC, "name": "<script>alert(1)</script>"}
    files = {"file": ("rubric.json", json.dumps(rubric).encode(), "application/json")}
    assert post(client, f"/drafts/{draft}/rubric", token, mode="upload", files=files).status_code == 303
    data = essays_csv(4, extra=[{"id": "bad", "text": "ok", "rater1_Ideas": "x"}]).encode()
    page = post(client, f"/drafts/{draft}/essays", token, mode="upload", files={"file": ("c.csv", data, "text/csv")})
    assert "Read 4 essays, refused 1" in page.text and "not a number" in page.text
    assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert post(client, f"/drafts/{draft}/exemplars", token, pool="asap").status_code == 400  # not offered
    assert post(client, f"/drafts/{draft}/exemplars", token, pool="folds", eval_fold="0").status_code == 303
    refused = post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="NOPE", action="start")
    assert refused.status_code == 422 and "unknown protocol" in refused.text
    estimate = post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="estimate")
    assert estimate.status_code == 303
    run_id = re.search(r'data-run="([0-9a-f]+)"', client.get(f"/drafts/{draft}/backend", headers=HTML).text)
    assert run_id is not None and wait_status(client, run_id.group(1))["status"] == "finished"
    assert 'id="estimate-calls">12<' in client.get(f"/drafts/{draft}/backend", headers=HTML).text  # 2 x 2 x 3
    start = post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
    assert start.status_code == 303 and start.headers["location"].startswith("/runs/")


def test_report_and_evaluation_pages(client: TestClient) -> None:
    body = {"rubric": RUBRIC, "essays": essays_json(4), "protocols": ["MAD"], "backend": FAKE}
    run = client.post("/api/runs", json=body).json()
    assert wait_status(client, run["id"])["status"] == "finished"
    report = client.get(f"/runs/{run['id']}/report", headers=HTML)
    assert report.status_code == 200 and "madrag report" in report.text and "<script" not in report.text
    evaluation = client.get(f"/runs/{run['id']}/evaluation", headers=HTML).text
    assert "QWK" in evaluation and evaluation.count('src="data:image/png;base64,') == 2
    missing = client.get("/runs/000000000000/results", headers=HTML)
    assert missing.status_code == 404 and "no run" in missing.text and "<h1>" in missing.text


def test_review_form_records_an_override(client: TestClient) -> None:
    body = {"rubric": RUBRIC, "essays": essays_json(2), "protocols": ["MAD"], "backend": FAKE}
    run = client.post("/api/runs", json=body).json()
    wait_status(client, run["id"])
    path = f"/runs/{run['id']}/essays/e1"
    token = csrf(client, path)
    fields = {"trait": "Ideas", "protocol": "MAD", "score": "3", "comment": "off topic", "reviewer": "T"}
    saved = post(client, path + "/review", token, action="override", **fields)
    assert saved.status_code == 303
    reviews = client.get(f"/api/runs/{run['id']}/overrides").json()
    assert [(r["action"], r["new_score"], r["reviewer"]) for r in reviews] == [("override", 3, "T")]
    assert "off topic" not in client.get(f"/runs/{run['id']}/results", headers=HTML).text  # grid shows scores only
    assert '<td class="cell far reviewed"' in client.get(f"/runs/{run['id']}/results", headers=HTML).text

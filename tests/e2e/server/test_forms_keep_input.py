"""Forms that keep what was typed: a pasted essay with an invalid score comes back with its text, the written
rubric takes a fifth trait (and more), and a shipped rubric can be read before it is chosen."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.web_helpers import HTML, RUBRIC, client_for, csrf, make_config


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def _start(client: TestClient) -> tuple[str, str]:
    token = csrf(client)
    response = client.post("/new", data={"csrf_token": token}, follow_redirects=False)
    return response.headers["location"].split("/")[2], token


def test_a_pasted_essay_with_a_bad_score_keeps_its_text(client: TestClient) -> None:
    draft, token = _start(client)
    files = {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")}
    client.post(f"/drafts/{draft}/rubric", data={"csrf_token": token, "mode": "upload"}, files=files)
    text = "My summer of waiting & <b>patience</b>, a long essay I typed by hand."
    fields = {"csrf_token": token, "mode": "paste", "essay_id": "ana", "essay_text": text, "score-0": "9"}
    page = client.post(f"/drafts/{draft}/essays", data=fields, headers=HTML)
    assert page.status_code == 400 and 'id="error-essay_text"' in page.text
    assert "My summer of waiting &amp; &lt;b&gt;patience&lt;/b&gt;, a long essay" in page.text  # kept, escaped
    assert 'value="ana"' in page.text and 'value="9"' in page.text


def test_the_written_rubric_takes_more_than_four_traits(client: TestClient) -> None:
    draft, token = _start(client)
    fields: dict[str, str] = {"csrf_token": token, "mode": "form", "name": "five", "slots": "4"}
    for i in range(4):
        fields |= {f"trait-{i}-name": f"T{i}", f"trait-{i}-min": "0", f"trait-{i}-max": "1"}
        fields[f"trait-{i}-levels"] = "1: yes\n0: no"
    more = client.post(f"/drafts/{draft}/rubric", data={**fields, "action": "add_trait"}, headers=HTML)
    assert more.status_code == 200 and 'name="trait-4-name"' in more.text and 'value="T3"' in more.text
    fields |= {
        "slots": "5",
        "trait-4-name": "T4",
        "trait-4-min": "0",
        "trait-4-max": "1",
        "trait-4-levels": "1: y\n0: n",
    }
    saved = client.post(f"/drafts/{draft}/rubric", data={**fields, "action": "save"}, follow_redirects=False)
    assert saved.status_code == 303
    assert "5 traits" in client.get(f"/drafts/{draft}/essays", headers=HTML).text


def test_a_shipped_rubric_can_be_read_before_choosing_it(client: TestClient) -> None:
    draft, _token = _start(client)
    page = client.get(f"/drafts/{draft}/rubric", headers=HTML).text
    preview = re.search(r'<details class="rubric-preview" id="preview-asap-set7">(.*?)</details>', page, re.S)
    assert preview is not None and "Ideas (0\u20133)" in preview.group(1) and "<b>3</b>:" in preview.group(1)

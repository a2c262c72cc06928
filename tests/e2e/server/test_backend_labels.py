"""Which backend scored a run: every page and export row of a fake run says so, with a banner that its scores
are not valid grades; the backend presets fill in a server that "Test connection" then tries."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from tests.web_helpers import (
    FAKE,
    HTML,
    RUBRIC,
    client_for,
    csrf,
    essays_csv,
    essays_json,
    make_config,
    wait_status,
)

from madrag.teacher.presets import PRESETS
from madrag.teacher.scored_by import scored_by, warning


def test_labels_say_who_scored_and_whether_the_scores_are_grades() -> None:
    assert scored_by({"kind": "fake"}) == "fake backend (canned answers)" and warning({"kind": "fake"})
    assert scored_by({"kind": "llamacpp"}) == "embedded model" and warning({"kind": "llamacpp"})
    real = {"kind": "openai", "model": "m", "base_url": "http://h/v1"}
    assert scored_by(real) == "m at http://h/v1" and warning(real) is None


def test_every_page_and_export_row_of_a_fake_run_says_so(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        body = {"rubric": RUBRIC, "essays": essays_json(2), "protocols": ["MAD"], "backend": FAKE}
        run_id = client.post("/api/runs", json=body).json()["id"]
        assert wait_status(client, run_id)["status"] == "finished"
        for page in ("", "/results", "/essays/e1", "/review", "/gradebook", "/evaluation"):
            text = client.get(f"/runs/{run_id}{page}", headers=HTML).text
            assert 'id="not-valid-banner"' in text and "Scored by the fake backend" in text, page
        assert "not real grades" in client.get("/?show=all", headers=HTML).text  # (an API run: listed on demand)
        rows = list(csv.DictReader(io.StringIO(client.get(f"/api/runs/{run_id}/export?format=csv").text)))
        assert len(rows) == 4 and {(r["scored_by"], r["valid_scores"]) for r in rows} == {
            ("fake backend (canned answers)", "False")
        }
        lines = client.get(f"/api/runs/{run_id}/export?format=jsonl").text.splitlines()
        assert all(json.loads(line)["valid_scores"] is False for line in lines)


def test_a_preset_fills_the_server_and_the_test_tries_it(tmp_path: Path) -> None:
    from madrag.testing.stub_server import MODEL, StubServer

    with client_for(make_config(tmp_path)) as client, StubServer(capacity=2, latency_s=0.0) as stub:
        token = csrf(client, "/")

        def post(path: str, files: object = None, **data: str) -> object:
            return client.post(
                path, data={"csrf_token": token, **data}, files=files, headers=HTML, follow_redirects=False
            )

        draft = post("/new").headers["location"].split("/")[2]  # type: ignore[attr-defined]
        post(
            f"/drafts/{draft}/rubric",
            {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")},
            mode="upload",
        )
        post(f"/drafts/{draft}/essays", {"file": ("c.csv", essays_csv(2).encode(), "text/csv")}, mode="upload")
        post(f"/drafts/{draft}/exemplars", pool="none")
        page = post(f"/drafts/{draft}/backend", kind="llamacpp", action="preset-ollama").text  # type: ignore[attr-defined]
        ollama = PRESETS["ollama"]
        assert f'value="{ollama.base_url}"' in page and f'value="{ollama.model}"' in page
        assert re.search(r'value="openai" checked', page) and "ollama serve" in page
        tested = post(f"/drafts/{draft}/backend", kind="openai", base_url=stub.base_url, model=MODEL, action="test")
        assert "The server answered" in tested.text  # type: ignore[attr-defined]
        assert client.get("/api/runs").json() == []  # nothing ran: the test is one short request

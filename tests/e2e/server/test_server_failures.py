"""A web run with calls that fail after their retries: it finishes, says how many failed (run page and
GET /api/runs/{id}), and a resume retries exactly those calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.web_helpers import FAKE, RUBRIC, client_for, essays_json, make_config, wait_status

import madrag.server.library
from madrag.errors import TransientProviderError
from madrag.providers.base import ChatRequest, Provider
from madrag.providers.fake import FakeProvider, FakeReply, default_script
from madrag.providers.policy import RetryPolicy
from madrag.providers.spec import ProviderSpec


def test_a_run_with_failed_calls_finishes_shows_them_and_resumes_to_retry_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = {"on": True}

    def script(request: ChatRequest) -> FakeReply:
        if busy["on"] and request.role == "skeptic" and request.trait == "Style":
            return FakeReply(text="", error=TransientProviderError("http://x/v1 answered HTTP 503: busy"))
        return default_script(request)

    def make_backend(spec: ProviderSpec) -> Provider:
        return FakeProvider(script=script)

    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt: 0.0)
    monkeypatch.setattr(madrag.server.library, "make_backend", make_backend)
    with client_for(make_config(tmp_path)) as client:
        body = {"rubric": RUBRIC, "essays": essays_json(3), "protocols": ["MAD"], "backend": FAKE}
        created = client.post("/api/runs", json=body)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        done = wait_status(client, run_id)
        assert done["status"] == "finished" and done["failed_calls"] == 3, done
        assert done["progress"]["failed_calls"] == 3 and done["progress"]["done"] == 3  # Ideas only
        rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        assert sorted({r["trait"] for r in rows if r["score"] is not None}) == ["Ideas"]
        page = client.get(f"/runs/{run_id}", headers={"Accept": "text/html"}).text
        assert "3 calls failed after retries" in page and "Resume to retry 3 failed calls" in page

        busy["on"] = False
        resumed = client.post(f"/api/runs/{run_id}/resume", json={})
        assert resumed.status_code == 202, resumed.text
        again = wait_status(client, run_id)
        assert again["status"] == "finished" and again["failed_calls"] == 0, again
        rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        assert len([r for r in rows if r["score"] is not None]) == 3 * 2
        page = client.get(f"/runs/{run_id}", headers={"Accept": "text/html"}).text
        assert "failed after retries" not in page and 'id="resume"' not in page
        nothing = client.post(f"/api/runs/{run_id}/resume", json={})
        assert nothing.status_code == 409  # finished with every call answered: nothing to resume

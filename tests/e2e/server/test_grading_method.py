"""One grading method per run: a run scored by two methods takes its grades from the one the teacher chose (the
other is shown for comparison), on every surface; two methods and no choice is refused with a sentence, on the
set-up page and in the JSON API alike. Feedback is drafted from the grading method's own records."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from tests.web_helpers import FAKE, HTML, RUBRIC, TEXTS, client_for, csrf, form_post, make_config, wait_status

UNSCORED = [{"id": f"e{i + 1}", "text": TEXTS[i % len(TEXTS)]} for i in range(4)]


def _draft(client: Any, token: str) -> str:
    """A draft at the backend step with 4 essays the teacher did not score (every grade is a method's)."""
    draft: str = form_post(client, "/new", token).headers["location"].split("/")[2]
    rubric = {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")}
    form_post(client, f"/drafts/{draft}/rubric", token, rubric, mode="upload")
    lines = "id,text\n" + "".join(f'{e["id"]},"{e["text"]}"\n' for e in UNSCORED)
    form_post(client, f"/drafts/{draft}/essays", token, {"file": ("c.csv", lines.encode(), "text/csv")}, mode="upload")
    form_post(client, f"/drafts/{draft}/exemplars", token, pool="none")
    return draft


def _start(client: Any, token: str, draft: str, **fields: Any) -> Any:
    data = {"csrf_token": token, "kind": "fake", "protocols": ["MA", "MAD"], "action": "start", **fields}
    return client.post(f"/drafts/{draft}/backend", data=data, headers=HTML, follow_redirects=False)


def _scores(client: Any, run_id: str) -> dict[tuple[str, str, str], int | None]:
    rows = csv.DictReader(io.StringIO(client.get(f"/api/runs/{run_id}/export?format=csv").text))
    return {(r["protocol"], r["essay_id"], r["trait"]): int(r["score"]) if r["score"] else None for r in rows}


def test_two_methods_ticked_ask_which_gives_the_grades(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft(client, token)
        refused = _start(client, token, draft)
        assert refused.status_code == 422
        assert 'id="error-grading_protocol"' in refused.text
        assert "choose which one gives the grades" in refused.text
        assert 'href="/runs/' not in refused.headers.get("location", "")
        started = _start(client, token, draft, grading_protocol="MAD")
        assert started.status_code == 303, started.text[-400:]
        run_id = started.headers["location"].split("/")[2]
        run = wait_status(client, run_id, timeout=120)
        assert run["status"] == "finished" and run["grading_protocol"] == "MAD" and run["protocols"] == ["MA", "MAD"]
        on_disk = json.loads((tmp_path / "server" / "runs" / run_id / "run.json").read_text(encoding="utf-8"))
        assert on_disk["grading_protocol"] == "MAD"  # recorded with the run

        scores = _scores(client, run_id)
        assert _book(client, run_id) == {(e, t): scores[("MAD", e, t)] for (p, e, t) in scores if p == "MAD"}
        desk = client.get(f"/runs/{run_id}/review", headers=HTML).text
        assert 'name="protocol" value="MAD"' in desk and 'name="protocol" value="MA"' not in desk
        essay = client.get(f"/runs/{run_id}/essays/e1", headers=HTML).text
        assert essay.index("gives the grade") < essay.index("for comparison, not the grade")
        exported = list(csv.DictReader(io.StringIO(client.get(f"/api/runs/{run_id}/export?format=csv").text)))
        assert {r["grading"] for r in exported if r["protocol"] == "MAD"} == {"True"}
        compared = [r for r in exported if r["protocol"] == "MA"]
        assert compared and all(r["grade"] == r["final_score"] == "" and r["grading"] == "False" for r in compared)
        results = client.get(f"/runs/{run_id}/results", headers=HTML).text
        assert "MAD (the grades)" in results and "MA (for comparison)" in results

        # feedback from the grading method's records: the debate's "what works", never an empty one
        feedback = client.get(f"/runs/{run_id}/feedback/e1", headers=HTML).text
        assert '<span class="works">—</span>' not in feedback and '<span class="works">' in feedback

        # a change to the comparison method's score is no grade; one without a protocol goes to the grading method
        body = {"essay_id": "e2", "trait": "Ideas", "score": 0, "reviewer": "Ms. Rivera", "protocol": "MA"}
        assert client.post(f"/api/runs/{run_id}/overrides", json=body).status_code == 201
        assert _book(client, run_id)[("e2", "Ideas")] == scores[("MAD", "e2", "Ideas")] != 0
        del body["protocol"]
        assert client.post(f"/api/runs/{run_id}/overrides", json=body).json()["protocol"] == "MAD"
        assert _book(client, run_id)[("e2", "Ideas")] == 0


def _book(client: Any, run_id: str) -> dict[tuple[str, str], int]:
    rows = csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv").text))
    return {(r["essay_id"], t): int(r[t]) for r in rows for t in ("Ideas", "Style")}


def test_a_quick_graded_run_drafts_no_empty_debate_feedback(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft(client, token)
        started = _start(client, token, draft, grading_protocol="MA")
        run_id = started.headers["location"].split("/")[2]
        assert wait_status(client, run_id, timeout=120)["status"] == "finished"
        feedback = client.get(f"/runs/{run_id}/feedback/e1", headers=HTML).text
        assert "What works:" not in feedback and "What to work on next:" not in feedback  # no debate: not a dash
        assert "Why this score:" in feedback


def test_the_api_refuses_two_methods_without_a_grading_one(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        base = {"rubric": RUBRIC, "essays": UNSCORED, "protocols": ["MA", "MAD"], "backend": FAKE, "pool": "none"}
        refused = client.post("/api/runs", json=base)
        error = refused.json()["error"]
        assert refused.status_code == 422 and error["field"] == "grading_protocol"
        assert "choose which one gives the grades" in error["message"]
        other = client.post("/api/runs", json={**base, "grading_protocol": "MADRAG"})
        assert other.status_code == 422 and other.json()["error"]["field"] == "grading_protocol"
        chosen = client.post("/api/runs", json={**base, "grading_protocol": "MA"})
        assert chosen.status_code in (200, 201, 202), chosen.text
        assert chosen.json()["grading_protocol"] == "MA"
        one = client.post("/api/runs", json={**base, "protocols": ["MAD"]})
        assert one.json()["grading_protocol"] == "MAD"


def test_an_lms_push_grades_by_the_run_s_grading_method(tmp_path: Path) -> None:
    import pytest

    from madrag.errors import MadragError
    from madrag.server.class_book import run_dir_grading as grading

    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        started = _start(client, token, _draft(client, token), grading_protocol="MAD")
        run_id = started.headers["location"].split("/")[2]
        assert wait_status(client, run_id, timeout=120)["status"] == "finished"
    assert grading(tmp_path / "server" / "runs" / run_id, ["MA", "MAD"]) == "MAD"  # as run.json records it
    with pytest.raises(MadragError, match="records no choice of the one that gives the grades"):
        grading(tmp_path, ["MA", "MAD"])  # a run of two methods that names none: refused, not the first
    assert grading(tmp_path, ["MAD"]) == "MAD"

"""The Canvas round trip through the JSON API (``/api/lms/...``), in process, on the local Canvas double with the
real canvasapi client: connect, list, pull 25 submissions into a class, score it on the fake backend, two
overrides and the rest accepted, preview, push with the preview's fingerprint; a push whose preview went stale (a
review changed after it) is refused with 409 and sends nothing; the token is in no answer and no file but the
credential file; a Canvas the operator did not allow is refused."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.canvas_double import CanvasDouble, class_of
from tests.web_helpers import client_for, make_config, wait_status

from madrag.lms.credentials import FILE_NAME
from madrag.server import access
from madrag.server.config import ServerConfig
from madrag.server.http.faults import NotAllowed

pytest.importorskip("canvasapi")
pytestmark = pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly")

SENTINEL = "canvas-token-SENTINEL-api-51c0de"
OVERRIDES = {("1001", "Ideas"): (1, "Support your ideas with the text."), ("1002", "Conventions"): (0, "Proofread.")}
UNDECIDED = ("1024", "1025")


@pytest.fixture()
def double() -> Iterator[CanvasDouble]:
    found = CanvasDouble(class_of(SENTINEL))
    found.start()
    yield found
    found.stop()


class Recorder:
    """A client whose every answer's text is kept, to look for the token in."""

    def __init__(self, client: TestClient) -> None:
        self.client, self.texts = client, []

    def call(self, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
        answer = self.client.request(method, path, **kwargs)
        self.texts.append(answer.text)
        assert answer.status_code == status, answer.text
        return answer.json()


def _review(api: Recorder, run_id: str, essays: list[str]) -> None:
    """The teacher's desk: two overrides, the rest accepted, two students left undecided."""
    for essay in essays:
        if essay in UNDECIDED:
            continue
        for trait in ("Ideas", "Conventions"):
            found = OVERRIDES.get((essay, trait))
            body = {"essay_id": essay, "trait": trait, "action": "override" if found else "accept"}
            if found:
                body |= {"score": found[0], "comment": found[1]}
            api.call("POST", f"/api/runs/{run_id}/overrides", 201, json=body)


def test_the_api_round_trip(double: CanvasDouble, tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with client_for(config) as client:
        api = Recorder(client)
        assert api.call("GET", "/api/lms/connection") == {"connected": False, "url": None, "courses": None}
        api.call("POST", "/api/lms/connect", 422, json={"url": double.base, "token": SENTINEL * 40})  # over 500
        wrong = api.call("POST", "/api/lms/connect", 400, json={"url": double.base, "token": "not-it"})
        assert "401" in wrong["error"]["message"] and not (config.data_dir / FILE_NAME).exists()  # refused, not kept
        connected = api.call("POST", "/api/lms/connect", json={"url": double.base + "/", "token": SENTINEL})
        assert connected == {"connected": True, "url": double.base, "courses": 1}
        assert api.call("GET", "/api/lms/courses") == [{"id": 7, "name": "English 9"}]
        [assignment] = api.call("GET", "/api/lms/courses/7/assignments")
        assert assignment["name"] == "River essay" and assignment["rubric"]

        pulled = api.call("POST", "/api/lms/pull", 201, json={"course_id": 7, "assignment_id": 77})
        assert pulled["essays"] == 25 and not pulled["refused"] and pulled["assignment"] == "River essay"
        rubric = api.call("GET", f"/api/rubrics/{pulled['rubric_id']}")["rubric"]
        assert [t["name"] for t in rubric["traits"]] == ["Ideas", "Conventions"]
        body = {"protocols": ["MAD"], "backend": {"kind": "fake"}}
        run = api.call("POST", f"/api/lms/pulls/{pulled['pull_id']}/run", 201, json=body)
        assert run["name"] == "River essay" and wait_status(client, run["id"], 120)["status"] == "finished"
        essays = [f"{1000 + i}" for i in range(1, 26)]
        _review(api, run["id"], essays)

        preview = api.call("GET", f"/api/lms/runs/{run['id']}/preview")
        assert preview["counts"] == {"send": 23, "undecided": 2}
        changes = {c["essay_id"]: c for c in preview["changes"]}
        assert [e for e, c in changes.items() if c["status"] == "undecided"] == list(UNDECIDED)
        ideas = next(line for line in changes["1001"]["rubric_assessment"] if line["trait"] == "Ideas")
        assert ideas["points"] == 1 and ideas["by"] == "teacher" and "Support your ideas" in ideas["comment"]
        assert all(s.updates == 0 for s in double.data.subs.values())  # a preview sends nothing

        # a review after the preview: the preview is stale, the push refused, nothing sent
        api.call(
            "POST",
            f"/api/runs/{run['id']}/overrides",
            201,
            json={"essay_id": "1003", "trait": "Ideas", "action": "override", "score": 4},
        )
        stale = api.call("POST", f"/api/lms/runs/{run['id']}/push", 409, json={"fingerprint": preview["fingerprint"]})
        assert "preview again" in stale["error"]["message"]
        assert all(s.updates == 0 for s in double.data.subs.values())

        again = api.call("GET", f"/api/lms/runs/{run['id']}/preview")
        assert again["fingerprint"] != preview["fingerprint"]
        sent = api.call("POST", f"/api/lms/runs/{run['id']}/push", json={"fingerprint": again["fingerprint"]})
        assert len(sent["sent"]) == 23 and {x["essay_id"] for x in sent["left"]} == set(UNDECIDED)
        for change in again["changes"]:
            sub = double.data.subs[int(change["essay_id"])]
            if change["status"] != "send":
                assert sub.updates == 0 and sub.score is None
                continue
            assert sub.score == change["new_grade"] and [c["comment"] for c in sub.comments] == [change["comment"]]
            for line in change["rubric_assessment"]:
                assert sub.assessment[line["criterion_id"]]["points"] == line["points"]
        assert double.data.subs[1003].assessment["_101"]["points"] == 4  # the review made after the first preview
        after = api.call("GET", f"/api/lms/runs/{run['id']}/preview")
        assert after["counts"] == {"sent before": 23, "undecided": 2}

    assert all(SENTINEL not in text for text in api.texts)
    kept = config.data_dir / FILE_NAME
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and SENTINEL in kept.read_text()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != kept]
    assert written and all(SENTINEL.encode() not in p.read_bytes() for p in written)


def test_a_canvas_the_operator_did_not_allow_is_refused(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        answer = client.post("/api/lms/connect", json={"url": "https://10.20.30.40", "token": SENTINEL})
    assert answer.status_code == 403 and "--allow-lms-url" in answer.text and SENTINEL not in answer.text
    allowed = ServerConfig(data_dir=tmp_path / "d", allow_lms_urls=("https://school.instructure.com",))
    access.check_lms(allowed, "https://school.instructure.com", resolver=lambda h, p: ["203.0.113.9"])
    with pytest.raises(NotAllowed):
        access.check_lms(allowed, "https://other.instructure.com", resolver=lambda h, p: ["203.0.113.9"])
    access.check_lms(allowed, "http://localhost:8123", resolver=lambda h, p: ["127.0.0.1"])


def test_a_run_not_pulled_from_canvas_has_no_preview(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        answer = client.get("/api/lms/runs/nosuchrun/preview")
    assert answer.status_code == 404

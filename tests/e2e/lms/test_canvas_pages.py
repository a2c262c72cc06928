"""The teacher's Canvas pages in process, on the local Canvas double: connect (a wrong token refused and never put
back in the form), pick the course and assignment, pull into a class that goes to the usual backend step, score on
the fake backend, review, and the preview page listing every student with one "Send to Canvas" form carrying the
preview's fingerprint; a send whose preview went stale shows the new preview (409) and sends nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.canvas_double import CanvasDouble, class_of
from tests.web_helpers import HTML, client_for, csrf, form_post, make_config, wait_status

pytest.importorskip("canvasapi")
pytestmark = pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly")

SENTINEL = "canvas-token-SENTINEL-pages-9e1d"


@pytest.fixture()
def double() -> Iterator[CanvasDouble]:
    found = CanvasDouble(class_of(SENTINEL, n=6))
    found.start()
    yield found
    found.stop()


def _connect(client: Any, csrf_token: str, url: str, token: str) -> Any:
    form = {"csrf_token": csrf_token, "url": url, "token": token}
    return client.post("/lms/connect", data=form, headers=HTML, follow_redirects=False)


def _fingerprint(page: str) -> str:
    found = re.search(r'name="fingerprint" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def test_the_pages_round_trip(double: CanvasDouble, tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        texts = []
        first = client.get("/lms", headers=HTML).text
        assert 'id="connect-form"' in first
        token = csrf(client, "/lms")
        refused = _connect(client, token, double.base, "wrong-" + SENTINEL)
        assert refused.status_code == 400 and "401" in refused.text and SENTINEL not in refused.text
        assert _connect(client, token, double.base, SENTINEL).status_code == 303
        picked = client.get("/lms?course=7", headers=HTML).text
        assert "English 9" in picked and "River essay" in picked and double.base in picked
        pulled = form_post(client, "/lms/pull", token, course_id="7", assignment_id="77")
        draft = pulled.headers["location"].split("/")[2]
        assert pulled.headers["location"] == f"/drafts/{draft}/backend"
        started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
        run = started.headers["location"].split("/")[2]
        assert wait_status(client, run, 60)["status"] == "finished"
        body = {"essay_id": "1001", "trait": "Ideas", "action": "override", "score": 1, "comment": "More support."}
        assert client.post(f"/api/runs/{run}/overrides", json=body).status_code == 201
        for essay in ("1001", "1002", "1003", "1004", "1005", "1006"):
            for trait in ("Ideas", "Conventions") if essay != "1001" else ("Conventions",):
                client.post(f"/api/runs/{run}/overrides", json={"essay_id": essay, "trait": trait, "action": "accept"})

        listed = client.get("/lms", headers=HTML).text
        assert f'href="/runs/{run}/lms"' in listed
        preview = client.get(f"/runs/{run}/lms", headers=HTML).text
        texts += [first, picked, listed, preview]
        assert preview.count('data-status="send"') == 6 and "More support." in preview and "no grade" in preview
        stale_print = _fingerprint(preview)
        client.post(
            f"/api/runs/{run}/overrides", json={"essay_id": "1002", "trait": "Ideas", "action": "override", "score": 4}
        )
        stale = form_post(client, f"/runs/{run}/lms/push", token, fingerprint=stale_print, include_undecided="no")
        assert stale.status_code == 409 and 'id="error-fingerprint"' in stale.text
        assert all(s.updates == 0 for s in double.data.subs.values())
        sent = form_post(client, f"/runs/{run}/lms/push", token, fingerprint=_fingerprint(stale.text))
        assert sent.status_code == 303 and sent.headers["location"] == f"/runs/{run}/lms?sent=6"
        after = client.get(sent.headers["location"], headers=HTML).text
        texts += [stale.text, after]
        assert 'id="sent"' in after and after.count('data-status="sent before"') == 6
        assert double.data.subs[1002].assessment["_101"]["points"] == 4
    assert all(SENTINEL not in text for text in texts)

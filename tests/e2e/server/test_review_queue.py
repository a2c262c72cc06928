"""The review queue: scripted answers ranked with the uncertain ones first, and over HTTP the unreviewed
counter, the one-click approvals, an override that stays, and accepting over an override that asks first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.web_helpers import FAKE, HTML, RUBRIC, client_for, essays_json, make_config, token_in, wait_status

from madrag.teacher.review_queue import ItemSignals, assess, rank, spread

SURE = {2: 0.02, 3: 0.96, 4: 0.02}
TORN = {1: 0.05, 2: 0.45, 3: 0.05, 4: 0.45}


def item(name: str, score: int | None = 3, **kw: object) -> ItemSignals:
    return ItemSignals(essay_id=name, trait="Ideas", score=score, lo=1, hi=4, **kw)  # type: ignore[arg-type]


def test_uncertain_scripted_answers_rank_first() -> None:
    confident = item(
        "confident", distribution=SURE, advocate_confidence=0.9, skeptic_confidence=0.3, unverified_quotes=0
    )
    torn = item("torn", distribution=TORN, advocate_confidence=0.9, skeptic_confidence=0.3, unverified_quotes=0)
    balanced = item("balanced", distribution=SURE, advocate_confidence=0.8, skeptic_confidence=0.8, unverified_quotes=0)
    quotes = item("quotes", distribution=SURE, advocate_confidence=0.9, skeptic_confidence=0.3, unverified_quotes=3)
    disagree = item("disagree", distribution=SURE, other_scores=[1])
    missing = item("missing", score=None)
    unknown = item("unknown")  # nothing could be read: not counted as certain, ranked after every known doubt
    order = [q.essay_id for q in rank([confident, unknown, quotes, balanced, disagree, torn, missing])]
    assert order[0] == "missing" and order[1] == "torn" and order[-2:] == ["confident", "unknown"]
    assert set(order[2:5]) == {"quotes", "balanced", "disagree"}
    assert not assess(confident).flagged and all(assess(x).flagged for x in (torn, quotes, disagree, missing))
    assert not assess(balanced).flagged  # a balanced debate raises the doubt but flags nothing alone
    assert assess(balanced).doubt > assess(confident).doubt  # type: ignore[operator]
    assert assess(unknown).doubt is None and assess(missing).doubt == 1.0
    assert "torn between 2 and 4" in assess(torn).reasons[0]
    assert assess(quotes).reasons == ["3 quotes not found in the essay"]
    assert assess(disagree).reasons == ["another method scored it 1, not 3"]


def test_spread_is_zero_for_one_score_and_one_for_the_two_ends() -> None:
    assert spread({3: 1.0}, 1, 4) == 0.0
    assert spread({1: 0.5, 4: 0.5}, 1, 4) == pytest.approx(1.0)
    assert spread({2: 0.5, 3: 0.5}, 1, 4) == 1.0  # two neighbours equally likely: torn
    assert spread(None, 1, 4) is None


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def _unscored(n: int) -> list[dict[str, object]]:
    """A class's essays that nobody scored yet (every grade is madrag's until the teacher decides it)."""
    return [{"id": e["id"], "text": e["text"]} for e in essays_json(n)]


def _run(client: TestClient, n: int = 3, scored: bool = False) -> str:
    essays = essays_json(n) if scored else _unscored(n)
    body = {"rubric": RUBRIC, "essays": essays, "protocols": ["MAD"], "backend": FAKE}
    run_id: str = client.post("/api/runs", json=body).json()["id"]
    assert wait_status(client, run_id)["status"] == "finished"
    return run_id


def _post(client: TestClient, path: str, token: str, **fields: str) -> object:
    return client.post(path, data={"csrf_token": token, **fields}, headers=HTML, follow_redirects=False)


def _reviews(client: TestClient, run_id: str) -> list[tuple[str, str, str, int | None]]:
    rows = client.get(f"/api/runs/{run_id}/overrides").json()
    return [(r["essay_id"], r["trait"], r["action"], r["new_score"]) for r in rows]


def test_queue_counts_approvals_and_an_override_that_stays(client: TestClient) -> None:
    run_id = _run(client)
    page = client.get(f"/runs/{run_id}/review", headers=HTML).text
    assert re.search(r'id="unreviewed">6<', page) and "not valid grades" in page
    token = token_in(page)
    essay = f"/runs/{run_id}/essays/e1"
    fields = {"trait": "Ideas", "protocol": "MAD", "score": "1", "comment": "needs a thesis", "reviewer": "Ms. K"}
    assert _post(client, essay + "/review", token, action="override", **fields).status_code == 303  # type: ignore[attr-defined]
    shown = client.get(essay, headers=HTML).text
    assert "Your comment: “needs a thesis”" in shown and "(replaces yours)" in shown
    approved = _post(client, f"/runs/{run_id}/approve", token, essay_id="e1")
    assert approved.status_code == 303 and approved.headers["location"].endswith("approved=1")  # type: ignore[attr-defined]
    assert ("e1", "Ideas", "override", 1) in _reviews(client, run_id)  # approving the essay kept the override
    asked = _post(client, essay + "/review", token, action="accept", trait="Ideas", protocol="MAD")
    assert asked.status_code == 200 and "Replace your score?" in asked.text  # type: ignore[attr-defined]
    assert [r for r in _reviews(client, run_id) if r[:2] == ("e1", "Ideas")] == [("e1", "Ideas", "override", 1)]
    queue = client.get(f"/runs/{run_id}/review", headers=HTML).text
    assert re.search(r'id="unreviewed">4<', queue)
    everything = _post(client, f"/runs/{run_id}/approve", token)
    assert everything.headers["location"].endswith("approved=4")  # type: ignore[attr-defined]
    assert re.search(r'id="unreviewed">0<', client.get(f"/runs/{run_id}/review", headers=HTML).text)
    after = _reviews(client, run_id)
    assert [r for r in after if r[:2] == ("e1", "Ideas")] == [("e1", "Ideas", "override", 1)]
    confirmed = _post(client, essay + "/review", token, action="accept", trait="Ideas", protocol="MAD", confirm="yes")
    assert confirmed.status_code == 303  # type: ignore[attr-defined]
    assert _reviews(client, run_id)[-1][:3] == ("e1", "Ideas", "accept")

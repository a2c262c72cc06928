"""Crafted input answers a 4xx that says what is wrong, never a 500, and is refused before it is expanded: a
trait scaled 0 to 10^9 (through the API, inline in a run, the rubric form), a superscript or 5,000-digit number
where a page, a score, a count or a scale is read, a review's comment over its limit or without its trait."""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import FAKE, HTML, client_for, essays_json, form_post, make_config, token_in

WIDE = {"name": "Wide", "min": 0, "max": 10**9, "levels": {"0": "none", "1": "some"}}
JUNK = ("\u00b2", "\u0661", "1" * 5000, "1e3", "-", "")  # a superscript two, an Arabic-Indic one, 5,000 digits


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, str]]:
    config = make_config(tmp_path_factory.mktemp("hostile"))
    run_id = synthesize_run(config.runs_dir, 3, rubric_of(2, 0, 3), human=False)
    with client_for(config) as client:
        token = token_in(client.get("/", headers=HTML).text)
        yield client, run_id, token


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _refused_quickly(send: Any) -> Any:
    before, start = _peak_mb(), time.monotonic()
    response = send()
    assert time.monotonic() - start < 1.0
    assert _peak_mb() - before < 200  # the range of a billion levels is never built
    assert 400 <= response.status_code < 500, response.text
    return response


def test_a_billion_level_scale_is_refused_at_once_on_every_path(served: tuple[TestClient, str, str]) -> None:
    client, _, token = served
    as_rubric = _refused_quickly(lambda: client.post("/api/rubrics", json={"traits": [WIDE]}))
    assert "1,000,000,001 levels" in as_rubric.json()["error"]["message"]
    body = {"rubric": {"traits": [WIDE]}, "essays": essays_json(1), "protocols": ["MAD"], "backend": FAKE}
    as_run = _refused_quickly(lambda: client.post("/api/runs", json=body))
    assert "at most 101" in as_run.json()["error"]["message"]
    draft = form_post(client, "/new", token).headers["location"].split("/")[2]
    fields = {"mode": "form", "trait-0-name": "Wide", "trait-0-min": "0", "trait-0-max": str(10**9)}
    as_form = _refused_quickly(
        lambda: form_post(client, f"/drafts/{draft}/rubric", token, **fields, **{"trait-0-levels": "0: none"})
    )
    assert "1,000,000,001 levels" in as_form.text


@pytest.mark.parametrize("junk", JUNK[:3])
def test_a_page_that_is_no_number_is_a_400(served: tuple[TestClient, str, str], junk: str) -> None:
    client, run_id, _ = served
    for page in ("review", "results", "gradebook"):
        response = client.get(f"/runs/{run_id}/{page}", params={"page": junk}, headers=HTML)
        assert response.status_code == 400, (page, response.status_code)
        assert "page must be a page number" in response.text


@pytest.mark.parametrize("junk", JUNK)
def test_the_rubric_form_reads_only_whole_numbers(served: tuple[TestClient, str, str], junk: str) -> None:
    client, _, token = served
    draft = form_post(client, "/new", token).headers["location"].split("/")[2]
    url = f"/drafts/{draft}/rubric"
    added = form_post(client, url, token, mode="form", action="add_trait", slots=junk)
    assert added.status_code == 200  # a count of boxes that is no number: the usual four, plus the one added
    for end in ("min", "max"):
        fields = {"trait-0-name": "Voice", f"trait-0-{end}": junk, "trait-0-levels": "1: weak\n2: strong"}
        response = form_post(client, url, token, mode="form", slots=junk, **fields)
        assert response.status_code in (303, 400), response.text  # "" is no typed scale: the levels' is read
        if junk:
            assert "must be whole numbers" in response.text
    level = form_post(client, url, token, mode="form", **{"trait-0-name": "Voice", "trait-0-levels": f"{junk}: x"})
    assert level.status_code == 400 and "score: description" in level.text
    fold = form_post(client, f"/drafts/{draft}/exemplars", token, pool="none", eval_fold=junk or "x")
    assert fold.status_code in (400, 409)


def _review(client: TestClient, run_id: str, token: str, **fields: str) -> Any:
    return form_post(client, f"/runs/{run_id}/essays/e00000/review", token, action="override", **fields)


@pytest.mark.parametrize("junk", JUNK[:4])
def test_a_review_score_that_is_no_number_is_a_4xx(served: tuple[TestClient, str, str], junk: str) -> None:
    client, run_id, token = served
    response = _review(client, run_id, token, trait="Trait 1", protocol="MADRAG", score=junk)
    assert response.status_code == 422 and "Traceback" not in response.text
    api = client.post(f"/api/runs/{run_id}/overrides", json={"essay_id": "e00000", "trait": "Trait 1", "score": junk})
    assert api.status_code == 422


def test_a_review_form_the_request_model_refuses_is_a_422(served: tuple[TestClient, str, str]) -> None:
    client, run_id, token = served
    long = _review(client, run_id, token, trait="Trait 1", protocol="MADRAG", score="2", comment="x" * 5001)
    assert long.status_code == 422 and "comment" in long.text
    no_trait = _review(client, run_id, token, protocol="MADRAG", score="2")
    assert no_trait.status_code == 422 and "trait" in no_trait.text
    saved = _review(client, run_id, token, trait="Trait 1", protocol="MADRAG", score="2", comment="fine")
    assert saved.status_code == 303  # the same form, its values in range, is kept


def test_a_content_length_of_thousands_of_digits_is_a_413(served: tuple[TestClient, str, str]) -> None:
    client, _, _ = served
    response = client.post("/api/rubrics", content=b"{}", headers={"content-length": "9" * 5000})
    assert response.status_code == 413


def test_a_reviewer_named_in_any_script_is_remembered(served: tuple[TestClient, str, str]) -> None:
    client, run_id, token = served
    saved = _review(client, run_id, token, trait="Trait 2", protocol="MADRAG", score="1", reviewer="李老师")
    assert saved.status_code == 303  # a cookie's header is Latin-1: the name is kept quoted, never a 500
    assert "李老师" in client.get(f"/runs/{run_id}/review", headers=HTML).text
    approved = form_post(client, f"/runs/{run_id}/approve", token, reviewer="\u0660 Ōta")
    assert approved.status_code == 303

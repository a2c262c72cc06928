"""Property tests of the server's inputs (hypothesis, in process): random text, any script's digits and
superscripts, huge and signed numbers, fractions, NUL bytes, in every form field and query parameter of the main
routes and in the JSON API's rubric and review bodies. No answer is a 5xx, and the server's memory does not grow
past a bound over all of them. Bounded in time: a fixed number of examples per route, no shrinking database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import HTML, client_for, form_post, make_config, token_in

EXAMPLES = 100
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MAX_GROWTH_MB = 150
"""The most the server's resident memory may grow over every example of this module (a leak of a few KB per
request, or one input expanded, would pass it)."""

NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.integers(19, 6_000).map(lambda n: "9" * n),  # past int's 4,300-digit limit too
    st.floats().map(str),  # nan, inf, 1e+300
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=6),  # '²', '١٢', '½'
    st.sampled_from(["", " ", "-", "+1", "-0", " 7 ", "0x10", "1e3", "1_000", "\u22121", "\x00", "3.0"]),
)
JUNK = st.one_of(NUMBERS, st.text(max_size=40), st.text(max_size=6_000).map(lambda t: t * 2))
JSON_NUMBER = st.one_of(
    st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), NUMBERS, st.none()
)


def _fields(*names: str, **fixed: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, str]]:
    """A form of these fields, each given junk or left out (``fixed``: a field's own values, or junk)."""
    optional = {name: JUNK for name in names}
    optional.update({name: st.one_of(values, JUNK) for name, values in fixed.items()})
    return st.fixed_dictionaries({}, optional=optional)


def _rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 1024 / 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    config = make_config(tmp_path_factory.mktemp("fuzz"))
    run_id = synthesize_run(config.runs_dir, 4, rubric_of(2, 0, 3), human=False)
    with client_for(config) as client:
        token = token_in(client.get("/", headers=HTML).text)
        draft = form_post(client, "/new", token).headers["location"].split("/")[2]
        client.get(f"/runs/{run_id}/review", headers=HTML)  # caches warmed before the memory is first read
        yield {"client": client, "run": run_id, "token": token, "draft": draft, "rss": _rss_mb()}


def _no_5xx(response: Any, what: object) -> None:
    assert response.status_code < 500, (response.status_code, what, response.text[:300])


@FUZZ
@given(
    query=_fields("page", "trait", "state", "flag", "essay", "essay_id"),
    page=st.sampled_from(["review", "results", "gradebook", "feedback", "calibration", "overview"]),
)
def test_page_queries(served: dict[str, Any], query: dict[str, str], page: str) -> None:
    client: TestClient = served["client"]
    _no_5xx(client.get(f"/runs/{served['run']}/{page}", params=query, headers=HTML), query)


@FUZZ
@given(
    form=_fields(
        "trait", "protocol", "score", "comment", "reviewer", "back", "confirm",
        action=st.sampled_from(["override", "accept"]), trait=st.sampled_from(["Trait 1", "Trait 2"]),
    )
)  # fmt: skip
def test_the_review_form(served: dict[str, Any], form: dict[str, str]) -> None:
    url = f"/runs/{served['run']}/essays/e00001/review"
    _no_5xx(form_post(served["client"], url, served["token"], **form), form)


@FUZZ
@given(
    form=_fields(
        "slots", "name", "prompt", "rubric_id", "trait-0-name", "trait-0-min", "trait-0-max", "trait-0-levels",
        "trait-1-name", "trait-1-min", "trait-1-max", "trait-1-levels",
        mode=st.sampled_from(["form", "shipped"]), action=st.just("add_trait"),
        **{"trait-0-levels": st.sampled_from(["0: none\n1: some", "1: a\n2: b\n3: c", "\u00b2: x"])},
    )
)  # fmt: skip
def test_the_rubric_form(served: dict[str, Any], form: dict[str, str]) -> None:
    url = f"/drafts/{served['draft']}/rubric"
    _no_5xx(form_post(served["client"], url, served["token"], **form), form)


@FUZZ
@given(
    exemplars=_fields("pool", "eval_fold", pool=st.sampled_from(["none", "same", "asap"])),
    approve=_fields("trait", "flag", "state", "essay", "reviewer", "back"),
    feedback=_fields("trait", "works", "next", trait=st.just("Trait 1")),
)
def test_the_other_forms(
    served: dict[str, Any], exemplars: dict[str, str], approve: dict[str, str], feedback: dict[str, str]
) -> None:
    client, token, run = served["client"], served["token"], served["run"]
    _no_5xx(form_post(client, f"/drafts/{served['draft']}/exemplars", token, **exemplars), exemplars)
    _no_5xx(form_post(client, f"/runs/{run}/approve", token, **approve), approve)
    _no_5xx(form_post(client, f"/runs/{run}/feedback/e00002", token, **feedback), feedback)


@FUZZ
@given(
    name=JUNK,
    low=JSON_NUMBER,
    high=JSON_NUMBER,
    levels=st.dictionaries(JUNK, st.one_of(JUNK, JSON_NUMBER), max_size=4),
    review=st.fixed_dictionaries(
        {"essay_id": st.sampled_from(["e00003", "nope"])},
        optional={"trait": JUNK, "score": JSON_NUMBER, "comment": JUNK, "action": JUNK, "protocol": JUNK},
    ),
)
def test_the_json_bodies(
    served: dict[str, Any], name: str, low: Any, high: Any, levels: dict[str, Any], review: dict[str, Any]
) -> None:
    client: TestClient = served["client"]
    rubric = {"traits": [{"name": name, "min": low, "max": high, "levels": levels}]}
    _no_5xx(client.post("/api/rubrics", json=rubric), rubric)
    _no_5xx(client.post(f"/api/runs/{served['run']}/overrides", json=review), review)
    raw = json.dumps(review).replace('"score": ', '"score": 1e999, "x": ')  # a number JSON reads as infinity
    headers = {"content-type": "application/json"}
    _no_5xx(client.post(f"/api/runs/{served['run']}/overrides", content=raw, headers=headers), raw)


def test_memory_stayed_bounded_over_every_example(served: dict[str, Any]) -> None:
    """Runs after the property tests of this module (pytest keeps a module's order)."""
    grown = _rss_mb() - served["rss"]
    assert grown < MAX_GROWTH_MB, f"the server grew {grown:.0f} MB over the fuzzed requests"

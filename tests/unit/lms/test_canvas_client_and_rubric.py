"""The Canvas client's retries and refusals against the Canvas double, and the Canvas rubric as madrag's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from tests.canvas_double import RUBRIC, CanvasDouble, class_of

from madrag.errors import RubricError
from madrag.lms.client import Backoff, CanvasClient, LmsError, LmsTransient
from madrag.lms.credentials import CanvasCredentials, load_credentials, save_credentials
from madrag.lms.rubric_import import import_rubric

pytest.importorskip("canvasapi")
pytestmark = pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly")


@pytest.fixture()
def double() -> Iterator[CanvasDouble]:
    found = CanvasDouble(class_of("right-token", n=3))
    found.start()
    yield found
    found.stop()


def _client(double: CanvasDouble, token: str = "right-token", tries: int = 3) -> tuple[CanvasClient, list[float]]:
    waits: list[float] = []
    creds = CanvasCredentials(url=double.base, token=SecretStr(token))
    return CanvasClient(creds, Backoff(tries=tries, first_s=0.5, max_s=1.0), sleep=waits.append), waits


def test_a_busy_canvas_is_retried_with_backoff(double: CanvasDouble) -> None:
    client, waits = _client(double)
    double.data.fail_next = [503, 429]
    assert [c["name"] for c in client.courses()] == ["English 9"]
    assert waits == [0.5, 1.0]


def test_retries_run_out_in_one_line(double: CanvasDouble) -> None:
    client, waits = _client(double, tries=2)
    double.data.fail_next = [502, 502]
    with pytest.raises(LmsTransient, match="after 2 tries") as caught:
        client.courses()
    assert "\n" not in str(caught.value) and waits == [0.5]


def test_a_wrong_token_is_one_sentence_without_the_token(double: CanvasDouble) -> None:
    client, waits = _client(double, token="wrong-token-XYZ")
    with pytest.raises(LmsError, match=r"refused the access token .* \(401\)") as caught:
        client.courses()
    assert "wrong-token-XYZ" not in str(caught.value) and waits == []


def test_forbidden_is_one_sentence(double: CanvasDouble) -> None:
    client, _ = _client(double)
    double.data.fail_next = [403]
    with pytest.raises(LmsError, match=r"\(403\): the token's user is not allowed"):
        client.courses()


def test_pagination_follows_the_link_headers(double: CanvasDouble) -> None:
    double.data.max_per_page = 2
    client, _ = _client(double)
    assert len(client.students(7)) == 3
    pages = [path for method, path in double.data.requests if "search_users" in path]
    assert len(pages) == 2 and "page=2" in pages[1]


def test_credentials_file_is_the_owners_only(tmp_path: Path) -> None:
    path = save_credentials("https://school.instructure.com/api/v1/", "s3cret-tok", tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    creds = load_credentials(tmp_path)
    assert creds.url == "https://school.instructure.com" and "s3cret" not in repr(creds)
    path.chmod(0o644)
    with pytest.raises(Exception, match="chmod 600"):
        load_credentials(tmp_path)


def test_rubric_criteria_become_traits_with_their_points() -> None:
    rubric, links = import_rubric({"name": "Essay", "rubric": RUBRIC, "rubric_settings": {"title": "R"}})
    ideas = rubric.trait("Ideas")
    assert (ideas.min, ideas.max) == (0, 4) and ideas.levels[4].startswith("Excellent")
    assert ideas.levels[1] == 'between "Weak" (0) and "Fair" (2)'  # a gap between ratings, said so
    assert links[0].criterion_id == "_101" and links[0].ratings == {4: "r1", 3: "r2", 2: "r3", 0: "r4"}


def test_rubric_with_points_that_are_not_whole_is_refused() -> None:
    half = [{**RUBRIC[0], "ratings": [*RUBRIC[0]["ratings"], {"id": "x", "description": "Almost", "points": 3.5}]}]
    with pytest.raises(RubricError, match=r"rating 'Almost': 3.5 points is not a whole number"):
        import_rubric({"name": "Essay", "rubric": half})


def test_an_assignment_without_a_rubric_is_refused() -> None:
    with pytest.raises(RubricError, match="has no rubric"):
        import_rubric({"name": "Essay"})


def test_same_points_share_a_level_and_names_are_unique() -> None:
    twice = [
        {
            "id": "a",
            "description": "Voice",
            "points": 2,
            "ratings": [
                {"id": "1", "description": "Strong", "points": 2},
                {"id": "2", "description": "Vivid", "points": 2},
                {"id": "3", "description": "Flat", "points": 0},
            ],
        },
        {
            "id": "b",
            "description": "voice",
            "points": 1,
            "ratings": [{"id": "4", "description": "Yes", "points": 1}, {"id": "5", "description": "No", "points": 0}],
        },
    ]
    rubric, _ = import_rubric({"name": "E", "rubric": twice})
    assert rubric.trait_names == ["Voice", "voice (2)"] and rubric.traits[0].levels[2] == "Strong / Vivid"

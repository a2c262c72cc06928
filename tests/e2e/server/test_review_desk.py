"""The review desk and the essay page write only what the teacher meant (over HTTP, in process): Enter in a comment
sends the form's default button and saves the comment alone, never a level; a bulk approval is recorded and shown as
"approved in bulk" on every surface, and agreement counts only the scores she decided one by one; one name, asked
once per browser, signs every decision through filters and pages."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from lxml import html as lxml_html
from tests.web_helpers import FAKE, HTML, RUBRIC, client_for, essays_json, form_post, make_config, token_in, wait_status


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def unscored_run(client: TestClient, n: int) -> str:
    """A finished run of ``n`` essays nobody scored (every grade madrag's until the teacher decides it)."""
    essays = [{"id": e["id"], "text": e["text"]} for e in essays_json(n)]
    body = {"rubric": RUBRIC, "essays": essays, "protocols": ["MAD"], "backend": FAKE}
    run_id: str = client.post("/api/runs", json=body).json()["id"]
    assert wait_status(client, run_id)["status"] == "finished"
    return run_id


def grades(client: TestClient, run_id: str) -> dict[tuple[str, str], tuple[int | None, str | None, str | None]]:
    """(grade, review action in force, comment) per (essay, trait), as the scores export says."""
    rows = csv.DictReader(io.StringIO(client.get(f"/api/runs/{run_id}/export?format=csv").text))
    return {
        (r["essay_id"], r["trait"]): (int(r["grade"]), r["review"] or None, r["review_comment"] or None) for r in rows
    }


def desk_row(client: TestClient, run_id: str, essay: str, trait: str, query: str = "") -> Any:
    tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/review{query}", headers=HTML).text)
    return tree.xpath(f"//table[@id='review-queue']//tr[@data-essay='{essay}'][@data-trait='{trait}']")[0]


def review(client: TestClient, run_id: str, token: str, essay: str, trait: str, **fields: str) -> Any:
    return form_post(client, f"/runs/{run_id}/essays/{essay}/review", token, trait=trait, protocol="MAD", **fields)


def test_every_review_form_sends_the_comment_on_enter_and_no_level_without_its_button(client: TestClient) -> None:
    run_id = unscored_run(client, 2)
    pages = [f"/runs/{run_id}/review", f"/runs/{run_id}/essays/e1"]
    for path in pages:
        tree = lxml_html.fromstring(client.get(path, headers=HTML).text)
        forms = tree.xpath("//form[contains(@action, '/essays/')][@method='post']")
        assert forms, path
        for form in forms:
            buttons = form.xpath(".//button[not(@type) or @type='submit']")
            # the default button (the one Enter in a field sends) is the first: it says comment, and names no level
            assert (buttons[0].get("name"), buttons[0].get("value")) == ("action", "comment"), path
            assert not form.xpath(".//input[@name='action']"), path  # no hidden action riding along every button
            assert all(b.get("name") == "score" for b in form.xpath(".//button[contains(@class, 'level')]")), path


def test_enter_in_a_comment_saves_it_and_sets_no_level(client: TestClient) -> None:
    run_id = unscored_run(client, 2)
    token = token_in(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    before = grades(client, run_id)
    # Enter in the desk's comment of e1/Ideas: the browser sends the default button, action=comment
    sent = review(
        client, run_id, token, "e1", "Ideas", action="comment", comment="where is the thesis?", back="review?"
    )
    assert sent.status_code == 303 and sent.headers["location"] == f"/runs/{run_id}/review?open=e1"  # reading e1
    after = grades(client, run_id)
    assert after[("e1", "Ideas")] == (before[("e1", "Ideas")][0], "comment", "where is the thesis?")
    assert {k: v for k, v in after.items() if k != ("e1", "Ideas")} == {
        k: v for k, v in before.items() if k != ("e1", "Ideas")
    }
    row = desk_row(client, run_id, "e1", "Ideas")
    assert "not reviewed" in row.xpath(".//small[@class='how']")[0].text_content()  # still undecided
    assert row.xpath(".//input[@name='comment']")[0].get("value") == "where is the thesis?"
    assert re.search(r'id="unreviewed">4<', client.get(f"/runs/{run_id}/review", headers=HTML).text)
    # a form that names neither a level nor an action (a script, an old page's Enter without a level) sets none
    review(client, run_id, token, "e1", "Style", comment="")
    assert grades(client, run_id)[("e1", "Style")] == before[("e1", "Style")]
    # on a decided score, a comment stays with the teacher's score and leaves it as it is
    review(client, run_id, token, "e2", "Style", score="1", comment="")
    saved = review(client, run_id, token, "e2", "Style", action="comment", comment="the ending is missing")
    assert saved.headers["location"].endswith("?saved=Style#trait-Style")  # the essay page, at the criterion
    assert grades(client, run_id)[("e2", "Style")] == (1, "override", "the ending is missing")
    page = client.get(f"/runs/{run_id}/essays/e2", headers=HTML).text
    assert "Your comment: “the ending is missing”" in page and "your score (changed on review)" in page
    # the same comment sent again writes nothing; a level's button (score) is an override
    count = len(client.get(f"/api/runs/{run_id}/overrides").json())
    review(client, run_id, token, "e2", "Style", action="comment", comment="the ending is missing")
    assert len(client.get(f"/api/runs/{run_id}/overrides").json()) == count
    assert review(client, run_id, token, "e2", "Ideas", score="²").status_code == 422  # not a level: refused
    assert grades(client, run_id)[("e2", "Ideas")] == before[("e2", "Ideas")]


def test_bulk_approvals_read_approved_in_bulk_everywhere_and_agreement_counts_only_one_by_one(
    client: TestClient,
) -> None:
    run_id = unscored_run(client, 5)
    token = token_in(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    client.cookies.set("madrag_reviewer", "Ms. Rivera")
    ai = {k: v[0] for k, v in grades(client, run_id).items()}
    changed = 3 if ai[("e1", "Ideas")] != 3 else 0
    review(client, run_id, token, "e1", "Ideas", score=str(changed))  # an override
    review(client, run_id, token, "e2", "Ideas", action="accept")  # madrag's score confirmed, one score
    approved = form_post(client, f"/runs/{run_id}/approve", token, state="open")  # the rest, in bulk
    assert approved.headers["location"].endswith("approved=8")
    found = grades(client, run_id)
    assert found[("e1", "Ideas")][:2] == (changed, "override") and found[("e2", "Ideas")][1] == "accept"
    assert {v[1] for k, v in found.items() if k not in (("e1", "Ideas"), ("e2", "Ideas"))} == {"bulk-accept"}

    desk = client.get(f"/runs/{run_id}/review", headers=HTML).text
    tree = lxml_html.fromstring(desk)
    hows = {
        (r.get("data-essay"), r.get("data-trait")): r.xpath(".//small[@class='how']")[0].text_content()
        for r in tree.xpath("//tr[@data-essay]")
    }
    assert hows[("e3", "Style")] == "AI's score, approved in bulk (Ms. Rivera)"
    assert hows[("e2", "Ideas")] == "AI's score, confirmed by you (Ms. Rivera)"
    assert hows[("e1", "Ideas")] == "your score (changed on review) (Ms. Rivera)"
    assert (
        "accepted by" not in desk
        and "approved in bulk" in tree.xpath("//p[@id='unreviewed-counter']")[0].text_content()
    )
    assert tree.xpath("//span[@id='in-bulk']")[0].text == "8" and tree.xpath("//span[@id='decided']")[0].text == "2"
    agreement = {
        r.get("data-trait"): [td.text_content() for td in r.xpath("./td")]
        for r in tree.xpath("//section[@id='agreement']//tr[@data-trait]")
    }
    exact = "1 of 2" if ai[("e1", "Ideas")] != changed else "2 of 2"
    assert agreement["Ideas"][:2] == ["2", exact] and agreement["Ideas"][-1] == "3"  # only her two; 3 in bulk
    assert agreement["Style"][0] == "0" and agreement["Style"][-1] == "5"  # madrag never agrees with itself here

    essay = lxml_html.fromstring(client.get(f"/runs/{run_id}/essays/e3", headers=HTML).text)
    style = essay.xpath("//section[@id='trait-Style']")[0]
    assert (
        style.xpath(".//small[@class='how']")[0].text_content().startswith("AI's score, approved in bulk (Ms. Rivera, ")
    )
    assert "Confirm madrag's" in style.text_content()
    grid = lxml_html.fromstring(client.get(f"/runs/{run_id}/results", headers=HTML).text)
    assert {c.get("title").split(": ", 1)[1] for c in grid.xpath("//td[@data-how='bulk']")} == {
        "AI's score, approved in bulk"
    }
    book = lxml_html.fromstring(client.get(f"/runs/{run_id}/gradebook", headers=HTML).text)
    assert "AI's score, approved in bulk" in {c.get("title") for c in book.xpath("//td[@data-criterion]")}
    # confirming one of them one by one makes it hers: counted in the agreement, no longer in bulk
    review(client, run_id, token, "e3", "Style", action="accept")
    tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    style = [td.text_content() for td in tree.xpath("//section[@id='agreement']//tr[@data-trait='Style']/td")]
    assert style[0] == "1" and style[-1] == "4"


def test_one_name_asked_once_signs_every_decision_through_filters_and_pages(client: TestClient) -> None:
    run_id = unscored_run(client, 3)
    page = client.get(f"/runs/{run_id}/review?trait=Ideas", headers=HTML).text
    token = token_in(page)
    assert 'id="reviewer-in"' in page  # asked: no name in this browser yet
    back = f"/runs/{run_id}/review?trait=Ideas&page=1"
    saved = form_post(client, "/reviewer", token, reviewer="Ms. Rivera", back=back)
    assert saved.status_code == 303 and saved.headers["location"] == back  # back to the filter it was typed on
    assert form_post(client, "/reviewer", token, reviewer="x", back="//evil.example/").headers["location"] == "/"
    form_post(client, "/reviewer", token, reviewer="Ms. Rivera", back="/")
    for path in (
        f"/runs/{run_id}/review?trait=Ideas",
        f"/runs/{run_id}/review?state=open",
        f"/runs/{run_id}/essays/e2",
    ):
        shown = lxml_html.fromstring(client.get(path, headers=HTML).text)
        assert shown.xpath("//b[@id='reviewer-name']")[0].text == "Ms. Rivera", path  # kept, not asked again
        assert not shown.xpath("//input[@id='reviewer-in']"), path
    review(client, run_id, token, "e1", "Ideas", score="0", back="review?trait=Ideas")  # the desk sends no name
    review(client, run_id, token, "e2", "Style", action="accept")
    review(client, run_id, token, "e3", "Style", action="comment", comment="ok")
    form_post(client, f"/runs/{run_id}/approve", token, trait="Ideas")
    signed = {(r["action"], r["reviewer"]) for r in client.get(f"/api/runs/{run_id}/overrides").json()}
    assert {who for _, who in signed} == {"Ms. Rivera"}
    assert {a for a, _ in signed} == {"override", "accept", "comment", "bulk-accept"}

"""The review desk's reading pane: one essay of the shown page beside the queue, with each criterion's levels,
the grade in force, madrag's suggestion and the Judge's reasons, so a flagged score is checked without leaving
the desk; only one essay's text is on the page however large the run (``?open=`` picks it, else the first
row's); a decision made on a row brings the desk back reading that row's essay. And the backend step: this
browser's model server and the teacher's name are remembered (never a key), so a second class needs no
retyping."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from lxml import html as lxml_html
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import HTML, client_for, csrf, draft_at_backend, form_post, make_config, token_in

from madrag.server.pages.rendering import PAGE_SIZE

ESSAYS = PAGE_SIZE + 50


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    config = make_config(tmp_path_factory.mktemp("pane"))
    run_id = synthesize_run(config.runs_dir, ESSAYS, rubric_of(2, 0, 3), human=False)
    with client_for(config) as client:
        yield client, run_id


def _essays(client: TestClient, run_id: str) -> dict[str, str]:
    view = client.app.state.madrag.runs.view(run_id)  # type: ignore[attr-defined]
    return {e.id: e.text for e in view.essays}


def test_the_pane_shows_one_essay_of_the_page_with_levels_and_reasons(served: tuple[TestClient, str]) -> None:
    client, run_id = served
    texts = _essays(client, run_id)
    page = client.get(f"/runs/{run_id}/review", headers=HTML).text
    tree = lxml_html.fromstring(page)
    rows = tree.xpath("//table[@id='review-queue']//tr[@data-essay]")
    first = rows[0].get("data-essay")
    pane = tree.xpath("//aside[@id='reading-pane']")[0]
    assert pane.get("data-essay") == first and pane.xpath(".//pre[@id='reading-text']")[0].text == texts[first]
    assert sum(text in page for text in texts.values()) == 1  # one essay's text, not the page's (or the run's)
    sections = pane.xpath(".//section[contains(@class, 'reading-trait')]")
    assert [s.get("data-trait") for s in sections] == ["Trait 1", "Trait 2"]
    current = [s for s in sections if "current" in s.get("class")]
    assert [s.get("data-trait") for s in current] == [rows[0].get("data-trait")]
    for section in sections:
        assert [li.get("data-score") for li in section.xpath(".//ul[@class='rt-levels']/li")] == ["0", "1", "2", "3"]
        assert "madrag suggested" in section.text_content() and "madrag's reasons:" in section.text_content()
        assert section.xpath(".//span[@class='rt-reasons']")[0].text.strip()  # the Judge's own words
    links = pane.xpath(".//details[@class='reading-others']//a")
    shown = list(dict.fromkeys(r.get("data-essay") for r in rows))
    assert len(links) == len(shown) <= PAGE_SIZE  # without script: each essay of the page, no more

    other = shown[3]
    unknown = client.get(f"/runs/{run_id}/review?open=nobody", headers=HTML).text
    assert lxml_html.fromstring(unknown).xpath("//aside[@id='reading-pane']")[0].get("data-essay") == first
    reading = client.get(f"/runs/{run_id}/review?open={other}", headers=HTML).text
    pane_of = lxml_html.fromstring(reading).xpath("//aside[@id='reading-pane']")[0]
    assert pane_of.get("data-essay") == other and texts[other] in reading and texts[first] not in reading


def test_a_decision_on_a_row_comes_back_reading_its_essay(served: tuple[TestClient, str]) -> None:
    client, run_id = served
    page = client.get(f"/runs/{run_id}/review?trait=Trait+2", headers=HTML).text
    row = lxml_html.fromstring(page).xpath("//table[@id='review-queue']//tr[@data-essay]")[5]
    essay = row.get("data-essay")
    back = row.xpath(".//input[@name='back']")[0].get("value")
    fields = {"trait": "Trait 2", "action": "override", "score": "1", "back": back, "comment": ""}
    sent = form_post(client, f"/runs/{run_id}/essays/{essay}/review", token_in(page), **fields)
    assert sent.status_code == 303 and sent.headers["location"].endswith(f"trait=Trait+2&open={essay}")
    again = client.get(sent.headers["location"], headers=HTML).text
    pane = lxml_html.fromstring(again).xpath("//aside[@id='reading-pane']")[0]
    assert pane.get("data-essay") == essay
    section = pane.xpath(".//section[@data-trait='Trait 2']")[0]
    assert section.xpath(".//span[@class='rt-grade']")[0].text == "1"
    assert "your score" in section.xpath(".//small[@class='rt-how']")[0].text


def test_the_api_gives_the_pane_levels_and_the_grading_method(served: tuple[TestClient, str]) -> None:
    client, run_id = served
    detail = client.get(f"/api/runs/{run_id}/essays/{next(iter(_essays(client, run_id)))}").json()
    trait = detail["traits"][0]
    assert sorted(trait["levels"]) == ["0", "1", "2", "3"]
    assert [p["grading"] for p in trait["protocols"]][:1] == [True]


def test_the_model_server_and_the_name_are_remembered_never_the_key(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        fields = {"base_url": "http://127.0.0.1:9/v1", "model": "class-model", "api_key": "sk-secret-1234"}
        sent = form_post(client, f"/drafts/{draft}/backend", token, action="test", reviewer="Ms. Rivera", **fields)
        assert sent.status_code in (200, 400)
        assert 'value="openai" checked' in sent.text  # the address typed: a model server, no kind to pick
        cookies = "; ".join(sent.headers.get_list("set-cookie"))
        assert "madrag_server=" in cookies and "sk-secret" not in cookies and "api_key" not in cookies
        assert "madrag_reviewer=" in cookies
        second = draft_at_backend(client, token)  # the next class, in the same browser
        page = client.get(f"/drafts/{second}/backend", headers=HTML).text
        assert 'value="http://127.0.0.1:9/v1"' in page and 'value="class-model"' in page
        assert re.search(r'name="reviewer" id="reviewer" value="Ms. Rivera"', page)
        assert 'value="openai" checked' in page and "sk-secret" not in page


def test_a_server_that_serves_one_model_needs_no_model_name(tmp_path: Path) -> None:
    from madrag.testing.stub_server import StubServer

    with StubServer(latency_s=0.0) as stub, client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        sent = form_post(client, f"/drafts/{draft}/backend", token, action="test", base_url=stub.base_url)
        assert sent.status_code == 200, sent.text[-300:]
        served = client.get("/api/health").status_code == 200 and stub.config.model
        assert f'name="model" value="{served}"' in sent.text  # read from the server's one model, not typed

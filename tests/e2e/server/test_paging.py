"""The long pages page: the review desk, the results grid and the gradebook of a large class are served a page
at a time (``?page=N``), say which rows they show, keep the review desk's filter on every page, and the
desk's bulk approval still covers every page of what the filter shows."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import HTML, client_for, make_config, token_in

from madrag.server.pages.rendering import PAGE_SIZE

ESSAYS = PAGE_SIZE + 50  # two pages of students; five pages of essay-trait scores over two traits


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    config = make_config(tmp_path_factory.mktemp("paging"))
    run_id = synthesize_run(config.runs_dir, ESSAYS, rubric_of(2, 0, 3), human=False)
    with client_for(config) as client:
        yield client, run_id


def _rows(page: str, table: str) -> int:
    body = page.split(f'id="{table}"', 1)[1].split("</tbody>", 1)[0]
    return body.count("<tr") - body.split("<tbody>", 1)[0].count("<tr")


def _count(page: str) -> tuple[int, int, int]:
    found = re.search(r'pager-first">(\d+)<.*?pager-last">(\d+)<.*?pager-total">(\d+)<', page, re.S)
    assert found is not None, "no 'rows X-Y of Z'"
    return int(found[1]), int(found[2]), int(found[3])


def test_the_review_desk_pages_and_keeps_its_filter(served: tuple[TestClient, str]) -> None:
    client, run_id = served
    first = client.get(f"/runs/{run_id}/review", headers=HTML).text
    assert first.count('<b class="score">') == PAGE_SIZE and _count(first) == (1, PAGE_SIZE, 2 * ESSAYS)
    assert 'rel="next"' in first and 'href="?page=2"' in first and 'rel="prev"' not in first
    assert re.search(rf'id="unreviewed">{2 * ESSAYS}<', first)  # the counters count every page
    last = client.get(f"/runs/{run_id}/review?page=3", headers=HTML).text
    assert last.count('<b class="score">') == 2 * ESSAYS - 2 * PAGE_SIZE and 'rel="next"' not in last
    assert client.get(f"/runs/{run_id}/review?page=99", headers=HTML).text.count('class="score"') == len(
        re.findall('class="score"', last)
    )  # past the end: the last page
    for junk in ("x", "\u00b2", "1" * 5000):  # no page number: a 400 naming it, never a 500
        refused = client.get(f"/runs/{run_id}/review?page={junk}", headers=HTML)
        assert refused.status_code == 400 and "page must be a page number" in refused.text
    filtered = client.get(f"/runs/{run_id}/review?trait=Trait+1&page=2", headers=HTML).text
    assert _count(filtered) == (PAGE_SIZE + 1, ESSAYS, ESSAYS)
    assert 'href="?trait=Trait+1&amp;page=1"' in filtered  # the filter survives the link
    assert all(row == "Trait 1" for row in re.findall(r'data-trait="([^"]+)" data-how', filtered))


def test_bulk_approval_covers_every_page_the_filter_shows(served: tuple[TestClient, str]) -> None:
    client, run_id = served
    page = client.get(f"/runs/{run_id}/review?trait=Trait+2&state=open", headers=HTML).text
    button = re.search(r'id="approve-shown">([^<]+)<', page)
    assert button is not None and f"{ESSAYS} undecided scores" in button[1] and "all 2 pages" in button[1]
    form = {"csrf_token": token_in(page), "trait": "Trait 2", "state": "open", "reviewer": "ms k"}
    done = client.post(f"/runs/{run_id}/approve", data=form, follow_redirects=False)
    assert done.headers["location"].endswith(f"approved={ESSAYS}")
    after = client.get(f"/runs/{run_id}/review", headers=HTML).text
    assert re.search(rf'id="unreviewed">{ESSAYS}<', after)


def test_the_results_grid_and_the_gradebook_page(served: tuple[TestClient, str]) -> None:
    client, run_id = served
    grid = client.get(f"/runs/{run_id}/results", headers=HTML).text
    assert _rows(grid, "results-grid") == PAGE_SIZE and _count(grid) == (1, PAGE_SIZE, ESSAYS)
    grid2 = client.get(f"/runs/{run_id}/results?page=2", headers=HTML).text
    assert _rows(grid2, "results-grid") == ESSAYS - PAGE_SIZE and 'rel="prev"' in grid2
    assert f"e{PAGE_SIZE:05d}" in grid2 and "e00000" not in grid2
    book = client.get(f"/runs/{run_id}/gradebook?page=2", headers=HTML).text
    assert _rows(book, "gradebook") == ESSAYS - PAGE_SIZE and _count(book) == (PAGE_SIZE + 1, ESSAYS, ESSAYS)
    assert re.search(rf'id="reviewed-count">\d+</span> of {ESSAYS} students', book)


def test_a_run_read_by_two_threads_at_once_has_one_view(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up preparation and a page's request read the same run at once: one reading, one view, so the
    pages' memos (kept against the view) are built once; two views of one run made the review desk rebuild its
    ranking on the next open (16 s at 10,000 essays, every time after a results page)."""
    import threading

    from madrag.server.runs import library_runs

    config = make_config(tmp_path_factory.mktemp("race"))
    run_id = synthesize_run(config.runs_dir, 20, rubric_of(1), human=False)
    with client_for(config) as client:
        state = client.app.state.madrag  # type: ignore[attr-defined]
        for prepare in [t for t in threading.enumerate() if t.name == "madrag-prepare"]:
            prepare.join(30)  # the start-up preparation of this server has read the run: forget it
        state.runs.views._views.clear()
        reads: list[int] = []
        real = library_runs.view_of

        def slow_view_of(*args: object) -> library_runs.RunView:
            reads.append(1)
            threading.Event().wait(0.3)  # both threads inside the reading at once
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(library_runs, "view_of", slow_view_of)
        monkeypatch.setattr(library_runs, "read_run", lambda run_dir: slow_view_of(run_dir, []))
        seen: list[object] = []
        threads = [threading.Thread(target=lambda: seen.append(state.runs.view(run_id))) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(reads) == 1 and len(seen) == 2 and seen[0] is seen[1]

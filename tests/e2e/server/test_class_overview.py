"""The class overview: a students x criteria heatmap and per-criterion distributions with the teacher's
overrides applied, and each student's weakest criterion."""

from __future__ import annotations

import re
from pathlib import Path

from tests.web_helpers import FAKE, HTML, RUBRIC, client_for, essays_json, make_config, token_in, wait_status

from madrag.teacher.gradebook import Criterion, student_row
from madrag.teacher.grades import grade_of
from madrag.teacher.overview import overview

CRITERIA = [Criterion("Ideas", 0, 3), Criterion("Style", 1, 4)]


def test_heat_distribution_and_weakest() -> None:
    rows = [
        student_row("a", {}, CRITERIA, {"Ideas": grade_of(3), "Style": grade_of(2)}, ""),
        student_row("b", {}, CRITERIA, {"Ideas": grade_of(0), "Style": grade_of(4)}, ""),
        student_row("c", {}, CRITERIA, {"Ideas": grade_of(None), "Style": grade_of(1)}, ""),
        student_row(
            "d", {}, CRITERIA, {"Ideas": grade_of(2), "Style": grade_of(3)}, ""
        ),  # the same place on both scales
    ]
    found = overview(rows, CRITERIA)
    assert found.heat[0] == {"Ideas": 4, "Style": 1} and found.heat[2]["Ideas"] is None
    assert found.distribution["Ideas"] == {0: 1, 1: 0, 2: 1, 3: 1} and found.missing == {"Ideas": 1, "Style": 0}
    assert found.weakest == ["Style", "Ideas", None, None]


def test_the_overview_page_applies_overrides(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        essays = [{"id": e["id"], "text": e["text"]} for e in essays_json(3)]  # no teacher scores: the AI's stand
        body = {"rubric": RUBRIC, "essays": essays, "protocols": ["MAD"], "backend": FAKE}
        run_id = client.post("/api/runs", json=body).json()["id"]
        assert wait_status(client, run_id)["status"] == "finished"
        before = client.get(f"/runs/{run_id}/overview", headers=HTML).text
        row = re.search(r'<tr data-criterion="Style">(.*?)</tr>', before, re.S)
        assert row is not None and '<b>1</b>: <span class="count">0</span>' in row.group(1)
        token = token_in(before)
        fields = {"csrf_token": token, "trait": "Style", "protocol": "MAD", "action": "override", "score": "1"}
        client.post(f"/runs/{run_id}/essays/e2/review", data=fields, headers=HTML)
        after = client.get(f"/runs/{run_id}/overview", headers=HTML).text
        row = re.search(r'<tr data-criterion="Style">(.*?)</tr>', after, re.S)
        assert row is not None and '<b>1</b>: <span class="count">1</span>' in row.group(1)
        e2 = re.search(r'<tr data-essay="e2">(.*?)</tr>', after, re.S)
        assert e2 is not None and '<td class="heat heat-0">1</td>' in e2.group(1)
        assert '<td class="weakest">Style</td>' in e2.group(1)

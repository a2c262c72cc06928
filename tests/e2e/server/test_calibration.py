"""Calibration: madrag scores the teacher's anchor papers first and says per trait, in plain words, how it
agreed ("exactly on 4 of 5, within one point on 5 of 5"), warns when the anchors leave score levels empty, and
works with the teacher's own rubric."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.web_helpers import HTML, RUBRIC, TEXTS, client_for, csrf, essays_csv, form_post, make_config, wait_status

from madrag.data.essay import Essay
from madrag.rubric import Rubric
from madrag.teacher.calibration import agreement, anchors, empty_levels


def test_agreement_in_words_and_empty_levels() -> None:
    rubric = Rubric.model_validate(RUBRIC)
    essays = [Essay(id=f"a{i}", text="t", rater_scores={"Ideas": [float(s)]}) for i, s in enumerate([0, 1, 1, 2, 2])]
    essays.append(Essay(id="plain", text="t"))
    mine = {("a0", "Ideas"): 0, ("a1", "Ideas"): 1, ("a2", "Ideas"): 2, ("a3", "Ideas"): 0, ("a4", "Ideas"): None}
    found = agreement(rubric, anchors(essays), mine)
    assert found[0].sentence() == "Ideas: exactly on 2 of 4, within one point on 3 of 4 (1 without a valid score)"
    assert found[1].sentence().startswith("Style: no anchor paper")
    assert empty_levels(rubric, anchors(essays)) == {"Ideas": [3], "Style": [1, 2, 3, 4]}


def test_calibrating_on_the_teachers_own_rubric_before_the_batch(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)

        def post(path: str, files: object = None, **data: str) -> object:
            return form_post(client, path, token, files, **data)

        draft = post("/new").headers["location"].split("/")[2]  # type: ignore[attr-defined]
        post(
            f"/drafts/{draft}/rubric",
            {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")},
            mode="upload",
        )
        unscored = [{"id": f"u{i}", "text": TEXTS[i % 4]} for i in range(3)]
        data = essays_csv(5, folds=False, extra=unscored).encode()
        post(f"/drafts/{draft}/essays", {"file": ("c.csv", data, "text/csv")}, mode="upload")
        post(f"/drafts/{draft}/exemplars", pool="same")
        assert 'id="calibrate"' in client.get(f"/drafts/{draft}/backend", headers=HTML).text
        sent = post(f"/drafts/{draft}/backend", kind="fake", protocols="MAD", action="calibrate")
        location = sent.headers["location"]  # type: ignore[attr-defined]
        run_id = location.split("/")[2]
        assert location.endswith(f"/calibration?draft={draft}")
        run = wait_status(client, run_id)
        assert run["status"] == "finished" and run["n_essays"] == 5  # the anchors only
        page = client.get(location, headers=HTML).text
        rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        for trait in ("Ideas", "Style"):
            mine = [r for r in rows if r["trait"] == trait]
            exact = sum(r["score"] == r["reference"] for r in mine)
            near = sum(abs(r["score"] - r["reference"]) <= 1 for r in mine)
            assert f"{trait}: exactly on {exact} of 5, within one point on {near} of 5" in page
        warning = re.search(r'id="empty-levels".*?</div>', page, re.S)
        refs = {r["reference"] for r in rows if r["trait"] == "Ideas"}
        missing = [s for s in range(0, 4) if s not in refs]  # Style: the anchors show 1, 2, 3 and 4
        assert (warning is not None) == bool(missing)
        if warning is not None:
            assert f"Ideas: no paper of yours at {', '.join(map(str, missing))}" in warning.group(0)
            assert "Style:" not in warning.group(0)
        assert f'href="/drafts/{draft}/backend"' in page

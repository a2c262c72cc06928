"""What a teacher tried and found wrong, page by page: no model preselected whose grades are not valid; the
review queue's count of scores that need a look agrees with the reasons it lists; calibration names the papers it
disagreed on and says "Looks right" only at or above its stated agreement; "Looks right: score the whole class"
starts the class run; a written rubric's scale is each criterion's own; the essay page shows the teacher the score,
why, the quotes and the form, with the research details behind a disclosure; no page shows "None"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.web_helpers import HTML, RUBRIC, client_for, csrf, essays_csv, form_post, make_config, wait_status

from madrag.data.essay import Essay
from madrag.rubric import Rubric
from madrag.server.pages.backend import CHOOSE_A_MODEL
from madrag.server.runs.progress import Work, work_pace
from madrag.server.runs.time_left import TimeLeft
from madrag.teacher.calibration import EXACT_AT, WITHIN_AT, agreement, anchors, looks_right


def _draft_at_backend(client: Any, token: str, n: int = 6, pool: str = "same", scored: bool = True) -> str:
    draft: str = form_post(client, "/new", token).headers["location"].split("/")[2]
    form_post(
        client,
        f"/drafts/{draft}/rubric",
        token,
        {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")},
        mode="upload",
    )
    data = essays_csv(n, folds=False, scored=scored).encode()
    form_post(client, f"/drafts/{draft}/essays", token, {"file": ("c.csv", data, "text/csv")}, mode="upload")
    form_post(client, f"/drafts/{draft}/exemplars", token, pool=pool)
    return draft


def _radio_checked(page: str, value: str) -> bool:
    return re.search(rf'name="kind" value="{value}" checked', page) is not None


def test_no_model_is_chosen_for_the_teacher_and_the_embedded_one_is_only_to_try(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft_at_backend(client, token)
        page = client.get(f"/drafts/{draft}/backend", headers=HTML).text
        assert not any(_radio_checked(page, kind) for kind in ("llamacpp", "openai", "fake"))
        assert 'id="choose-model"' in page and 'id="presets"' in page
        trying = re.search(r'<fieldset class="try-only".*?</fieldset>', page, re.S)
        assert trying is not None and 'value="llamacpp"' in trying.group(0) and "not real grades" in trying.group(0)
        for action in ("start", "estimate", "calibrate"):
            refused = form_post(client, f"/drafts/{draft}/backend", token, protocols="MADRAG", action=action)
            assert refused.status_code == 400 and CHOOSE_A_MODEL in refused.text
        assert client.get("/api/runs").json() == []  # nothing started
        preset = form_post(client, f"/drafts/{draft}/backend", token, action="preset-ollama").text
        assert _radio_checked(preset, "openai")  # a preset chooses a real model server


def test_the_review_count_is_the_number_of_unreviewed_scores_listing_a_reason(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft_at_backend(client, token, n=8, pool="none", scored=False)
        started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
        run_id = started.headers["location"].split("/")[2]
        assert wait_status(client, run_id, timeout=120)["status"] == "finished"
        form_post(client, f"/runs/{run_id}/approve", token, essay_id="s1")
        page = client.get(f"/runs/{run_id}/review", headers=HTML).text
        rows = re.findall(r'<tr class="(\w+) ?(\w*)" data-essay.*?</tr>', page, re.S)
        listed = re.findall(r'<tr class="(\w+) ?(\w*)" data-essay(.*?)</tr>', page, re.S)
        assert len(rows) == 16 and sum(1 for _, reviewed in rows if reviewed) == 2
        with_reason = [row for row in listed if 'class="reasons"' in row[2]]
        assert all(kind == "flagged" for kind, _, _ in with_reason)  # a reason is listed exactly when flagged
        assert all('class="reasons"' in body for kind, _, body in listed if kind == "flagged")
        count = int(re.search(r'<span id="flagged">(\d+)</span>', page).group(1))  # type: ignore[union-attr]
        assert count == sum(1 for kind, reviewed, _ in listed if kind == "flagged" and not reviewed)


def test_calibration_looks_right_only_at_its_threshold_and_names_the_papers() -> None:
    rubric = Rubric.model_validate(RUBRIC)
    essays = [Essay(id=f"a{i}", text="t", rater_scores={"Ideas": [2.0], "Style": [3.0]}) for i in range(5)]
    one_of_five = {(f"a{i}", "Ideas"): 2 if i == 0 else 3 for i in range(5)} | {(f"a{i}", "Style"): 3 for i in range(5)}
    found = agreement(rubric, anchors(essays), one_of_five)
    assert found[0].exact == 1 and found[0].within_one == 5 and not looks_right(found)  # the tester's 1 of 5
    assert [(d.essay_id, d.teacher, d.madrag) for d in found[0].disagreed] == [(f"a{i}", 2, 3) for i in range(1, 5)]
    exact = round(EXACT_AT * 5)  # just at the threshold: looks right
    at = {(f"a{i}", "Ideas"): 2 if i < exact else 3 for i in range(5)} | {(f"a{i}", "Style"): 3 for i in range(5)}
    assert looks_right(agreement(rubric, anchors(essays), at)) and WITHIN_AT <= 1
    below = {**at, ("a0", "Ideas"): 3}
    assert not looks_right(agreement(rubric, anchors(essays), below))
    unscored = {**at, ("a4", "Style"): None}
    assert not looks_right(agreement(rubric, anchors(essays), unscored))  # every paper must be scored


def test_calibration_page_states_its_threshold_and_starts_the_class(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft_at_backend(client, token, n=6)
        sent = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MA", action="calibrate")
        location = sent.headers["location"]
        calibration_run = location.split("/")[2]
        assert wait_status(client, calibration_run, timeout=120)["status"] == "finished"
        page = client.get(location, headers=HTML).text
        assert 'http-equiv="refresh"' not in page
        assert f"at least {EXACT_AT:.0%}" in page and f"at least {WITHIN_AT:.0%}" in page
        rows = client.get(f"/api/runs/{calibration_run}/scores").json()["rows"]
        wrong = {r["essay_id"] for r in rows if r["score"] != r["reference"]}
        named = set(re.findall(r'<li data-trait="\w+" data-essay="([^"]+)">', page))
        assert named == wrong
        verdict = re.search(r'id="calibration-verdict"><b>([^<]+)</b>', page)
        assert verdict is not None and (verdict.group(1) == "Looks right") == (
            "Looks right: score the whole class" in page
        )
        assert f'action="/drafts/{draft}/start"' in page
        started = form_post(client, f"/drafts/{draft}/start", token)
        assert started.status_code == 303 and started.headers["location"].startswith("/runs/")
        run = wait_status(client, started.headers["location"].split("/")[2], timeout=120)
        assert run["status"] == "finished" and run["n_essays"] == 6 and run["protocols"] == ["MA"]


def test_a_written_rubric_takes_each_criterions_own_scale(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = form_post(client, "/new", token).headers["location"].split("/")[2]
        page = client.get(f"/drafts/{draft}/rubric", headers=HTML).text
        assert not re.search(r'name="trait-\d+-(min|max)" value="\d', page)  # no 0-3 filled in for the teacher
        levels = "\n".join(f"{s}: level {s}" for s in range(1, 7))
        fields = {"mode": "form", "name": "mine", "trait-0-name": "Voice", "trait-0-levels": levels}
        fields |= {"trait-1-name": "Ideas", "trait-1-min": "0", "trait-1-max": "2"}
        fields |= {"trait-1-levels": "0: none\n1: some\n2: many"}
        assert form_post(client, f"/drafts/{draft}/rubric", token, **fields).status_code == 303
        rubric_id = next(r["id"] for r in client.get("/api/rubrics").json() if r["name"] == "mine")
        written = client.get(f"/api/rubrics/{rubric_id}").json()
        traits = {t["name"]: (t["min"], t["max"]) for t in written["rubric"]["traits"]}
        assert traits == {"Voice": (1, 6), "Ideas": (0, 2)}
        bare = form_post(client, f"/drafts/{draft}/rubric", token, mode="form", **{"trait-0-name": "Tone"})
        assert bare.status_code == 400 and "lowest and highest score, or its levels" in bare.text


def test_the_essay_page_shows_the_teacher_the_score_and_keeps_research_in_details(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft_at_backend(client, token, n=4, pool="none")
        started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
        run_id = started.headers["location"].split("/")[2]
        assert wait_status(client, run_id, timeout=120)["status"] == "finished"
        page = client.get(f"/runs/{run_id}/essays/s1", headers=HTML).text
        section = re.search(r'<section class="panel trait" id="trait-Ideas"[^>]*>(.*?)</section>', page, re.S)
        assert section is not None
        teacher, _, research = section.group(1).partition('<details class="research"')
        assert "Score" in teacher and "Why" in teacher and 'name="score"' in teacher
        for word in ("expected", "confidence", "score read", "MAD", "Advocate", "Skeptic"):
            assert word not in re.sub(r"<[^>]+>", " ", teacher), word
        assert "expected" in research and "method MAD" in research and "Advocate" in research


def test_no_page_shows_none(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft_at_backend(client, token, n=5, pool="none")
        pages = [f"/drafts/{draft}/{step}" for step in ("rubric", "essays", "exemplars", "backend")]
        started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
        run_id = started.headers["location"].split("/")[2]
        assert wait_status(client, run_id, timeout=120)["status"] == "finished"
        run = f"/runs/{run_id}"
        pages += ["/", run, f"{run}/results", f"{run}/review", f"{run}/essays/s1", f"{run}/gradebook"]
        pages += [f"{run}/overview", f"{run}/feedback", f"{run}/feedback/s2", f"{run}/calibration"]
        for path in pages:
            text = re.sub(r"<[^>]+>", " ", client.get(path, headers=HTML).text)
            assert not re.search(r"\bNone\b", text), f"{path}: {text[max(0, text.find('None') - 80) :][:160]!r}"


def test_the_pace_is_measured_from_the_calls_so_far() -> None:
    def pace(since: float | None, calls: int, done: int, total: int, left: int | None = None) -> dict[str, Any]:
        return work_pace(since, Work(calls, done, total, left), 1000.0, TimeLeft())

    assert pace(None, 0, 0, 8) == {"elapsed_s": None, "per_call_s": None, "calls_left": None, "eta_s": None}
    since = 1000.0 - 100.0
    slow = pace(since, 4, 0, 8)  # 4 calls in 100 s, no essay finished yet: the pace, no time left yet
    assert 24.0 < slow["per_call_s"] < 26.0 and slow["eta_s"] is None
    going = pace(since, 24, 2, 8)  # 12 calls an essay, 6 essays left: 72 calls; 50 s an essay: 300 s
    assert going["calls_left"] == 72 and 299 < going["eta_s"] < 301
    resumed = pace(since, 24, 2, 8, left=1)  # essays of an earlier session done: one left
    assert resumed["calls_left"] == 12 and 49 < resumed["eta_s"] < 51


def test_the_time_left_holds_steady_when_a_shared_debate_finishes_many_scores_at_once() -> None:
    """MADRAG and MAD share a debate: per trait score the calls come in bursts, per essay they are even, so the
    calls and the time left are counted in essays (an essay told done twice counts once)."""
    from madrag.server.runs.progress import Progress

    prog = Progress("r", essays=6)
    prog.scoring_since = __import__("time").monotonic() - 60.0
    for essay in range(3):  # 12 calls an essay, 20 s an essay: 60 s for 3 essays
        for _ in range(12):
            prog.count_record(f"e{essay}")
        prog.essay_done(f"e{essay}")
        prog.essay_done(f"e{essay}")  # told twice (two protocols' scores): counted once
    final = prog.snapshot()
    assert final["calls_left"] == 36 and 59 < final["eta_s"] < 61  # 3 essays of 12 calls and 20 s left
    assert prog.records == 36 and prog.essays_done == {"e0", "e1", "e2"}


def test_a_resumed_run_paces_on_the_essays_that_made_calls_in_this_session() -> None:
    """On a resume the essays whose calls were all stored finish at once, without a call: they are done (fewer
    left), but not in the pace, which would otherwise read as 0 calls and no time per essay."""
    from madrag.server.runs.progress import Progress

    prog = Progress("r", essays=6)
    prog.scoring_since = __import__("time").monotonic() - 40.0
    for essay in range(2):  # stored in an earlier session: replayed, no call
        prog.essay_done(f"old{essay}")
    for essay in range(2):  # 12 calls and 20 s an essay in this session
        for _ in range(12):
            prog.count_record(f"e{essay}")
        prog.essay_done(f"e{essay}")
    final = prog.snapshot()
    assert final["calls_left"] == 24 and 39 < final["eta_s"] < 41  # 2 essays left, 12 calls and 20 s each


def test_a_balanced_debate_is_a_note_not_a_reason_to_look() -> None:
    from madrag.teacher.review_queue import ItemSignals, assess

    balanced = assess(ItemSignals("e1", "Ideas", 2, 0, 3, advocate_confidence=0.8, skeptic_confidence=0.8))
    assert balanced.reasons == [] and not balanced.flagged and balanced.doubt is not None and balanced.doubt > 0.9
    assert balanced.notes == ["the Advocate and the Skeptic were equally sure (alone, no reason to look)"]
    quotes = assess(ItemSignals("e1", "Ideas", 2, 0, 3, unverified_quotes=1))
    assert quotes.flagged and quotes.reasons == ["1 quote not found in the essay"]


def test_a_slow_run_shows_the_time_left_from_its_calls_so_far(tmp_path: Path) -> None:
    import time

    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = _draft_at_backend(client, token, n=6, pool="none")
        slow = {"kind": "fake", "fake_latency_s": "0.3", "protocols": "MAD", "action": "start"}
        started = form_post(client, f"/drafts/{draft}/backend", token, **slow)
        run_id = started.headers["location"].split("/")[2]
        deadline = time.monotonic() + 60
        progress: dict[str, Any] = {}
        while time.monotonic() < deadline:
            body = client.get(f"/api/runs/{run_id}").json()
            progress = body.get("progress") or {}
            # the time left is measured once an essay is finished (a trait score alone is not a whole essay)
            running = body["status"] == "running" and progress.get("done", 0) < (progress.get("total") or 0)
            if running and progress.get("eta_s") is not None:
                break
            time.sleep(0.05)
        page = client.get(f"/runs/{run_id}", headers=HTML).text
        assert progress["per_call_s"] > 0.0 and progress["calls_left"] > 0 and progress["eta_s"] > 0.0
        assert re.search(r'Time left: <b id="run-eta">about \d+ (s|min)</b>', page), page
        assert "s per call so far" in page
        client.post(f"/api/runs/{run_id}/cancel")

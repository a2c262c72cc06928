"""Student feedback: per criterion what works (Advocate), what next (Skeptic) and why (Judge), addressed to the
student, with only verified quotes highlighted in the essay; teacher edits kept; one printable page per
student; the CSV export."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from tests.web_helpers import FAKE, HTML, RUBRIC, client_for, essays_json, make_config, token_in, wait_status

from madrag.teacher.feedback import draft, highlight, to_student

ESSAY = "I waited for the bus in the rain. My sister held the umbrella over both of us. Then it came."


def test_feedback_speaks_to_the_student_and_keeps_only_verified_quotes() -> None:
    advocate = 'The writer gives a vivid detail: "My sister held the umbrella over both of us". Confidence: 0.8'
    skeptic = 'The essay ends abruptly. The student claims "we waited for three long days" which is not shown.'
    item = draft("Ideas", advocate, skeptic, "Weighing both.\nFinal score: 2", ESSAY)
    assert item.works.startswith("You give a vivid detail") and "Confidence" not in item.works
    assert item.next == 'Your essay ends abruptly. You claim "we waited for three long days" which is not shown.'
    assert item.why == "Weighing both."
    assert item.quotes == ["My sister held the umbrella over both of us"]  # the invented quote is left out
    marked = [text for text, on in highlight(ESSAY, item.quotes) if on]
    assert marked == ["My sister held the umbrella over both of us. "]
    assert to_student("The author is clear and the essay's ending is weak.") == "You are clear and your ending is weak."


def test_feedback_pages_edits_print_and_export(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        unscored = [{"id": e["id"], "text": e["text"]} for e in essays_json(3)]  # every grade madrag's
        body = {"rubric": RUBRIC, "essays": unscored, "protocols": ["MAD"], "backend": FAKE}
        run_id = client.post("/api/runs", json=body).json()["id"]
        assert wait_status(client, run_id)["status"] == "finished"
        page = client.get(f"/runs/{run_id}/feedback/e2", headers=HTML).text
        assert "What works:" in page and "Your essay stays on topic" in page  # the fake Advocate, addressed
        token = token_in(page)
        fields = {"csrf_token": token, "trait": "Style", "works": "Great dialogue!", "next": "Add an ending."}
        saved = client.post(f"/runs/{run_id}/feedback/e2", data=fields, headers=HTML, follow_redirects=False)
        assert saved.status_code == 303
        again = client.get(f"/runs/{run_id}/feedback/e2", headers=HTML).text
        style = re.search(r'<section class="feedback-trait" id="fb-Style">(.*?)</section>', again, re.S)
        assert style is not None and "Great dialogue!" in style.group(1) and "(your wording)" in style.group(1)
        printed = client.get(f"/runs/{run_id}/feedback", headers=HTML).text
        assert printed.count('<article class="student-page"') == 3 and "Add an ending." in printed
        rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/feedback.csv").text)))
        assert len(rows) == 6 and {r["criterion"] for r in rows} == {"Ideas", "Style"}
        mine = next(r for r in rows if r["essay_id"] == "e2" and r["criterion"] == "Style")
        assert (mine["what_works"], mine["work_on_next"], mine["edited_by_teacher"]) == (
            "Great dialogue!",
            "Add an ending.",
            "yes",
        )
        assert all(r["edited_by_teacher"] == "no" for r in rows if r is not mine) and mine["score"] != ""

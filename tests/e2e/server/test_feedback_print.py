"""Printed feedback: each student starts a sheet (the print style breaks before every student but the first and
keeps a criterion whole), and a criterion the teacher changed prints her comment, not only "Your teacher's
score." (the browser test prints 25 students to PDF and counts 25 sheets)."""

from __future__ import annotations

import re
from pathlib import Path

from lxml import html as lxml_html
from tests.web_helpers import FAKE, HTML, RUBRIC, client_for, essays_json, make_config, wait_status

CSS = Path(__file__).resolve().parents[3] / "src" / "madrag" / "server" / "static" / "app.css"


def test_a_changed_criterion_prints_her_comment(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        unscored = [{"id": e["id"], "text": e["text"]} for e in essays_json(3)]
        body = {"rubric": RUBRIC, "essays": unscored, "protocols": ["MAD"], "backend": FAKE}
        run_id = client.post("/api/runs", json=body).json()["id"]
        assert wait_status(client, run_id)["status"] == "finished"
        change = {"essay_id": "e2", "trait": "Style", "score": 1, "comment": "The ending is missing.", "reviewer": "R"}
        assert client.post(f"/api/runs/{run_id}/overrides", json=change).status_code == 201
        tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/feedback", headers=HTML).text)
        style = tree.xpath("//article[@id='page-2']//section[@id='fb-Style']")[0]
        assert "Style: 1 of 4" in style.xpath(".//h3")[0].text_content()
        assert style.xpath(".//span[@class='teacher-comment']")[0].text_content() == (
            "Your teacher's comment: The ending is missing."
        )
        assert not style.xpath(".//*[contains(@class, 'no-print')]")  # nothing for the teacher only on the sheet
        other = tree.xpath("//article[@id='page-1']//section[@id='fb-Style']")[0]
        assert not other.xpath(".//p[@class='teacher-grade']")  # madrag's grade: no teacher line


def test_the_print_style_starts_each_student_on_a_sheet() -> None:
    printed = CSS.read_text(encoding="utf-8").split("@media print", 1)[1]
    assert re.search(r"\.student-page \{[^}]*break-before: page", printed)
    assert re.search(r"\.student-page:first-of-type \{[^}]*break-before: auto", printed)
    assert re.search(r"\.feedback-trait \{[^}]*break-inside: avoid", printed)

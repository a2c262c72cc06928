"""Plain words on the teacher's pages: the protocols as "Recommended (debate + examples)" and "Quick (one judge
per trait)", the research ones in an "advanced" fold; no research words ("folds", "QWK",
"constrained_distribution", "madrag paper") on any teacher page (they stay on the evaluation page and the report)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.web_helpers import HTML, RUBRIC, client_for, csrf, essays_csv, form_post, make_config, wait_status

RESEARCH_WORDS = ("folds", "qwk", "constrained_distribution", "madrag paper", "b.5")


def _visible(html: str) -> str:
    """The page's text as a reader sees it (tags, and the values of hidden form fields, left out)."""
    return re.sub(r"<[^>]+>", " ", html).lower()


def test_teacher_pages_use_plain_words(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)

        def post(path: str, files: object = None, **data: str) -> object:
            return form_post(client, path, token, files, **data)

        draft = post("/new").headers["location"].split("/")[2]  # type: ignore[attr-defined]
        pages = [f"/drafts/{draft}/rubric"]
        post(
            f"/drafts/{draft}/rubric",
            {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")},
            mode="upload",
        )
        post(f"/drafts/{draft}/essays", {"file": ("c.csv", essays_csv(4).encode(), "text/csv")}, mode="upload")
        pages += [f"/drafts/{draft}/essays", f"/drafts/{draft}/exemplars"]
        post(f"/drafts/{draft}/exemplars", pool="none")
        backend = client.get(f"/drafts/{draft}/backend", headers=HTML).text
        assert "Recommended (debate + examples)" in backend and "Quick (one judge per trait)" in backend
        assert re.search(r"<details[^>]*id=\"advanced-protocols\"[^>]*>\s*<summary>[^<]*advanced", backend)
        # no example essays: the debate without examples is chosen, a teacher's option, and the research fold shut
        assert re.search(r'value="MAD" checked[^>]*> Debate without examples', backend)
        assert not re.search(r'<details[^>]*id="advanced-protocols"[^>]*open', backend)
        pages.append(f"/drafts/{draft}/backend")
        started = post(f"/drafts/{draft}/backend", kind="fake", protocols="MAD", action="start")
        run_id = started.headers["location"].split("/")[2]  # type: ignore[attr-defined]
        assert wait_status(client, run_id, timeout=120)["status"] == "finished"
        pages += ["/", f"/runs/{run_id}", f"/runs/{run_id}/results", f"/runs/{run_id}/essays/s1"]
        pages += [f"/runs/{run_id}/review", f"/runs/{run_id}/gradebook", f"/runs/{run_id}/overview"]
        pages += [f"/runs/{run_id}/feedback", f"/runs/{run_id}/feedback/s1", f"/runs/{run_id}/calibration"]
        for path in pages:
            text = _visible(client.get(path, headers=HTML).text)
            found = [w for w in RESEARCH_WORDS if w in text]
            assert found == [], f"{path}: {found}"
        assert "qwk" in client.get(f"/runs/{run_id}/evaluation", headers=HTML).text.lower()  # research page keeps it

"""A model-based test of the review desk's routes (in process): seeded random sequences of what a teacher's hands
send (a level's button, Enter in a comment, "use madrag's score" with and without its confirmation, a form naming
no level, a bulk approval under a random filter, a filter shown), each checked against a model of what the action
means; after every step every grade, the review in force and the comment equal the model's, in the scores export
and on the desk. (The browser's keys, Tab and n / p: tests/e2e/browser/test_desk_property.py.)"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from lxml import html as lxml_html
from tests.e2e.server.test_review_desk import grades
from tests.synthetic_runs import rubric_of, synthesize_run
from tests.web_helpers import FAKE, HTML, RUBRIC, TEXTS, client_for, form_post, make_config, token_in, wait_status

SEEDS = (3, 17, 2024)
STEPS = 25


@dataclass(frozen=True)
class Cell:
    """What the model holds of one essay-trait: the AI's score, the class file's, the decision and the comment."""

    ai: int
    upload: int | None
    decision: str | None = None  # override, accept, bulk-accept
    override: int | None = None
    commented: bool = False
    comment: str = ""

    @property
    def grade(self) -> int:
        if self.decision == "override" and self.override is not None:
            return self.override
        return self.upload if self.upload is not None else self.ai

    @property
    def open(self) -> bool:
        return self.decision is None and self.upload is None

    def seen(self) -> tuple[int, str | None, str | None]:
        """As the scores export shows it: (grade, review in force, comment)."""
        return self.grade, self.decision or ("comment" if self.commented else None), self.comment or None


Levels = dict[str, tuple[int, int]]


def fake_run(client: TestClient, data_dir: Path) -> tuple[str, str, Levels, dict[tuple[str, str], int]]:
    """A run on the fake backend (nothing flagged), one paper scored in the class file: (id, protocol, each
    trait's scale, the class file's scores)."""
    essays: list[dict[str, object]] = [{"id": f"e{i + 1}", "text": TEXTS[i % len(TEXTS)]} for i in range(5)]
    essays[0] |= {"Ideas": 2, "Style": 3}  # one paper the teacher scored in her class file
    body = {"rubric": RUBRIC, "essays": essays, "protocols": ["MAD"], "backend": FAKE}
    run_id: str = client.post("/api/runs", json=body).json()["id"]
    assert wait_status(client, run_id)["status"] == "finished"
    levels = {t["name"]: (t["min"], t["max"]) for t in RUBRIC["traits"]}
    return run_id, "MAD", levels, {("e1", "Ideas"): 2, ("e1", "Style"): 3}


def synthetic_run(client: TestClient, data_dir: Path) -> tuple[str, str, Levels, dict[tuple[str, str], int]]:
    """A MADRAG run written directly (the Judge torn on some scores, sure of others: flagged and agreeing rows),
    nobody's scores in it."""
    rubric = rubric_of(2, 1, 3)
    run_id = synthesize_run(data_dir / "runs", 5, rubric, seed=7, human=False)
    return run_id, "MADRAG", {t.name: (t.min, t.max) for t in rubric.traits}, {}


def _desk(client: TestClient, run_id: str, query: str = "") -> tuple[str, dict[tuple[str, str], tuple[int, bool]]]:
    """The desk's CSRF token and, per row shown, (its score, flagged)."""
    page = client.get(f"/runs/{run_id}/review{query}", headers=HTML).text
    rows = lxml_html.fromstring(page).xpath("//tr[@data-essay]")
    shown = {
        (r.get("data-essay"), r.get("data-trait")): (
            int(r.xpath(".//b[@class='score']")[0].text_content()),
            "flagged" in r.get("class", "").split(),
        )
        for r in rows
    }
    return token_in(page), shown


FILTERS = ("", "trait=@0", "trait=@1", "state=open", "state=decided", "flag=flagged", "flag=agreeing", "essay=@e")


def _shows(query: str, key: tuple[str, str], cell: Cell, flagged: bool) -> bool:
    name, _, value = query.partition("=")
    return {
        "": True,
        "trait": key[1] == value,
        "state": cell.open == (value == "open"),
        "flag": flagged == (value == "flagged"),
        "essay": key[0] == value,
    }[name]


@dataclass(frozen=True)
class Desk:
    client: TestClient
    run_id: str
    protocol: str
    levels: Levels
    flags: dict[tuple[str, str], bool]


def _step(desk: Desk, token: str, rng: random.Random, model: dict[tuple[str, str], Cell]) -> str:
    """One random action, sent as the page would send it; the model updated with what it means."""
    client, run_id, flags = desk.client, desk.run_id, desk.flags
    key = rng.choice(sorted(model))
    cell = model[key]
    path = f"/runs/{run_id}/essays/{key[0]}/review"
    fields = {"trait": key[1], "protocol": desk.protocol, "back": "review?"}
    kind = rng.choice(["level", "enter", "accept", "confirm", "bare", "bulk", "filter"])
    if kind == "level":  # a level's own button: the form's comment field goes with it
        level = rng.randint(*desk.levels[key[1]])
        form_post(client, path, token, score=str(level), comment=cell.comment, **fields)
        model[key] = replace(cell, decision="override", override=level, commented=True)
    elif kind == "enter":  # Enter in the comment: the default button, action=comment
        text = rng.choice(["", "thesis?", "re-read the ending", cell.comment])
        form_post(client, path, token, action="comment", comment=text, **fields)
        if text != cell.comment:
            model[key] = replace(cell, commented=True, comment=text)
    elif kind in ("accept", "confirm"):  # "use madrag's score"; over her own score only once confirmed
        extra = {"confirm": "yes"} if kind == "confirm" else {}
        form_post(client, path, token, action="accept", comment=cell.comment, **fields, **extra)
        if kind == "confirm" or cell.decision != "override":
            model[key] = replace(cell, decision="accept", override=None, commented=True)
    elif kind == "bare":  # a form that names no level and no action (its comment unchanged): nothing
        form_post(client, path, token, comment=cell.comment, **fields)
    elif kind == "bulk":
        query = _filters(desk, rng)
        fields = dict([query.split("=")]) if query else {}
        form_post(client, f"/runs/{run_id}/approve", token, **fields)
        chosen = query or "flag=agreeing"  # no filter: every score nothing casts doubt on
        for k, c in model.items():
            if c.open and _shows(chosen, k, c, flags[k]):
                model[k] = replace(c, decision="bulk-accept")
    else:
        query = _filters(desk, rng)
        _, shown = _desk(client, run_id, "?" + query)
        assert set(shown) == {k for k, c in model.items() if _shows(query, k, c, flags[k])}, query
    return f"{kind} {key}"


def _filters(desk: Desk, rng: random.Random) -> str:
    """A random filter of the desk, with this run's traits and essays."""
    traits, essays = sorted(desk.levels), sorted({k[0] for k in desk.flags})
    query = rng.choice(FILTERS)
    return query.replace("@0", traits[0]).replace("@1", traits[1]).replace("@e", rng.choice(essays))


@pytest.mark.parametrize(
    ("source", "seed"), [(fake_run, SEEDS[0]), (synthetic_run, SEEDS[1]), (synthetic_run, SEEDS[2])]
)
def test_random_desk_actions_leave_every_grade_as_the_model_says(tmp_path: Path, source: Any, seed: int) -> None:
    rng = random.Random(seed)
    config = make_config(tmp_path)
    with client_for(config) as client:
        run_id, protocol, levels, uploads = source(client, config.data_dir)
        token, shown = _desk(client, run_id)
        desk = Desk(client, run_id, protocol, levels, {k: flagged for k, (_, flagged) in shown.items()})
        ai = {(r["essay_id"], r["trait"]): r["score"] for r in client.get(f"/api/runs/{run_id}/scores").json()["rows"]}
        model = {k: Cell(ai=ai[k], upload=uploads.get(k)) for k in grades(client, run_id)}
        assert all(v is not None for v in ai.values())
        history = []
        for _ in range(STEPS):
            history.append(_step(desk, token, rng, model))
            assert grades(client, run_id) == {k: c.seen() for k, c in model.items()}, history
            _, on_desk = _desk(client, run_id)
            assert {k: score for k, (score, _) in on_desk.items()} == {k: c.grade for k, c in model.items()}, history

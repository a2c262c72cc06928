"""One grade on every page: a class file with the teacher's own scores on 5 papers and 2 overrides with comments
(one of them on a paper she had scored), then the approvals a teacher makes, and the grade of every paper and
criterion read off every surface (the review desk, the essay pages, the results grid, the gradebook file, the
scores export, the JSON API, the feedback file) and compared with each other: one value everywhere, the teacher's
where she decided it. Approving in bulk never touches a grade she decided; feedback never argues for an AI score
she replaced."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lxml import html as lxml_html
from tests.e2e.server.test_gradebook import TEACHER, _run_from_class_file, class_with_teacher_scores
from tests.web_helpers import HTML, client_for, csrf, form_post, make_config

TRAITS = ("Ideas", "Style")
Cell = tuple[str, str]  # (essay id, trait)


def _number(text: str) -> int | None:
    found = re.match(r"\s*(-?\d+)", text)
    return int(found.group(1)) if found else None


def review_desk(client: Any, run_id: str) -> dict[Cell, int | None]:
    tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/review", headers=HTML).text)
    rows = tree.xpath("//table[@id='review-queue']//tr[@data-essay]")
    return {
        (r.get("data-essay"), r.get("data-trait")): _number(r.xpath(".//b[@class='score']")[0].text_content())
        for r in rows
    }


def essay_pages(client: Any, run_id: str, essays: list[str]) -> dict[Cell, int | None]:
    out: dict[Cell, int | None] = {}
    for essay in essays:
        tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/essays/{quote(essay, safe='')}", headers=HTML).text)
        for trait in TRAITS:
            shown = tree.xpath(f"//section[@id='trait-{trait}']//b[contains(@class, 'score')]")[0].text_content()
            out[(essay, trait)] = _number(shown)
    return out


def results_grid(client: Any, run_id: str) -> dict[Cell, int | None]:
    tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/results", headers=HTML).text)
    out: dict[Cell, int | None] = {}
    for row in tree.xpath("//table[@id='results-grid']/tbody/tr"):
        essay = row.xpath("./th/a/@href")[0].rsplit("/essays/", 1)[1].replace("%40", "@")
        cells = row.xpath("./td")
        for trait, cell in zip(TRAITS, cells, strict=True):  # one protocol: one cell per trait
            out[(essay, trait)] = _number(cell.text or "")
    return out


def gradebook_file(client: Any, run_id: str) -> dict[Cell, int | None]:
    rows = csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv").text))
    return {(r["essay_id"], t): _number(r[t]) for r in rows for t in TRAITS}


def scores_export(client: Any, run_id: str, column: str) -> dict[Cell, int | None]:
    rows = csv.DictReader(io.StringIO(client.get(f"/api/runs/{run_id}/export?format=csv").text))
    return {(r["essay_id"], r["trait"]): _number(r[column]) for r in rows}


def json_api(client: Any, run_id: str) -> dict[Cell, int | None]:
    rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
    return {(r["essay_id"], r["trait"]): r["grade"] for r in rows}


def essay_api(client: Any, run_id: str, essays: list[str]) -> dict[Cell, int | None]:
    out: dict[Cell, int | None] = {}
    for essay in essays:
        for trait in client.get(f"/api/runs/{run_id}/essays/{quote(essay, safe='')}").json()["traits"]:
            out[(essay, trait["trait"])] = trait["protocols"][0]["grade"]
    return out


def feedback_file(client: Any, run_id: str) -> dict[Cell, int | None]:
    rows = csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/feedback.csv").text))
    return {(r["essay_id"], r["criterion"]): _number(r["score"]) for r in rows}


def test_the_teachers_grade_is_the_one_score_on_every_surface_and_bulk_approval_leaves_it(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client, "/")
        run_id = _run_from_class_file(client, token, class_with_teacher_scores(8))
        essays = [e["essay_id"] for e in client.get(f"/api/runs/{run_id}/scores").json()["rows"]]
        essays = sorted(set(essays))
        ai = {(r["essay_id"], r["trait"]): r["score"] for r in client.get(f"/api/runs/{run_id}/scores").json()["rows"]}
        # two overrides with comments: a paper madrag graded, and one the teacher had scored in her file
        kid6 = ("kid6@school.org", "Style")
        new6 = 1 if ai[kid6] != 1 else 4
        kid0 = ("kid0@school.org", "Ideas")
        for (essay, trait), score, note in ((kid6, new6, "the ending is missing"), (kid0, 3, "re-read: strong")):
            sent = form_post(
                client,
                f"/runs/{run_id}/essays/{essay}/review",
                token,
                action="override",
                trait=trait,
                protocol="MAD",
                score=str(score),
                comment=note,
                reviewer="Ms. Rivera",
            )
            assert sent.status_code == 303
        decided = {(f"kid{i}@school.org", t) for i in TEACHER for t in TRAITS} | {kid6, kid0}
        # the desk's bulk approvals: what nothing casts doubt on, then every undecided score shown
        form_post(client, f"/runs/{run_id}/approve", token, reviewer="Ms. Rivera")
        form_post(client, f"/runs/{run_id}/approve", token, state="open", reviewer="Ms. Rivera")
        reviews = client.get(f"/api/runs/{run_id}/overrides").json()
        accepted = {(r["essay_id"], r["trait"]) for r in reviews if r["action"] == "bulk-accept"}
        assert accepted and not accepted & decided  # no approval recorded under a grade the teacher decided
        assert accepted == {cell for cell in ai if cell not in decided}
        assert not [r for r in reviews if r["action"] == "accept"]  # bulk approvals are never recorded as hers

        expected = dict(ai)
        for i, (ideas, style) in TEACHER.items():
            expected[(f"kid{i}@school.org", "Ideas")], expected[(f"kid{i}@school.org", "Style")] = ideas, style
        expected[kid6], expected[kid0] = new6, 3
        surfaces = {
            "review desk": review_desk(client, run_id),
            "essay pages": essay_pages(client, run_id, essays),
            "results grid": results_grid(client, run_id),
            "gradebook file": gradebook_file(client, run_id),
            "scores export grade": scores_export(client, run_id, "grade"),
            "scores export final_score": scores_export(client, run_id, "final_score"),
            "JSON API scores": json_api(client, run_id),
            "JSON API essay": essay_api(client, run_id, essays),
            "feedback file": feedback_file(client, run_id),
        }
        first_name, first = next(iter(surfaces.items()))
        assert first == expected, first_name
        for name, found in surfaces.items():
            assert found == first, f"{name} disagrees with the {first_name}"

        # the desk says who decided and what madrag suggested, beside the teacher's own score
        page = client.get(f"/runs/{run_id}/essays/kid0@school.org", headers=HTML).text
        ideas = lxml_html.fromstring(page).xpath("//section[@id='trait-Ideas']")[0].text_content()
        assert f"madrag suggested {ai[kid0]}" in ideas and "“re-read: strong”" in ideas
        assert "accepted by" not in page  # no paper the teacher scored shows an acceptance


def test_feedback_drops_the_ai_text_written_for_a_score_the_teacher_replaced(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client, "/")
        run_id = _run_from_class_file(client, token, class_with_teacher_scores(8))
        rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        ai = next(r["score"] for r in rows if r["essay_id"] == "kid5@school.org" and r["trait"] == "Style")
        before = client.get("/runs/" + run_id + "/feedback/kid5@school.org", headers=HTML).text
        drafted = (
            lxml_html.fromstring(before).xpath("//section[@id='fb-Style']//span[@class='works']")[0].text_content()
        )
        assert drafted not in ("", "—")  # madrag's own feedback for its own score
        changed = 1 if ai != 1 else 4
        form_post(
            client,
            f"/runs/{run_id}/essays/kid5@school.org/review",
            token,
            action="override",
            trait="Style",
            protocol="MAD",
            score=str(changed),
            comment="Tell it in order.",
        )
        after = client.get("/runs/" + run_id + "/feedback/kid5@school.org", headers=HTML).text
        style = lxml_html.fromstring(after).xpath("//section[@id='fb-Style']")[0].text_content()
        assert f"Style: {changed} of 4" in style and "Tell it in order." in style
        assert drafted not in style and f"written for its score of {ai}" in style
        exported = csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/feedback.csv").text))
        mine = next(r for r in exported if r["essay_id"] == "kid5@school.org" and r["criterion"] == "Style")
        assert (mine["score"], mine["what_works"], mine["work_on_next"]) == (str(changed), "", "")
        # the teacher's own wording is kept under her score
        form_post(
            client,
            f"/runs/{run_id}/feedback/kid5@school.org",
            token,
            trait="Style",
            works="Clear voice.",
            next="Order.",
        )
        kept = client.get("/runs/" + run_id + "/feedback/kid5@school.org", headers=HTML).text
        assert "Clear voice." in lxml_html.fromstring(kept).xpath("//section[@id='fb-Style']")[0].text_content()


def test_the_desk_shows_how_madrag_agrees_with_the_teachers_decisions_so_far(tmp_path: Path) -> None:
    from madrag.teacher.calibration import pair_agreement

    higher = pair_agreement("Conventions", [(f"p{i}", 1, 2) for i in range(6)] + [("p6", 2, 2), ("p7", 3, 3)])
    assert (higher.n, higher.exact, higher.within_one, higher.mean_difference) == (8, 2, 8, 0.75)
    assert higher.drift() == "madrag scores Conventions 1 point higher than you on 6 of 8 papers"
    assert pair_agreement("Ideas", [("a", 2, 2), ("b", 1, 2)]).drift() == ""  # too few papers to say
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client, "/")
        run_id = _run_from_class_file(client, token, class_with_teacher_scores(8))
        rows = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        pairs = {}
        for i, (ideas, style) in TEACHER.items():
            ai = {r["trait"]: r["score"] for r in rows if r["essay_id"] == f"kid{i}@school.org"}
            pairs.setdefault("Ideas", []).append((f"kid{i}", ideas, ai["Ideas"]))
            pairs.setdefault("Style", []).append((f"kid{i}", style, ai["Style"]))
        tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/review", headers=HTML).text)
        for trait in TRAITS:
            expected = pair_agreement(trait, pairs[trait])
            cells = [c.text_content() for c in tree.xpath(f"//section[@id='agreement']//tr[@data-trait='{trait}']/td")]
            assert cells[:3] == [
                str(expected.n),
                f"{expected.exact} of {expected.n}",
                f"{expected.within_one} of {expected.n}",
            ]
        ai6 = next(r["score"] for r in rows if r["essay_id"] == "kid6@school.org" and r["trait"] == "Ideas")
        form_post(
            client,
            f"/runs/{run_id}/essays/kid6@school.org/review",
            token,
            action="accept",
            trait="Ideas",
            protocol="MAD",
        )
        tree = lxml_html.fromstring(client.get(f"/runs/{run_id}/review", headers=HTML).text)
        ideas = [c.text_content() for c in tree.xpath("//section[@id='agreement']//tr[@data-trait='Ideas']/td")]
        assert ideas[0] == "6" and ai6 is not None  # an acceptance is a decision too: updated with it

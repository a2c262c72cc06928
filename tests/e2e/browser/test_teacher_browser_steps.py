"""Issue steps 1, 4, 6, 7, 8 and 9 of the teacher's workflow in real Chromium (Debian's package, driven by
Playwright), on the fake backend (or the local stub server) and a few essays: the "Not real grades" banner and
the backend presets; the student feedback page (verified quotes highlighted, an edit saved, one printed page per
student); the class overview with an override applied; plain words; forms that keep input, a fifth trait, a
shipped rubric's preview, renaming and archiving a run; the estimate's one-time set-up apart from the time per
essay. One screenshot per step, ``t10-...`` onward, into ``$MADRAG_SCREENSHOTS``
(``MADRAG_SCREENSHOTS=docs/screenshots`` refreshes the docs' pictures)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from tests.e2e.browser.test_server_browser import (  # noqa: F401 (fixtures, skip mark)
    Server,
    page,
    pytestmark,
    server,
    small_shot,
    to_backend,
)
from tests.web_helpers import FAKE, RUBRIC, TEXTS, essays_csv, essays_json

from madrag.teacher.presets import PRESETS

RESEARCH_WORDS = ("folds", "qwk", "constrained_distribution", "madrag paper")
QUOTE = "kept calm because my sister was with me"  # in TEXTS[0]
INVENTED = "I rode a dragon to school"  # in no essay


def _api_run(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
    n: int,
    backend: dict[str, Any] | None = None,
    essays: list[dict[str, Any]] | None = None,
) -> str:
    """A run of ``n`` essays (or ``essays``) made through the API, finished, its page open."""
    body = {"rubric": RUBRIC, "essays": essays or essays_json(n), "protocols": ["MAD"], "backend": backend or FAKE}
    run_id: str = server.api("POST", "/api/runs", json=body)["id"]
    page.goto(f"{server.url}/runs/{run_id}")
    page.wait_for_selector("#review-link", timeout=60_000)  # the run page reloads itself when done
    return run_id


def _to_backend(server: Server, page: Any, tmp_path: Path, n: int, pool: str = "none") -> None:  # noqa: F811
    """Through the first steps to the backend page: the test rubric uploaded, ``n`` essays with scores and
    folds, the exemplar ``pool`` chosen."""
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(RUBRIC), encoding="utf-8")
    data = tmp_path / "class.csv"
    data.write_text(essays_csv(n), encoding="utf-8")
    to_backend(page, server.url, rubric, data, pool)


def test_step1_a_fake_run_says_not_real_grades_and_presets_fill_the_server(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    run_id = _api_run(server, page, 2)
    for path in ("", "/results", "/essays/e1", "/review", "/gradebook", "/overview", "/feedback/e1"):
        page.goto(f"{server.url}/runs/{run_id}{path}")
        banner = page.locator("#not-valid-banner")
        assert banner.is_visible(), path
        assert "Not real grades" in banner.inner_text() and "Scored by the fake backend" in banner.inner_text(), path
    page.goto(f"{server.url}/runs/{run_id}/results")
    with page.expect_download() as download:
        page.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    assert len(rows) == 4 and {(r["scored_by"], r["valid_scores"]) for r in rows} == {
        ("fake backend (canned answers)", "False")
    }
    _to_backend(server, page, tmp_path, 2)
    assert page.locator("#presets").is_visible()  # no model is chosen for the teacher: the page asks for a server
    page.check("input[name=kind][value=openai]")
    page.click("#preset-ollama")
    ollama = PRESETS["ollama"]
    assert page.input_value("input[name=base_url]") == ollama.base_url
    assert page.input_value("input[name=model]") == ollama.model
    assert page.is_checked("input[name=kind][value=openai]")
    assert "ollama serve" in page.inner_text("#preset-hint")
    small_shot(page, "t10-backend-preset", height=640)
    page.click("#preset-vllm")
    assert page.input_value("input[name=base_url]") == PRESETS["vllm"].base_url
    assert page.dialogs == []


def test_step4_student_feedback_highlights_verified_quotes_keeps_edits_and_prints_a_page_each(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    from madrag.testing.stub_answers import MODEL
    from madrag.testing.stub_server import StubServer

    assert QUOTE in TEXTS[0] and all(INVENTED not in t for t in TEXTS)
    prefix = f'The essay says "{QUOTE}" and "{INVENTED}". '
    with StubServer(capacity=8, latency_s=0.0, answer_prefix=prefix) as stub:
        backend = {"kind": "openai", "base_url": stub.base_url, "model": MODEL}
        essays = [{"id": e["id"], "text": e["text"]} for e in essays_json(2)]  # nobody scored them: madrag's grades
        essays[0]["text"] = f"{TEXTS[0]} {TEXTS[2]}"  # two sentences: the quoted one and another
        run_id = _api_run(server, page, 2, backend, essays)
    page.goto(f"{server.url}/runs/{run_id}/feedback/e1")
    style = page.locator("[id='fb-Style']")
    assert style.locator(".works").inner_text().startswith("Your essay says")  # addressed to the student
    assert style.locator(".next").inner_text() not in ("", "—")
    marks = page.locator("p.essay.highlighted mark")
    assert [m.strip() for m in marks.all_inner_texts()] == [TEXTS[0]]  # the verified quote's sentence, and only it
    assert TEXTS[2] in page.inner_text("p.essay.highlighted")
    assert "dragon" not in " ".join(marks.all_inner_texts())  # the invented one is not highlighted
    style.locator("textarea[name=works]").fill("Your calm sister makes the wait real.")
    style.locator("button").click()
    style = page.locator("[id='fb-Style']")
    assert style.locator(".works").inner_text() == "Your calm sister makes the wait real."
    assert "saved" in style.locator(".saved").inner_text() and "(your wording)" in style.inner_text()
    small_shot(page, "t11-student-feedback", height=640)
    page.goto(f"{server.url}/runs/{run_id}/feedback/e2")
    assert page.locator("p.essay.highlighted mark").count() == 0  # the quote is not in this essay
    page.goto(f"{server.url}/runs/{run_id}/feedback")
    assert page.locator("article.student-page").count() == 2
    assert "Your calm sister makes the wait real." in page.inner_text("#page-1")
    page.emulate_media(media="print")
    assert not page.locator("header.top").is_visible() and not page.locator(".no-print").first.is_visible()
    pdf = page.pdf(format="Letter")
    assert len(re.findall(rb"/Type\s*/Page\b", pdf)) == 2  # one printed page per student
    page.emulate_media(media="screen")
    assert page.dialogs == []


def test_step6_class_overview_applies_an_override(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    essays = [{"id": e["id"], "text": e["text"]} for e in essays_json(3)]  # no teacher scores: the AI's stand
    run_id = _api_run(server, page, 3, essays=essays)
    page.goto(f"{server.url}/runs/{run_id}/overview")
    assert page.locator("#heatmap tbody tr").count() == 3
    style_row = page.locator("#distribution tr[data-criterion='Style']")
    ones = style_row.locator(".bar", has=page.locator("b:text-is('1')")).locator(".count")
    assert ones.inner_text() == "0"
    e2 = page.locator("#heatmap tr[data-essay='e2']")
    before = e2.locator("td.heat").nth(1).inner_text()
    assert before != "1"
    e2.locator("th a").click()
    section = page.locator("[id='trait-Style']")
    section.locator("button.level[value='1']").first.click()  # a level of the rubric: the teacher's score
    page.goto(f"{server.url}/runs/{run_id}/overview")
    assert ones.inner_text() == "1"
    cell = e2.locator("td.heat").nth(1)
    assert cell.inner_text() == "1" and "heat-0" in (cell.get_attribute("class") or "")
    assert e2.locator("td.weakest").inner_text() == "Style"
    small_shot(page, "t12-class-overview-override", height=640)
    assert page.dialogs == []


def _no_research_words(page: Any) -> None:  # noqa: F811
    text = page.inner_text("body").lower()
    found = [w for w in RESEARCH_WORDS if w in text]
    assert found == [], f"{page.url}: {found}"


def test_step7_teacher_pages_use_plain_words(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    _to_backend(server, page, tmp_path, 4, pool="same")  # the class's own scored essays as examples
    form = page.locator("#backend-form")
    recommended = form.locator("label.choice:has-text('Recommended (debate + examples)') input")
    assert recommended.is_visible() and recommended.is_checked()
    quick = form.locator("label.choice:has-text('Quick (one judge per trait)')")
    assert quick.is_visible()
    fold = page.locator("#advanced-protocols")
    assert fold.get_attribute("open") is None and "advanced" in fold.locator("summary").inner_text()
    research = fold.locator("input[name=protocols]")
    assert research.count() >= 1 and not research.first.is_visible()  # folded away
    _no_research_words(page)
    small_shot(page, "t13-plain-words", height=640)
    fold.locator("summary").click()
    assert research.first.is_visible()
    draft = page.url.split("/drafts/")[1].split("/")[0]
    for path in ("/", f"/drafts/{draft}/rubric", f"/drafts/{draft}/essays", f"/drafts/{draft}/exemplars"):
        page.goto(server.url + path)
        _no_research_words(page)
    run = _api_run(server, page, 2)  # (the same pages as a run started here, without building an index)
    _no_research_words(page)
    for path in ("/results", "/essays/e1", "/review", "/gradebook", "/overview", "/feedback", "/feedback/e1"):
        page.goto(f"{server.url}/runs/{run}{path}")
        _no_research_words(page)
    page.goto(f"{server.url}/runs/{run}/evaluation")
    assert "qwk" in page.inner_text("body").lower()  # the research page keeps it
    assert page.dialogs == []


def _write_five_traits(page: Any) -> None:  # noqa: F811
    page.fill("#rubric-form input[name=name]", "Five criteria")
    for i in range(4):
        page.fill(f"input[name=trait-{i}-name]", f"T{i}")
        page.fill(f"input[name=trait-{i}-max]", "1")
        page.fill(f"textarea[name=trait-{i}-levels]", "1: yes\n0: no")
    page.click("#add-trait")
    assert page.input_value("input[name=trait-3-name]") == "T3"  # what was typed stays
    assert page.input_value("textarea[name=trait-0-levels]") == "1: yes\n0: no"
    page.fill("input[name=trait-4-name]", "T4")
    page.fill("input[name=trait-4-max]", "1")
    page.fill("textarea[name=trait-4-levels]", "1: y\n0: n")
    page.click("#rubric-form button[value=save]")


def test_step8_forms_keep_input_a_fifth_trait_a_preview_rename_and_archive(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    page.goto(server.url + "/")
    page.click("main button.primary")
    preview = page.locator("#preview-asap-set7")
    assert not preview.locator("h4").first.is_visible()
    preview.locator("summary").click()
    assert preview.locator("h4:text-is('Ideas (0\u20133)')").is_visible()
    _write_five_traits(page)
    assert "5 traits" in page.inner_text("main")
    text = "My summer of waiting & <b>patience</b>, a long essay I typed by hand."
    page.fill("input[name=essay_id]", "ana")
    page.fill("textarea[name=essay_text]", text)
    page.fill("input[name=score-0]", "9")
    page.click("button:text-is('Add this essay')")
    assert page.locator("#error-essay_text").is_visible()
    assert page.input_value("textarea[name=essay_text]") == text  # kept, as typed
    assert page.input_value("input[name=essay_id]") == "ana" and page.input_value("input[name=score-0]") == "9"
    small_shot(page, "t14-form-keeps-input", height=640)
    page.fill("input[name=score-0]", "1")
    page.click("button:text-is('Add this essay')")
    assert "Read 1 essay" in page.inner_text("#read-summary")
    page.click("text=Next: exemplars")
    page.check("input[name=pool][value=none]")
    page.click("text=Next: backend")
    page.check("input[name=kind][value=fake]")
    page.fill("input[name=name]", "Period 3")
    page.click("button[value=start]")
    page.wait_for_selector("#review-link", timeout=60_000)
    run = page.url.split("/runs/")[1].split("/")[0].split("?")[0]
    page.click("details.rename summary")
    page.fill("details.rename input[name=name]", "Period 3, final")
    page.click("#rename")
    page.goto(server.url + "/")
    mine = page.locator(f"tr:has(a[href='/runs/{run}'])")
    assert mine.locator("a").first.inner_text() == "Period 3, final"
    mine.locator("button.archive").click()
    assert page.locator(f"a[href='/runs/{run}']").count() == 0 and "1 archived" in page.inner_text("#hidden-runs")
    page.click("#show-all")
    mine.locator("button.archive:text-is('bring back')").click()
    page.goto(server.url + "/")
    assert page.locator(f"tr:has(a[href='/runs/{run}'])").count() == 1
    assert page.dialogs == []


def _seconds(page: Any, selector: str) -> float:  # noqa: F811
    return float(page.inner_text(selector).removesuffix(" s").replace(",", ""))


def test_step9_the_estimate_shows_the_one_time_setup_apart(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    n = 6
    _to_backend(server, page, tmp_path, n, pool="same")  # an example index to build, once
    page.check("input[name=kind][value=fake]")
    page.fill("input[name=fake_latency_s]", "0.05")
    page.click("button[value=estimate]")
    page.wait_for_selector("#estimate-time", timeout=60_000)
    setup, per_essay, total = (_seconds(page, f"#estimate-{k}") for k in ("setup", "per-essay", "time"))
    assert "once" in page.inner_text("#estimate tr:has(#estimate-setup) th")
    assert 0 < per_essay < setup  # the index build is the one-time cost, not a per-essay one
    assert abs(total - (setup + n * per_essay)) <= 0.1 + n * 0.005  # the set-up counted once (display rounding)
    small_shot(page, "t15-estimate-setup", "section.panel:has(#estimate)")
    assert page.dialogs == []


def test_printed_feedback_is_one_sheet_a_student_for_real_essays_and_four_criteria(
    server: Server,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    from madrag.data.loaders import load_asap
    from madrag.data.shipped import asap_data_file, asap_rubric_file
    from madrag.rubric import load_rubric

    rubric = load_rubric(asap_rubric_file(7))
    found = load_asap(asap_data_file(), rubric, essay_set=7)[:25]
    chosen = sorted(found, key=lambda e: -len(e.text.split()))[:3]  # the class's three longest: 360, 336, 227 words
    essays = [{"id": e.id, "text": e.text} for e in chosen]
    body = {"rubric": rubric.model_dump(mode="json"), "essays": essays, "protocols": ["MAD"], "backend": FAKE}
    run_id = server.api("POST", "/api/runs", json=body)["id"]
    page.goto(f"{server.url}/runs/{run_id}")
    page.wait_for_selector("#review-link", timeout=60_000)
    page.goto(f"{server.url}/runs/{run_id}/feedback")
    assert page.locator("article.student-page").count() == 3
    page.emulate_media(media="print")
    for size in ("Letter", "A4"):
        pdf = page.pdf(format=size)
        assert len(re.findall(rb"/Type\s*/Page\b", pdf)) == 3, size  # one printed sheet per student
    page.emulate_media(media="screen")

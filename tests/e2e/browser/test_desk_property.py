"""A property test of the teacher's hands in real Chromium, on the review desk and on the essay page: seeded random
sequences of clicks on levels, digits, Enter in a comment, Tab, focus moved, n / p, filter changes and bulk
approvals, each against a model of what the action means (a digit sets the level of the row or criterion in focus,
else the one the URL's ``#trait-NAME`` names on the essay page, never another; Enter in a comment saves the comment
alone; a bulk approval decides only the undecided scores its filter shows). After every step every grade, the
review in force and the comment, as the scores export says them, equal the model's, and the page shows the model's
grades. Bounded: two sequences per page on a synthetic run of 5 essays x 2 criteria."""

from __future__ import annotations

import csv
import io
import random
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
from tests.e2e.browser.test_server_browser import (  # noqa: F401 (fixtures, skip mark)
    Server,
    page,
    pytestmark,
    server,
)
from tests.e2e.server.test_desk_model import Cell
from tests.synthetic_runs import rubric_of, synthesize_run

Key = tuple[str, str]
RUBRIC = rubric_of(2, 1, 3)
TRAITS = [t.name for t in RUBRIC.traits]
LEVELS = {t.name: range(t.min, t.max + 1) for t in RUBRIC.traits}
ROW = "#review-queue tr[data-essay='{}'][data-trait='{}']"


def _grades(srv: Server, run_id: str) -> dict[Key, tuple[int, str | None, str | None]]:
    text = httpx.get(f"{srv.url}/api/runs/{run_id}/export?format=csv", timeout=30).text
    rows = csv.DictReader(io.StringIO(text))
    return {
        (r["essay_id"], r["trait"]): (int(r["grade"]), r["review"] or None, r["review_comment"] or None) for r in rows
    }


def _start(srv: Server) -> tuple[str, dict[Key, Cell]]:
    """A synthetic run nobody scored (its Judge torn on 9 of its 10 scores: flagged and agreeing rows), and the
    model of its grades (madrag's, all undecided)."""
    run_id = synthesize_run(srv.data_dir / "runs", 5, RUBRIC, seed=7, human=False)
    return run_id, {k: Cell(ai=v[0], upload=None) for k, v in _grades(srv, run_id).items()}


def _check(srv: Server, run_id: str, model: dict[Key, Cell], history: list[str]) -> None:
    assert _grades(srv, run_id) == {k: c.seen() for k, c in model.items()}, history


def _focused(tab: Any, selector: str) -> Any:
    """The attributes of the element matching ``selector`` that holds the focus (None: none does)."""
    return tab.evaluate(
        """(sel) => { const a = document.activeElement; const el = a && a !== document.body ? a.closest(sel) : null;
        return el ? {essay: el.dataset.essay || null, trait: el.dataset.trait, input: a.tagName === "INPUT" ||
        a.tagName === "SELECT"} : (a && (a.tagName === "INPUT" || a.tagName === "SELECT") ? {input: true} : null); }""",
        selector,
    )


def _submit(tab: Any, act: Any) -> None:
    with tab.expect_navigation():
        act()


def _set_level(model: dict[Key, Cell], key: Key, level: int, comment: str) -> None:
    cell = model[key]
    model[key] = replace(cell, decision="override", override=level, commented=True, comment=comment)


# -- the desk ----------------------------------------------------------------------------------------------------------


def _desk_step(tab: Any, base: str, rng: random.Random, model: dict[Key, Cell], flags: dict[Key, bool]) -> str:
    shown = [k for k in model if tab.locator(ROW.format(*k)).count()]
    key = rng.choice(shown) if shown else rng.choice(sorted(model))
    row = ROW.format(*key)
    kind = rng.choice(["level", "digit", "digit", "enter", "tab", "focus", "focus", "np", "filter", "bulk"])
    if kind == "level" and shown:
        level = rng.choice(LEVELS[key[1]])
        comment = tab.input_value(f"{row} input[name=comment]")  # what the field holds goes with the level
        _submit(tab, lambda: tab.click(f"{row} button.level[value='{level}']"))
        _set_level(model, key, level, comment)
    elif kind == "digit":
        digit = rng.choice("01234")
        on = _focused(tab, "tr[data-essay][data-trait]")
        target = (on["essay"], on["trait"]) if on and not on["input"] else None
        if target is not None and int(digit) in LEVELS[target[1]]:
            comment = tab.input_value(f"{ROW.format(*target)} input[name=comment]")
            _submit(tab, lambda: tab.keyboard.press(digit))
            _set_level(model, target, int(digit), comment)
            return f"digit {digit} on {target}"
        tab.keyboard.press(digit)  # nothing in focus (or typed into a field): no level is set
        tab.wait_for_timeout(150)
        return f"digit {digit} on nothing ({on})"
    elif kind == "enter" and shown:
        text = rng.choice(["", "thesis?", "re-read the ending", model[key].comment])
        tab.fill(f"{row} input[name=comment]", text)
        _submit(tab, lambda: tab.press(f"{row} input[name=comment]", "Enter"))
        if text != model[key].comment:
            model[key] = replace(model[key], commented=True, comment=text)
    elif kind == "tab":
        tab.keyboard.press("Tab")
    elif kind == "focus" and shown:
        target = rng.choice(["a", "button.level", "input[name=comment]", None])
        if target is None:
            tab.evaluate("document.activeElement && document.activeElement.blur()")
        else:
            tab.locator(f"{row} {target}").first.focus()
        return f"focus {target} of {key}"
    elif kind == "np":
        tab.keyboard.press(rng.choice("np"))  # the desk has no n / p: nothing happens (or it is typed)
        tab.wait_for_timeout(150)
    elif kind == "filter":
        trait = rng.choice(["", *TRAITS])
        state = rng.choice(["", "open", "decided"])
        tab.goto(f"{base}?trait={quote(trait)}&state={state}")
        return f"filter trait={trait} state={state}"
    elif kind == "bulk":
        button = tab.locator("#approve-shown, #approve-agreeing")
        if button.count():
            query = dict(parse_qsl(urlsplit(tab.url).query))
            trait, state = query.get("trait", ""), query.get("state", "")
            _submit(tab, lambda: button.first.click())
            for k, c in model.items():
                wanted = (k[1] == trait or not trait) and (not state or c.open == (state == "open"))
                if c.open and (wanted if (trait or state) else not flags[k]):
                    model[k] = replace(c, decision="bulk-accept")
    return f"{kind} {key}"


def test_random_hands_on_the_desk_set_only_what_they_mean(server: Server, page: Any) -> None:  # noqa: F811
    page.set_default_timeout(60_000)  # a loaded 2-core machine: each step a page load or two
    for seed in (5, 11):
        rng = random.Random(seed)
        run_id, model = _start(server)
        base = f"{server.url}/runs/{run_id}/review"
        page.goto(base)
        flags = {
            (r.get_attribute("data-essay"), r.get_attribute("data-trait")): "flagged"
            in (r.get_attribute("class") or "").split()
            for r in page.locator("#review-queue tr[data-essay]").all()
        }
        assert any(flags.values()) and not all(flags.values())  # both kinds of row, for the filters and approvals
        history: list[str] = []
        for _ in range(20):
            history.append(_desk_step(page, base, rng, model, flags))
            _check(server, run_id, model, history)
            for r in page.locator("#review-queue tr[data-essay]").all():
                key = (r.get_attribute("data-essay"), r.get_attribute("data-trait"))
                assert r.locator("b.score").inner_text() == str(model[key].grade), history
    assert page.dialogs == []


# -- the essay page ----------------------------------------------------------------------------------------------------


def _section(trait: str) -> str:
    return f"section[id='trait-{trait}']"


def _essay_step(tab: Any, base: str, rng: random.Random, model: dict[Key, Cell], essays: list[str]) -> str:
    essay = tab.locator("#essay-id").inner_text()
    trait = rng.choice(TRAITS)
    kind = rng.choice(["open", "level", "digit", "digit", "enter", "tab", "focus", "np"])
    if kind == "open":
        essay = rng.choice(essays)
        anchor = rng.choice(["", f"#trait-{quote(trait)}"])
        tab.goto(f"{base}/{essay}{anchor}")
        return f"open {essay}{anchor}"
    if kind == "level":
        level = rng.choice(LEVELS[trait])
        comment = tab.input_value(f"{_section(trait)} input[name=comment]")
        _submit(tab, lambda: tab.click(f"{_section(trait)} button.level[value='{level}']"))
        _set_level(model, (essay, trait), level, comment)
    elif kind == "digit":
        digit = rng.choice("01234")
        on = _focused(tab, "section.trait")
        hash_trait = tab.evaluate("decodeURIComponent(location.hash).replace(/^#trait-/, '')")
        target = on["trait"] if on and not on["input"] and on.get("trait") else None
        if on is None or (not on["input"] and not on.get("trait")):
            target = hash_trait if hash_trait in TRAITS else None  # no criterion in focus: the URL's, else none
        if target is not None and int(digit) in LEVELS[target]:
            comment = tab.input_value(f"{_section(target)} input[name=comment]")
            _submit(tab, lambda: tab.keyboard.press(digit))
            _set_level(model, (essay, target), int(digit), comment)
            return f"digit {digit} on {essay}/{target}"
        tab.keyboard.press(digit)
        tab.wait_for_timeout(150)
        return f"digit {digit} on nothing ({on}, #{hash_trait})"
    elif kind == "enter":
        text = rng.choice(["", "thesis?", "the ending is missing", model[(essay, trait)].comment])
        field = f"{_section(trait)} input[name=comment]"
        tab.fill(field, text)
        _submit(tab, lambda: tab.press(field, "Enter"))
        if text != model[(essay, trait)].comment:
            model[(essay, trait)] = replace(model[(essay, trait)], commented=True, comment=text)
    elif kind == "tab":
        tab.keyboard.press("Tab")
    elif kind == "focus":
        target = rng.choice(["button.level", "input[name=comment]", "#essay-text", None])
        if target is None:
            tab.evaluate("document.activeElement && document.activeElement.blur()")
        elif target == "#essay-text":
            tab.locator(target).focus()
        else:
            tab.locator(f"{_section(trait)} {target}").first.focus()
        return f"focus {target} of {trait}"
    elif kind == "np":
        key = rng.choice("np")
        link = tab.locator("#next-essay" if key == "n" else "#prev-essay")
        on = _focused(tab, "section.trait")
        if link.count() and not (on and on["input"]):
            _submit(tab, lambda: tab.keyboard.press(key))  # the next / previous student, no grade touched
        else:
            tab.keyboard.press(key)
            tab.wait_for_timeout(150)
        return f"{key} from {essay}"
    return f"{kind} {essay}/{trait}"


def test_random_hands_on_the_essay_page_set_only_what_they_mean(server: Server, page: Any) -> None:  # noqa: F811
    page.set_default_timeout(60_000)  # a loaded 2-core machine: each step a page load or two
    for seed in (6, 12):
        rng = random.Random(seed)
        run_id, model = _start(server)
        essays = sorted({k[0] for k in model})
        base = f"{server.url}/runs/{run_id}/essays"
        page.goto(f"{base}/{essays[1]}#trait-{quote(TRAITS[1])}")  # as the desk's link opens it
        history: list[str] = []
        for _ in range(20):
            history.append(_essay_step(page, base, rng, model, essays))
            _check(server, run_id, model, history)
            essay = page.locator("#essay-id").inner_text()
            for trait in TRAITS:
                shown = page.locator(f"{_section(trait)} b.score").first.inner_text()
                assert shown == str(model[(essay, trait)].grade), history
    assert page.dialogs == []

"""The Judge's score read from answers as chat models write them (tests/data/judge_answers.yaml): every readable
answer gives the score a careful reader takes, and no answer gives a wrong number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from madrag.agents.judge import parse_score
from madrag.rubric import Trait

CORPUS = Path(__file__).parents[2] / "data" / "judge_answers.yaml"
STYLES = {"gpt-4o", "gpt-4o-mini", "claude", "llama", "qwen"}


def load() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    return entries


def trait_of(entry: dict[str, Any]) -> Trait:
    lo, hi = int(entry["min"]), int(entry["max"])
    return Trait(name="Ideas", min=lo, max=hi, levels={s: f"level {s}" for s in range(lo, hi + 1)})


def read(entry: dict[str, Any]) -> tuple[int | None, str | None]:
    return parse_score(entry["answer"], trait_of(entry), essay=entry.get("essay"))


def test_the_corpus_is_what_it_says() -> None:
    entries = load()
    assert len(entries) >= 40
    assert len({e["id"] for e in entries}) == len(entries)
    assert {e["style"] for e in entries} <= STYLES and {"gpt-4o", "claude", "llama", "qwen"} <= {
        e["style"] for e in entries
    }
    readable = [e for e in entries if e["expected"] is not None]
    assert len(readable) >= 30 and len(entries) - len(readable) >= 8
    for e in entries:
        assert e["expected"] is None or isinstance(e["expected"], int), e["id"]
        assert "essay" not in e or "Final score" in e["essay"], e["id"]  # an essay is there for its score line


def test_recall_on_readable_answers_and_no_wrong_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    entries = load()
    readable = [e for e in entries if e["expected"] is not None]
    got = {e["id"]: read(e) for e in entries}
    missed = [e["id"] for e in readable if got[e["id"]][0] != e["expected"]]
    wrong = [
        f"{e['id']}: read {got[e['id']][0]}, expected {e['expected']}"
        for e in entries
        if got[e["id"]][0] is not None and got[e["id"]][0] != e["expected"]
    ]
    hits = len(readable) - len(missed)
    with capsys.disabled():
        print(f"\njudge corpus: recall {hits}/{len(readable)}, wrong numbers {len(wrong)}/{len(entries)}")
    assert not wrong, wrong
    assert hits / len(readable) == 1.0, {i: got[i][1] for i in missed}


@pytest.mark.parametrize("entry", [e for e in load() if e["expected"] is None], ids=lambda e: e["id"])
def test_an_unreadable_answer_names_its_problem(entry: dict[str, Any]) -> None:
    score, problem = read(entry)
    assert score is None and problem


def test_the_essay_is_what_tells_a_reproduced_score_line_apart() -> None:
    """An answer that reproduces the essay's injected score line unquoted: only the essay shows it is not the
    Judge's own."""
    [entry] = [e for e in load() if e["id"] == "llama-injection-reproduced-only"]
    assert parse_score(entry["answer"], trait_of(entry)) == (3, None)
    assert read(entry) == (None, "no 'Final score: N' line")

"""The agents' building blocks: reading a Judge's score, placeholders, exemplar text, template name lists."""

from __future__ import annotations

from importlib import resources

import pytest

from madrag.agents.context import shorten
from madrag.agents.judge import (
    blank_score_line,
    choice_distribution,
    parse_score,
    parse_trait_scores,
    summarise,
)
from madrag.agents.placeholders import mask_placeholders, placeholders
from madrag.agents.prompts import (
    CONSENSUS_PROMPT_NAMES,
    PROMPT_NAMES,
    SOURCE_PROMPT_NAMES,
    TRAINING_FREE_PROMPT_NAMES,
    PromptLibrary,
)
from madrag.agents.scores import trait_score_line
from madrag.providers.base import ChatResponse
from madrag.rubric import Rubric, Trait

LEVELS = {0: "none", 1: "weak", 2: "ok", 3: "strong"}
IDEAS = Trait(name="Ideas", min=0, max=3, levels=LEVELS)
STYLE = Trait(name="Style", min=0, max=3, levels=LEVELS)
RUBRIC = Rubric(traits=[IDEAS, STYLE])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Good.\nFinal score: 2", (2, None)),
        ("final score = **3**\nFinal Score: 3", (3, None)),
        ("final score = **3**\nFinal Score: 1", (None, "two different closing scores: 3, 1")),
        ("My final score: 2, I think.\nFinal score: 1", (None, "two different closing scores: 2, 1")),
        ("I thought of a final score: 2, then.\nFinal score: 1", (1, None)),
        ("No score here.", (None, "no 'Final score: N' line")),
        ("Final score: 2.5", (None, "score 2.5 is not an integer")),
        ("Final score: 7", (None, "score 7 outside [0, 3]")),
    ],
)
def test_parse_score_reads_the_closing_final_score_in_range(text: str, expected: tuple[int | None, str | None]) -> None:
    assert parse_score(text, IDEAS) == expected


def test_trait_scores_last_line_wins_and_out_of_range_is_dropped() -> None:
    text = "Ideas: 1 at first.\n**Ideas**: 2\nStyle - 9\nScores:\nstyle = 3\n"
    assert parse_trait_scores(text, RUBRIC) == {"Ideas": 2, "Style": 3}
    assert parse_trait_scores("Style: 7", RUBRIC) == {}


def test_whole_line_pattern_matches_only_lines_that_state_a_score() -> None:
    line = trait_score_line("Style", whole_line=True)
    for only_a_score in ["Style: 2", "**Style** - 3/4", "style = 2 out of 3 points", "- Style: 1.5."]:
        assert line.match(only_a_score), only_a_score
    for more in ["Style: 2 because the verbs vary", "Ideas: 2", "Stylish: 2"]:
        assert not line.match(more), more


def test_blank_score_line_is_read_back_once_filled_in() -> None:
    blank = blank_score_line(IDEAS)
    assert blank == "Ideas: N (an integer from 0 to 3)"
    assert parse_trait_scores(blank.replace("N (an integer from 0 to 3)", "2"), RUBRIC) == {"Ideas": 2}


def test_choice_distribution_and_summary() -> None:
    response = ChatResponse(text="2", choice_logprobs={"1": -2.0, "2": -0.5, "x": -0.1})
    dist = choice_distribution(response, ["0", "1", "2", "3"])
    assert dist is not None and set(dist) == {1, 2} and sum(dist.values()) == pytest.approx(1.0)
    assert choice_distribution(ChatResponse(text="2"), ["2"]) is None
    argmax = summarise(dist, 1, "constrained_distribution", "argmax")
    assert argmax.reported == 2 and argmax.reported_from == "argmax" and argmax.parsed == 1
    failed = summarise(None, None, "parsed_text", "expected")
    assert failed.reported is None and failed.mode == "failed" and failed.reported_from == "parsed"


def test_placeholders_are_listed_and_masked() -> None:
    text = "Dear @CAPS1, @PERSON12 paid @MONEY3 on @ZZZ; email@example.com stays."
    assert placeholders(text) == ["@CAPS1", "@PERSON12", "@MONEY3", "@ZZZ"]
    assert mask_placeholders(text) == "Dear [name], [person] paid [amount] on [name]; email@example.com stays."


def test_shorten_cuts_exemplars_to_a_word_budget() -> None:
    text = "one two  three\nfour"
    assert shorten(text, None) == text
    assert shorten(text, 4) == text
    assert shorten(text, 2) == "one two [...]"


def test_template_lists_name_every_packaged_template_once() -> None:
    folder = resources.files("madrag").joinpath("prompts")
    packaged = {p.name.removesuffix(".txt") for p in folder.iterdir() if p.is_file()}  # ko/: a prompts-dir set
    listed = [*PROMPT_NAMES, *CONSENSUS_PROMPT_NAMES, *TRAINING_FREE_PROMPT_NAMES, *SOURCE_PROMPT_NAMES]
    assert len(listed) == len(set(listed))
    meta = {"meta_system", "meta_user"}  # the meta-evaluator's, recorded by its own job
    assert set(listed) | meta == packaged
    library = PromptLibrary()
    assert all(library.text(name) for name in listed)

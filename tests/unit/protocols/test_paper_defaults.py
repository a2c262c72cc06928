"""The papers' behaviour by default, each difference an option: the Judge's claim-check sentence, the prompt
layout, and SARAG's exemplars."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import StubBank, make_ctx

from madrag.data import Essay, split_by_fold
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.fake import FakeProvider, request_role
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

CHECK = "Check each claim against the essay text itself before you accept it."


@pytest.fixture
def sample(essays7: list[Essay]) -> tuple[list[Essay], list[Essay]]:
    split = split_by_fold(essays7, 0)
    return split.eval[:1], split.pool[:200]


def test_defaults_are_the_papers() -> None:
    settings = ScoringSettings()
    assert settings.prompt_layout == "seed"
    assert settings.verify_claims is False
    assert settings.sarag_exemplars == "span"


@pytest.mark.parametrize("verify", [False, True])
async def test_claim_check_sentence_only_when_asked(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]], verify: bool
) -> None:
    essays, pool = sample
    fake = FakeProvider()
    ctx = make_ctx(tmp_path, fake, StubBank(pool), settings=ScoringSettings(verify_claims=verify))
    await run_scoring(ctx, essays, rubric7, [get_protocol("MADRAG"), get_protocol("MA")])
    judges = [r for r in fake.calls if request_role(r) == "judge"]
    assert {r.trait for r in judges} == set(rubric7.trait_names)
    for request in judges:
        text = "\n".join(m.content for m in request.messages)
        assert (CHECK in text) is verify
        assert "Write a short rationale" not in text  # the confidence paper's Figure 6 sets no length
        assert text.endswith("Final score: N\nwhere N is an integer between 0 and 3.")


@pytest.mark.parametrize("choice", ["span", "similar"])
async def test_sarag_exemplars_span_the_score_range_by_default(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]], choice: str
) -> None:
    essays, pool = sample
    bank = StubBank(pool)
    ctx = make_ctx(tmp_path, FakeProvider(), bank, settings=ScoringSettings(sarag_exemplars=choice))  # type: ignore[arg-type]
    await run_scoring(ctx, essays, rubric7, [get_protocol("SARAG")])
    record = next(r for r in ctx.store.records(protocol="SARAG"))
    shown = [ex["essay_id"] for ex in record.context["exemplars"]]
    first = rubric7.traits[0]
    if choice == "span":
        want = [lvl.exemplar.essay_id for lvl in bank.per_level(essays[0], first) if lvl.exemplar is not None]
        assert len(want) == len(first.scores)  # one per score level of the first trait
        refs = [next(e for e in pool if e.id == eid).reference(first) for eid in shown]
        assert refs == first.scores
    else:
        want = [e.id for e in pool[: len(first.scores)]]
    assert shown == want

"""The MADRAG pipeline end to end on the scripted fake provider."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from tests.helpers import StubBank, make_ctx

from madrag.data import Essay, split_by_fold
from madrag.errors import ProviderError
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, request_role
from madrag.records import call_key
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

TEXT_ONLY = Capabilities(logprobs=True, max_top_logprobs=20, seed=True)


@pytest.fixture
def sample(essays7: list[Essay]) -> tuple[list[Essay], list[Essay]]:
    split = split_by_fold(essays7, 0)
    return split.eval[:2], split.pool[:200]


async def test_madrag_makes_one_record_per_role_and_isolates_exemplars(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    essays, pool = sample
    fake = FakeProvider()
    ctx = make_ctx(tmp_path, fake, StubBank(pool))
    scores = await run_scoring(ctx, essays, rubric7, [get_protocol("MADRAG")])
    assert len(scores) == 8 and all(s.score is not None and 0 <= s.score <= 3 for s in scores)
    records = list(ctx.store.records())
    assert Counter((r.essay_id, r.trait, r.role) for r in records) == {
        (e.id, t, role): 1 for e in essays for t in rubric7.trait_names for role in ("advocate", "skeptic", "judge")
    }
    by_role = {r.role: r for r in records if r.essay_id == essays[0].id and r.trait == "Ideas"}
    adv, skp, jdg = by_role["advocate"], by_role["skeptic"], by_role["judge"]
    # only the Judge sees exemplars; the Skeptic reads the Advocate; the Judge reads both with confidences
    assert all("Scored example essays" not in m.content for m in adv.messages + skp.messages)
    assert "Scored example essays" in jdg.messages[1].content
    assert adv.text.strip() in skp.messages[1].content
    assert adv.text.strip() in jdg.messages[1].content and skp.text.strip() in jdg.messages[1].content
    assert f"confidence {adv.confidence:.2f}" in jdg.messages[1].content
    assert adv.confidence == pytest.approx(math.exp(-0.1)) and adv.confidence_source == "first_token_logprob"
    shown = jdg.context["exemplars"]
    assert [lvl["score"] for lvl in shown] == [0, 1, 2, 3]
    for lvl in shown:
        assert lvl["exemplar"]["essay_id"] != essays[0].id
        assert lvl["exemplar"]["text"].strip()[:80] in jdg.messages[1].content
    # decoding per the MADRAG paper's A.2
    assert adv.settings["temperature"] == 0.7 and skp.settings["temperature"] == 0.7
    assert jdg.settings["temperature"] == 0.0
    # the fake supports prefill+choices: the score is read at the score position, with its distribution
    assert jdg.score is not None and jdg.score.mode == "constrained_distribution" and jdg.answers == 2
    assert sum(jdg.score.distribution.values()) == pytest.approx(1.0)  # type: ignore[union-attr]
    assert jdg.score.argmax == jdg.score.parsed == jdg.score.reported


async def test_resume_reuses_every_finished_call(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    essays, pool = sample
    first = make_ctx(tmp_path, FakeProvider(), StubBank(pool))
    await run_scoring(first, essays, rubric7, [get_protocol("MADRAG")])
    n = first.store.count()
    first.store.close()
    again_fake = FakeProvider()
    again = make_ctx(tmp_path, again_fake, StubBank(pool))
    await run_scoring(again, essays, rubric7, [get_protocol("MADRAG")])
    assert again.store.count() == n == 24
    assert again.stats.made == 0 and again.stats.reused == 24 and again_fake.calls == []


async def test_mad_and_madrag_share_one_debate(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    essays, pool = sample
    ctx = make_ctx(tmp_path, FakeProvider(), StubBank(pool))
    await run_scoring(ctx, essays[:1], rubric7, [get_protocol("MAD"), get_protocol("MADRAG")])
    roles = Counter(r.role for r in ctx.store.records())
    assert roles == {"advocate": 4, "skeptic": 4, "judge": 8}
    mad_judge = ctx.store.get(call_key("MAD", essays[0].id, "Ideas", "judge"))
    assert mad_judge is not None and "Scored example essays" not in mad_judge.messages[1].content
    assert "Debate transcript" in mad_judge.messages[1].content


def _judge_script(judge_texts: list[str]) -> object:
    queue = list(judge_texts)

    def script(request: ChatRequest) -> FakeReply:
        role = request_role(request)
        if role == "advocate":
            return FakeReply("Strong focus on patience.")
        if role == "skeptic":
            return FakeReply("Thin details.")
        return FakeReply(queue.pop(0))

    return script


@pytest.mark.parametrize(
    ("replies", "followup", "mode", "reported", "requests"),
    [
        # a score mentioned inside a sentence is not the Judge's statement
        (["Good essay.\nFinal score: 1\nI first thought of a final score: 2 here."], False, "parsed_text", 1, 1),
        # a revision in a later sentence is a second statement of the Judge's own: two values, no score
        (["Good essay.\nFinal score: 1\nOn reflection, Final score: 2"], False, "failed", None, 1),
        # by default (the MADRAG paper's A.5) an unreadable score is missing: no follow-up request
        (["I cannot decide.", "Final score: 3"], False, "failed", None, 1),
        (["Final score: 1\nOn reflection:\nFinal score: 2"], False, "failed", None, 1),
        # with --score-followup: two different closing lines are neither score; the follow-up's is
        (
            ["Good essay.\nFinal score: 1\nOn reflection:\nFinal score: 2", "Final score: 2"],
            True,
            "parsed_followup",
            2,
            2,
        ),
        (["I cannot decide.", "Final score: 3"], True, "parsed_followup", 3, 2),
        (["No score here.", "still nothing"], True, "failed", None, 2),
        (["Final score: 7", "Final score: 9"], True, "failed", None, 2),
    ],
)
async def test_text_mode_parses_the_closing_score_and_never_invents_one(
    tmp_path: Path,
    rubric7: Rubric,
    essays7: list[Essay],
    replies: list[str],
    followup: bool,
    mode: str,
    reported: int | None,
    requests: int,
) -> None:
    fake = FakeProvider(script=_judge_script(replies), caps=TEXT_ONLY)  # type: ignore[arg-type]
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(score_followup=followup))
    proto = get_protocol("MAD")
    trait_score = await proto.score_trait(ctx, essays7[0], rubric7.trait("Ideas"))  # type: ignore[attr-defined]
    record = ctx.store.get(trait_score.record_key)
    assert record is not None and record.score is not None
    assert record.score.mode == mode and record.score.reported == reported and trait_score.score == reported
    assert record.answers == requests
    assert (record.error is None) == (reported is not None)


async def test_text_mode_reads_score_distribution_from_top_logprobs(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    fake = FakeProvider(script=_judge_script(["Fine.\nFinal score: 2"]), caps=TEXT_ONLY)  # type: ignore[arg-type]
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(report="expected"))
    trait_score = await get_protocol("MAD").score_trait(ctx, essays7[0], rubric7.trait("Ideas"))  # type: ignore[attr-defined]
    result = trait_score.result
    assert result is not None and result.distribution == {2: 1.0} and result.reported_from == "expected"


async def test_no_logprobs_means_self_reported_confidence(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    def script(request: ChatRequest) -> FakeReply:
        if request_role(request) == "judge":
            return FakeReply("Final score: 1")
        return FakeReply("An argument.\nConfidence: 0.65")

    fake = FakeProvider(script=script, caps=Capabilities(seed=True))
    ctx = make_ctx(tmp_path, fake)
    await get_protocol("MAD").score_trait(ctx, essays7[0], rubric7.trait("Ideas"))  # type: ignore[attr-defined]
    adv = ctx.store.get(call_key("debate/adv_r1", essays7[0].id, "Ideas", "advocate"))
    assert adv is not None and adv.confidence == 0.65 and adv.confidence_source == "self_reported"
    assert "Confidence: X" in adv.messages[1].content and adv.tokens is None


async def test_backend_failure_stops_cleanly_and_resume_completes(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    essays, _ = sample
    calls = {"n": 0}

    def dies_after_five(request: ChatRequest) -> FakeReply:
        calls["n"] += 1
        if calls["n"] > 5:
            return FakeReply("", error=ProviderError("server answered garbage"))
        return FakeReply("Final score: 1" if request_role(request) == "judge" else "text")

    ctx = make_ctx(tmp_path, FakeProvider(script=dies_after_five, caps=TEXT_ONLY), settings=None)
    with pytest.raises(ProviderError, match="garbage"):
        await run_scoring(ctx, essays, rubric7, [get_protocol("MAD")], essay_concurrency=1)
    kept = ctx.store.count()
    assert 0 < kept <= 5
    ctx.store.close()
    again = make_ctx(tmp_path, FakeProvider(caps=TEXT_ONLY))
    await run_scoring(again, essays, rubric7, [get_protocol("MAD")])
    keys = [r.key for r in again.store.records()]
    assert len(keys) == len(set(keys)) == 2 * 4 * 3 and again.stats.reused == kept


async def test_all_six_ablation_protocols_run_and_read_back(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    from madrag.protocols import ABLATION

    essays, pool = sample
    ctx = make_ctx(tmp_path, FakeProvider(), StubBank(pool))
    scores = await run_scoring(ctx, essays, rubric7, [get_protocol(p) for p in ABLATION])
    assert len(scores) == 2 * 4 * 6 and all(s.score is not None for s in scores)
    stored = ctx.store.scores()
    assert sorted((s.protocol, s.essay_id, s.trait, s.score) for s in stored) == sorted(
        (s.protocol, s.essay_id, s.trait, s.score) for s in scores
    )
    sa = ctx.store.get(call_key("SA", essays[0].id, "*", "judge"))
    assert sa is not None and sa.answers == 1 + 4 and set(sa.trait_scores or {}) == set(rubric7.trait_names)
    sarag = ctx.store.get(call_key("SARAG", essays[0].id, "*", "judge"))
    assert sarag is not None and len(sarag.context["exemplars"]) == 4
    assert "Previously scored essays" in sarag.messages[1].content
    assert "Previously scored essays" not in sa.messages[1].content


async def test_sa_text_mode_parses_each_trait_and_follows_up_on_missing(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    replies = iter(["Fine.\nScores:\nIdeas: 2\nOrganization: 1\nStyle: 9", "Style: 2\nConventions: 1"])
    fake = FakeProvider(script=lambda _r: next(replies), caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(score_followup=True))
    out = await get_protocol("SA").score_essay(ctx, essays7[0], rubric7)
    assert {s.trait: s.score for s in out} == {"Ideas": 2, "Organization": 1, "Style": 2, "Conventions": 1}
    modes = {s.trait: s.result.mode for s in out if s.result}
    assert modes == {
        "Ideas": "parsed_text",
        "Organization": "parsed_text",
        "Style": "parsed_followup",
        "Conventions": "parsed_followup",
    }


@pytest.mark.parametrize("layout", ["shared_prefix", "seed"])
async def test_prompt_layouts_keep_the_seed_wording_and_share_prefixes(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]], layout: str
) -> None:
    from madrag.evaluation.costs.prefix import prefix_stats

    essays, pool = sample
    settings = ScoringSettings(prompt_layout=layout)  # type: ignore[arg-type]
    ctx = make_ctx(tmp_path, FakeProvider(), StubBank(pool), settings=settings)
    await run_scoring(ctx, essays[:1], rubric7, [get_protocol("MADRAG")])
    records = list(ctx.store.records())
    adv = next(r for r in records if r.role == "advocate")
    role_text = "You are an Advocate Agent participating in a multi-agent debate system for essay evaluation."
    stats = prefix_stats(records)
    if layout == "seed":
        assert adv.messages[0].content.startswith(role_text)
        assert stats.shared_fraction < 0.1, stats
    else:
        assert role_text in adv.messages[1].content and role_text not in adv.messages[0].content
        assert len({r.messages[0].content for r in records}) == 1  # one system message for every role
        # the essay comes before anything role- or trait-specific
        assert all(r.messages[1].content.startswith("Essay prompt:") for r in records)
        assert stats.shared_fraction > 0.4, stats  # the essay and trait; exemplars and debate differ
    assert adv.messages[1].content.count(essays[0].text) == 1

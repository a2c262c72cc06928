"""The consensus paper's consensus protocols (SingleJudge ... ScoreMaskedMAD) on the scripted fake provider."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.helpers import make_ctx

from madrag.agents.calls import CallContext
from madrag.agents.roles import mask_scores
from madrag.data import Essay
from madrag.errors import ConfigError
from madrag.paper.consensus.frames import agent_scores_frame
from madrag.pipeline.runner import run_scoring
from madrag.protocols import CONSENSUS_ABLATION, TraitScore, available, get_protocol
from madrag.protocols.consensus import CONSENSUS_PROTOCOLS, INIT_NAMESPACE
from madrag.providers.base import Capabilities, ChatRequest, Message
from madrag.providers.fake import FakeProvider, FakeReply, request_role
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.records import call_key
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

TEXT_ONLY = Capabilities(logprobs=False, seed=True)
ROLE_WORDING = {
    "single": "You are an evaluator who directly and consistently scores student essays.",
    "strict": "You are an evaluator who directly scores student essays very strictly and conservatively.",
    "lenient": "fairly recognizing their potential and strengths",
    "neutral": "You are an evaluator who directly scores student essays fairly and impartially.",
}
_PREVIOUS = re.compile(r"Your previous evaluation \(round (\d+)\)")


def _round_of(request: ChatRequest) -> int:
    m = _PREVIOUS.search("\n".join(m.content for m in request.messages))
    return int(m.group(1)) + 1 if m else 0


def scripted(scores: dict[str, dict[str, int]]) -> Callable[[ChatRequest], FakeReply]:
    """Text-mode answers by role: a rationale naming the role and round (with numbers in it), then the scores;
    a trait missing from ``scores[role]`` is never given (not even on the follow-up)."""

    def script(request: ChatRequest) -> FakeReply:
        role, round_ = request_role(request), _round_of(request)
        lines = "\n".join(f"{t}: {s}" for t, s in scores[role].items())
        rationale = (
            f"RATIONALE-{role}-r{round_}: 2 of the 3 examples are vague.\n"
            "Ideas: 3\nScores:\nStyle shows 2 kinds of sentences."
        )
        return FakeReply(f"{rationale}\nScores:\n{lines}")

    return script


STRICT = {"Ideas": 1, "Organization": 2, "Style": 0, "Conventions": 2}
LENIENT = {"Ideas": 2, "Organization": 2, "Style": 1, "Conventions": 3}
NEUTRAL = {"Ideas": 2, "Organization": 1, "Style": 1, "Conventions": 2}
SCORES = {"strict": STRICT, "lenient": LENIENT, "neutral": NEUTRAL, "single": NEUTRAL}


def _messages(messages: list[Message]) -> str:
    return "\n".join(m.content for m in messages)


async def _run(ctx: CallContext, essays: list[Essay], rubric: Rubric, names: list[str]) -> list[TraitScore]:
    return await run_scoring(ctx, essays, rubric, [get_protocol(n) for n in names])


def test_names_and_options() -> None:
    assert tuple(CONSENSUS_ABLATION) == CONSENSUS_PROTOCOLS
    assert set(CONSENSUS_PROTOCOLS) <= set(available())
    mad = get_protocol("ConsensusMAD")
    assert mad.describe()["rounds"] == 4 and mad.describe()["per_trait"] is False and not mad.needs.bank
    assert get_protocol("ScoreMaskedMAD[rounds=2]").describe() == {
        "name": "ScoreMaskedMAD[rounds=2]",
        "debate": None,
        "exemplars": False,
        "per_trait": False,
        "agents": ["strict", "lenient"],
        "rounds": 2,
        "sharing": "rationale_only",
    }
    assert get_protocol("StrictJudge").describe()["rounds"] == 0
    for bad in ["ConsensusMAD[rounds=0]", "ConsensusMAD[rounds=11]", "SymmetricMAD[r=2]", "StrictJudge[rounds=2]"]:
        with pytest.raises(ConfigError):
            get_protocol(bad)
    with pytest.raises(ConfigError, match="unknown protocol"):
        get_protocol("ConsensusMADX")


@pytest.mark.parametrize("layout", ["shared_prefix", "seed"])
async def test_round_zero_prompts_hold_rubric_essay_and_role(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay], layout: str
) -> None:
    essay = essays7[0]
    settings = ScoringSettings(prompt_layout=layout, placeholders="note")  # type: ignore[arg-type]
    ctx = make_ctx(tmp_path, FakeProvider(), settings=settings)
    await _run(ctx, [essay], rubric7, ["SingleJudge", "StrictJudge", "LenientJudge", "SymmetricMAD[rounds=1]"])
    keys = {
        "single": call_key("SingleJudge", essay.id, "*", "single", 0),
        "strict": call_key(INIT_NAMESPACE, essay.id, "*", "strict", 0),
        "lenient": call_key(INIT_NAMESPACE, essay.id, "*", "lenient", 0),
        "neutral": call_key("SymmetricMAD", essay.id, "*", "neutral_a", 0),
    }
    for role, key in keys.items():
        record = ctx.store.get(key)
        assert record is not None and record.round == 0, role
        system, user = record.messages[0].content, record.messages[1].content
        assert user.count(essay.text) == 1 and essay.prompt and essay.prompt in user
        for trait in rubric7.traits:  # the rubric: every trait's range and level descriptions
            assert f'"name": "{trait.name}"' in user and trait.levels[trait.max] in user
            assert f"{trait.name}: N (an integer from {trait.min} to {trait.max})" in user
        assert '"min_score": 0' in user and '"max_score": 3' in user
        assert "Anonymization note" in system  # --placeholders note (the default, none, says nothing)
        where = system if layout == "seed" else user
        assert ROLE_WORDING[role] in where and ROLE_WORDING[role] not in (user if layout == "seed" else system)
        others = [w for r, w in ROLE_WORDING.items() if r != role]
        assert not any(w in system + user for w in others)
    neutral_b = ctx.store.get(call_key("SymmetricMAD", essay.id, "*", "neutral_b", 0))
    neutral_a = ctx.store.get(keys["neutral"])
    assert neutral_b is not None and neutral_a is not None and neutral_b.messages == neutral_a.messages
    if layout == "shared_prefix":  # one system message; the essay and rubric before anything role-specific
        records = list(ctx.store.records())
        assert len({r.messages[0].content for r in records}) == 1
        assert all(r.messages[1].content.startswith("Essay prompt:") for r in records)


async def test_masked_placeholders_reach_the_consensus_prompts(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay = next(e for e in essays7 if "@CAPS" in e.text or "@PERSON" in e.text)
    ctx = make_ctx(tmp_path, FakeProvider(), settings=ScoringSettings(placeholders="mask"))
    await _run(ctx, [essay], rubric7, ["ConsensusMAD[rounds=1]"])
    for record in ctx.store.records():
        text = _messages(record.messages)
        # no placeholder left, and the prompt explains the neutral words that replace them (the mask note)
        assert "@CAPS" not in text and "@PERSON" not in text and "@CAPS1, @PERSON1" not in text
        assert "neutral words in square brackets" in text


async def test_adjustment_rounds_show_the_other_agents_rationale_and_scores(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay = essays7[0]
    ctx = make_ctx(tmp_path, FakeProvider(script=scripted(SCORES), caps=TEXT_ONLY))
    await _run(ctx, [essay], rubric7, ["ConsensusMAD[rounds=2]", "SymmetricMAD[rounds=1]"])
    for round_ in (1, 2):
        strict = ctx.store.get(call_key("ConsensusMAD", essay.id, "*", "strict", round_))
        lenient = ctx.store.get(call_key("ConsensusMAD", essay.id, "*", "lenient", round_))
        assert strict is not None and lenient is not None
        # the whole prompt: the role's instructions are its system message in the default (seed) layout
        s_user = "\n".join(m.content for m in strict.messages)
        l_user = "\n".join(m.content for m in lenient.messages)
        assert "You are a strict essay evaluator who has completed the initial evaluation" in s_user
        assert "Accept only claims by the lenient evaluator" in s_user
        assert "You are a lenient essay evaluator who has completed the initial evaluation" in l_user
        # the other's previous rationale and scores, and the agent's own previous rationale and scores
        assert f"RATIONALE-lenient-r{round_ - 1}" in s_user and f"RATIONALE-strict-r{round_ - 1}" in s_user
        assert f"The lenient evaluator's evaluation (round {round_ - 1})" in s_user
        other = "\n".join(f"{t}: {s}" for t, s in LENIENT.items())
        own = "\n".join(f"{t}: {s}" for t, s in STRICT.items())
        assert f"The lenient evaluator's scores:\n{other}" in s_user and f"Your previous scores:\n{own}" in s_user
        assert f"The strict evaluator's scores:\n{own}" in l_user
        assert strict.context == {
            "own_previous": call_key(
                INIT_NAMESPACE if round_ == 1 else "ConsensusMAD", essay.id, "*", "strict", round_ - 1
            ),
            "other_previous": call_key(
                INIT_NAMESPACE if round_ == 1 else "ConsensusMAD", essay.id, "*", "lenient", round_ - 1
            ),
            "scores_shared": True,
        }
    sym = ctx.store.get(call_key("SymmetricMAD", essay.id, "*", "neutral_b", 1))
    assert sym is not None
    assert "You are a neutral essay evaluator who has completed" in "\n".join(m.content for m in sym.messages)
    assert "The other evaluator's evaluation (round 0)" in sym.messages[1].content
    assert "The other evaluator's scores:" in sym.messages[1].content


async def test_score_masked_mad_shares_rationales_without_any_number(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay = essays7[0]
    ctx = make_ctx(tmp_path, FakeProvider(script=scripted(SCORES), caps=TEXT_ONLY))
    await _run(ctx, [essay], rubric7, ["ScoreMaskedMAD[rounds=2]"])
    for round_ in (1, 2):
        for role, other in (("strict", "lenient"), ("lenient", "strict")):
            record = ctx.store.get(call_key("ScoreMaskedMAD", essay.id, "*", role, round_))
            assert record is not None and record.context["scores_shared"] is False
            user = record.messages[1].content
            head = f"The {other} evaluator's evaluation (round {round_ - 1}):\n<<<\n"
            block = user[user.index(head) + len(head) : user.index(">>>", user.index(head))]
            assert block.startswith(f"RATIONALE-{other}-r{round_ - 1}: [NUM] of the [NUM] examples are vague.")
            # no number after the marker (whose "r0" is glued to a letter, so not a numeric token)
            assert not re.search(r"\d", block.split(":", 1)[1]) and "Scores" not in block and "Ideas:" not in block
            assert "Style shows [NUM] kinds of sentences." in block  # not a pure score line: kept, masked
            assert f"The {other} evaluator's scores" not in user
            assert f"The {other} evaluator's numeric scores are hidden" in user
            own = "\n".join(f"{t}: {s}" for t, s in (STRICT if role == "strict" else LENIENT).items())
            assert f"Your previous scores:\n{own}" in user  # the agent's own scores are not masked


def test_mask_scores_rules(rubric7: Rubric) -> None:
    text = (
        "Scores:\n**Ideas**: 2\nOrganization = 1/3\nStyle - 2 points\nConventions: 3 out of 3\n"
        "Ideas: 2 because only 1 example (1,000 words? 2.5%) from @CAPS1 and @NUM2.\nFinal scores:"
    )
    assert (
        mask_scores(text, rubric7)
        == "Ideas: [NUM] because only [NUM] example ([NUM] words? [NUM]%) from @CAPS1 and @NUM2."
    )
    assert mask_scores("Scores:\nIdeas: 1", rubric7) == "(no rationale given)"


@pytest.mark.parametrize("rounds", [1, 4])
async def test_consensus_mad_makes_two_calls_per_round(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay], rounds: int
) -> None:
    ctx = make_ctx(tmp_path, FakeProvider())
    name = "ConsensusMAD" if rounds == 4 else f"ConsensusMAD[rounds={rounds}]"
    out = await _run(ctx, essays7[:1], rubric7, [name])
    assert len(out) == 4 and ctx.store.count() == ctx.stats.made == 2 + 2 * rounds
    assert Counter((r.role, r.round) for r in ctx.store.records()) == {
        (role, r): 1 for role in ("strict", "lenient") for r in range(rounds + 1)
    }


async def test_round_zero_calls_are_made_once_across_protocols(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    fake = FakeProvider(latency_s=0.01)
    ctx = make_ctx(tmp_path, fake)
    names = ["StrictJudge", "LenientJudge", "ConsensusMAD[rounds=2]", "ScoreMaskedMAD[rounds=2]", "ConsensusMAD"]
    await _run(ctx, essays7[:2], rubric7, names)
    records = list(ctx.store.records())
    # per essay: init 2 + ConsensusMAD rounds 1-4 (rounds=2 reuses 1-2) 8 + ScoreMaskedMAD 4
    assert len(records) == ctx.stats.made == 2 * (2 + 8 + 4)
    assert Counter(r.protocol for r in records) == {INIT_NAMESPACE: 4, "ConsensusMAD": 16, "ScoreMaskedMAD": 8}
    rationale_requests = [c for c in fake.calls if c.choices is None]
    assert len(rationale_requests) == len(records)  # one rationale request per record: nothing made twice


async def test_final_score_is_the_rounded_mean_and_unusable_stays_unusable(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    lenient = {k: v for k, v in LENIENT.items() if k != "Conventions"}  # never gives Conventions
    scores = {**SCORES, "lenient": lenient}
    settings = ScoringSettings(score_followup=True)  # the missing trait is asked for again, and still missing
    ctx = make_ctx(tmp_path, FakeProvider(script=scripted(scores), caps=TEXT_ONLY), settings=settings)
    out = await _run(ctx, essays7[:1], rubric7, ["ConsensusMAD[rounds=1]", "LenientJudge", "StrictJudge"])
    mad = {s.trait: s for s in out if s.protocol == "ConsensusMAD[rounds=1]"}
    assert {t: (s.mean_score, s.score, s.n_judges) for t, s in mad.items()} == {
        "Ideas": (1.5, 2, 2),  # half up, not to even
        "Organization": (2.0, 2, 2),
        "Style": (0.5, 1, 2),
        "Conventions": (None, None, 2),  # strict said 2, lenient nothing: never imputed
    }
    assert mad["Ideas"].record_key == call_key("ConsensusMAD", essays7[0].id, "*", "strict", 1)
    assert "[strict] RATIONALE-strict-r1" in mad["Ideas"].rationale
    assert "[lenient] RATIONALE-lenient-r1" in mad["Ideas"].rationale
    single = {(s.protocol, s.trait): s.score for s in out if s.protocol != "ConsensusMAD[rounds=1]"}
    assert single[("StrictJudge", "Style")] == 0 and single[("LenientJudge", "Conventions")] is None
    lenient_rec = ctx.store.get(call_key("ConsensusMAD", essays7[0].id, "*", "lenient", 1))
    assert lenient_rec is not None and lenient_rec.answers == 2 and lenient_rec.error is not None
    assert lenient_rec.trait_scores is not None and lenient_rec.trait_scores["Conventions"].mode == "failed"


async def test_resume_makes_no_new_calls(tmp_path: Path, rubric7: Rubric, essays7: list[Essay]) -> None:
    names = list(CONSENSUS_ABLATION)
    first = make_ctx(tmp_path, FakeProvider())
    before = await _run(first, essays7[:2], rubric7, names)
    n = first.store.count()
    first.store.close()
    fake = FakeProvider()
    again = make_ctx(tmp_path, fake)
    after = await _run(again, essays7[:2], rubric7, names)
    assert fake.calls == [] and again.stats.made == 0 and again.stats.reused > 0 and again.store.count() == n
    assert [s.model_dump() for s in after] == [s.model_dump() for s in before]


async def test_stored_scores_match_what_the_protocols_returned(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    lenient = {k: v for k, v in LENIENT.items() if k != "Style"}
    ctx = make_ctx(tmp_path, FakeProvider(script=scripted({**SCORES, "lenient": lenient}), caps=TEXT_ONLY))
    names = [*CONSENSUS_ABLATION, "ConsensusMAD[rounds=2]"]
    returned = await _run(ctx, essays7[:2], rubric7, names)
    assert len(returned) == 2 * 4 * len(names)

    def key(s: TraitScore) -> tuple[str, str, str]:
        return (s.protocol, s.essay_id, s.trait)

    expected = sorted((s.model_dump() for s in returned), key=lambda d: (d["protocol"], d["essay_id"], d["trait"]))
    stored = sorted(ctx.store.scores(set(names)), key=key)
    assert [s.model_dump() for s in stored] == expected
    # without names: the store's configuration says which protocols ran
    ctx.store.set_meta("config", {"protocols": [get_protocol(n).describe() for n in names]})
    assert (
        sorted(
            (s.model_dump() for s in ctx.store.scores()),
            key=lambda d: (d["protocol"], d["essay_id"], d["trait"]),
        )
        == expected
    )
    assert ctx.store.scores({"MADRAG"}) == []  # no consensus protocol named: nothing read


async def test_agent_scores_frame_expands_shared_round_zero(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    lenient = {k: v for k, v in LENIENT.items() if k != "Style"}
    ctx = make_ctx(tmp_path, FakeProvider(script=scripted({**SCORES, "lenient": lenient}), caps=TEXT_ONLY))
    names = ["StrictJudge", "LenientJudge", "ConsensusMAD", "ConsensusMAD[rounds=2]", "SymmetricMAD[rounds=1]"]
    await _run(ctx, essays7[:2], rubric7, names)
    frame = agent_scores_frame(ctx.store.records(), rubric7, [*names, "MADRAG", "SingleJudge"])
    assert list(frame.columns) == ["protocol", "essay_id", "trait", "round", "agent", "score", "record_key"]
    assert str(frame["round"].dtype) == "int64" and str(frame["score"].dtype) == "float64"
    sizes = frame.groupby("protocol").size().to_dict()
    per_essay = {"StrictJudge": 1, "LenientJudge": 1, "ConsensusMAD": 10, "ConsensusMAD[rounds=2]": 6}
    assert sizes == {**{p: 2 * 4 * n for p, n in per_essay.items()}, "SymmetricMAD[rounds=1]": 2 * 4 * 4}
    essay = essays7[0].id
    init_strict = call_key(INIT_NAMESPACE, essay, "*", "strict", 0)
    for proto in ("StrictJudge", "ConsensusMAD", "ConsensusMAD[rounds=2]"):
        rows = frame[(frame.protocol == proto) & (frame.essay_id == essay) & (frame["round"] == 0)]
        strict_rows = rows[rows.agent == "strict"]
        assert set(strict_rows.record_key) == {init_strict} and len(strict_rows) == 4
        assert dict(zip(strict_rows.trait, strict_rows.score, strict=True)) == {k: float(v) for k, v in STRICT.items()}
    two = frame[frame.protocol == "ConsensusMAD[rounds=2]"]
    assert sorted(set(two["round"])) == [0, 1, 2] and set(two.agent) == {"strict", "lenient"}
    assert set(frame[frame.protocol == "SymmetricMAD[rounds=1]"].agent) == {"neutral_a", "neutral_b"}
    style = frame[(frame.agent == "lenient") & (frame.trait == "Style")]
    assert len(style) > 0 and all(math.isnan(v) for v in style.score)
    assert frame[(frame.agent == "lenient") & (frame.trait == "Ideas")].score.eq(2.0).all()
    assert agent_scores_frame([], rubric7, names).empty


async def test_for_role_routes_each_agent_to_its_backend(tmp_path: Path, rubric7: Rubric, essays7: list[Essay]) -> None:
    main, other = FakeProvider(), FakeProvider(model_name="lenient-model")
    ctx = make_ctx(tmp_path, main)
    ctx.role_providers = {"lenient": ManagedProvider(other, RetryPolicy(retries=0))}
    await _run(ctx, essays7[:1], rubric7, ["ConsensusMAD[rounds=2]", "LenientJudge", "StrictJudge"])
    assert main.calls and other.calls
    assert {request_role(c) for c in main.calls} == {"strict"}
    assert {request_role(c) for c in other.calls} == {"lenient"}
    n_lenient = sum(1 for c in other.calls if c.choices is None)
    assert n_lenient == 3  # rounds 0-2, round 0 shared with LenientJudge
    models = {(r.role, r.model) for r in ctx.store.records()}
    assert models == {("strict", "fake-model"), ("lenient", "lenient-model")}


async def test_constrained_and_text_score_reading(tmp_path: Path, rubric7: Rubric, essays7: list[Essay]) -> None:
    essay = essays7[0]
    ctx = make_ctx(tmp_path / "c", FakeProvider())  # default caps: prefill + choices
    out = await _run(ctx, [essay], rubric7, ["SingleJudge"])
    record = ctx.store.get(call_key("SingleJudge", essay.id, "*", "single", 0))
    assert record is not None and record.answers == 1 + 4
    assert {r.mode for r in (record.trait_scores or {}).values()} == {"constrained_distribution"}
    assert "Scores:" not in (record.rationale or "") and all(s.score == 2 for s in out)

    fake = FakeProvider(script=scripted(SCORES), caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path / "t", fake)
    out = await _run(ctx, [essay], rubric7, ["SingleJudge", "StrictJudge"])
    record = ctx.store.get(call_key("SingleJudge", essay.id, "*", "single", 0))
    assert record is not None and record.answers == 1 and all(c.choices is None for c in fake.calls)
    assert {r.mode for r in (record.trait_scores or {}).values()} == {"parsed_text"}
    assert {s.trait: s.score for s in out if s.protocol == "StrictJudge"} == STRICT
    assert {s.trait: s.score for s in out if s.protocol == "SingleJudge"} == NEUTRAL


async def test_default_fake_script_answers_in_text_mode(tmp_path: Path, rubric7: Rubric, essays7: list[Essay]) -> None:
    ctx = make_ctx(tmp_path, FakeProvider(caps=TEXT_ONLY))
    out = await _run(ctx, essays7[:1], rubric7, ["ConsensusMAD[rounds=1]"])
    assert {s.mean_score for s in out} == {1.5} and {s.score for s in out} == {2}
    assert all(r.answers == 1 for r in ctx.store.records())

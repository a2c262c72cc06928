"""The LLM-as-judge meta-evaluator (the confidence paper, 3.4 and Appendix C.4) on scripted fake backends."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import make_ctx

from madrag.agents.context import essay_values, role_messages
from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.errors import ConfigError, ProviderError
from madrag.paper.confidence.judgment import META_SCHEMA, MetaJudgment, MetaParseError, parse_meta_judgment
from madrag.paper.confidence.meta_eval import (
    FOLLOWUP,
    META_PROTOCOL,
    META_ROLE,
    agent_prompts,
    judgments_frame,
    meta_evaluate,
    meta_key,
    meta_messages,
    run_meta_evaluation,
)
from madrag.providers.base import Capabilities, ChatRequest, ChatResponse, Message, Provider
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.records import AgentRecord, call_key
from madrag.rubric import Trait
from madrag.settings import PromptLayout

TEXT_ONLY = Capabilities(logprobs=True, max_top_logprobs=20, seed=True)
WITH_SCHEMA = Capabilities(logprobs=True, max_top_logprobs=20, seed=True, json_schema=True)
TRAIT = Trait(name="Ideas", min=0, max=3, levels={0: "none", 1: "weak", 2: "ok", 3: "strong"})
ESSAY = Essay(id="e1", text="Patience is waiting without complaining. I waited $5 worth of time at the fair.")
GOOD = {
    "instruction_following": 3,
    "justification_quality": 2,
    "evidence_grounding": 3,
    "critical_flag": 0,
    "critical_issues_description": "",
    "reasoning": "Stays in role and quotes the essay.",
}


def debater_record(
    role: str = "advocate", layout: PromptLayout = "seed", text: str = "The essay quotes 'waiting'.", round_: int = 1
) -> AgentRecord:
    """A debater record with the prompt its role really receives in ``layout``."""
    prompts = PromptLibrary()
    values = essay_values(prompts, ESSAY, TRAIT, "note", self_report=False)
    messages = role_messages(prompts, layout, f"{role}_system", f"{role}_user", {**values, "DEBATE_SO_FAR": ""})
    return AgentRecord(
        run_id="source",
        key=call_key("debate/adv_1", ESSAY.id, TRAIT.name, role, round_),
        essay_id=ESSAY.id,
        trait=TRAIT.name,
        protocol="debate/adv_1",
        role=role,
        round=round_,
        messages=messages,
        text=text,
    )


def answer(**changes: object) -> str:
    """The good judgment as JSON, with ``changes`` applied."""
    return json.dumps({**GOOD, **changes})


# -- parsing, Q and Q1 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        answer(),
        f"```json\n{answer()}\n```",
        f"Here is my evaluation:\n{answer()}\nI hope this helps.",
        f"{answer(instruction_following=1)} Revised: {answer(justification_quality=1)} Final: {answer()}",
        f'{answer()}\nNote: {{"unterminated": ',
    ],
)
def test_parse_reads_the_last_complete_object(text: str) -> None:
    j = parse_meta_judgment(text)
    assert (j.instruction_following, j.evidence_grounding, j.critical_flag) == (3, 3, 0)
    assert j.justification_quality == 2 and j.reasoning == GOOD["reasoning"]


def test_a_judgment_cut_in_its_free_text_is_read_with_its_four_judged_fields() -> None:
    """An answer stopped by the token limit in its reasoning still stated every score: they are read (what was
    thrown away before), the reasoning kept as far as it got; a cut before a judged field is written in full is
    still unusable, never guessed."""
    cut = answer(reasoning='The agent quotes "waiting" twice and then goes on at length about')[:-12]
    j = parse_meta_judgment(cut)
    assert (j.instruction_following, j.justification_quality, j.evidence_grounding, j.critical_flag) == (3, 2, 3, 0)
    assert j.reasoning.startswith('The agent quotes "waiting" twice') and j.reasoning.endswith("goes on at le")
    flagged = '{"instruction_following": 3, "justification_quality": 2, "evidence_grounding": 1, "critical_flag": 1'
    assert parse_meta_judgment(flagged + ', "critical_issues_description": "Invents a quo').q == 0
    with pytest.raises(MetaParseError, match="no complete JSON object"):
        parse_meta_judgment(flagged[:-1])  # the flag itself cut: not written in full


def test_parse_last_object_wins_over_earlier_ones() -> None:
    j = parse_meta_judgment(f"{answer(instruction_following=1)}\nOn reflection:\n{answer(instruction_following=2)}")
    assert j.instruction_following == 2


def test_parse_tolerates_null_text_fields_and_extra_keys() -> None:
    j = parse_meta_judgment(answer(critical_issues_description=None, reasoning=["a", "b"], note="extra"))
    assert j.critical_issues_description == "" and j.reasoning == '["a", "b"]'


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty answer"),
        ("The response is good overall.", "no JSON object"),
        (answer()[:40], "no complete JSON object"),  # cut before every judged field was written
        ('{"reasoning": "long and cut', "no complete JSON object"),
        (answer(instruction_following=4), "instruction_following = 4 out of range 1..3"),
        (answer(evidence_grounding=0), "evidence_grounding = 0 out of range 1..3"),
        (answer(critical_flag=2), "critical_flag = 2 out of range 0..1"),
        (answer(critical_flag=True), "critical_flag must be an integer, got true"),
        (answer(justification_quality="3"), 'justification_quality must be an integer, got "3"'),
        (answer(justification_quality=2.0), "justification_quality must be an integer, got 2.0"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "evidence_grounding"}), "missing field evidence_grounding"),
    ],
)
def test_parse_names_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(MetaParseError) as info:
        parse_meta_judgment(text)
    assert reason in str(info.value)


def test_bool_is_rejected_when_building_a_judgment_directly() -> None:
    with pytest.raises(ValueError):
        MetaJudgment.model_validate({**GOOD, "instruction_following": True})


@pytest.mark.parametrize(
    ("scores", "flag", "q1", "q"),
    [((3, 3, 3), 0, 9, 9), ((1, 2, 3), 0, 6, 6), ((3, 3, 3), 1, 9, 0), ((1, 1, 1), 0, 3, 3)],
)
def test_q1_sums_and_critical_flag_overrides_q(scores: tuple[int, int, int], flag: int, q1: int, q: int) -> None:
    j = MetaJudgment(
        instruction_following=scores[0],
        justification_quality=scores[1],
        evidence_grounding=scores[2],
        critical_flag=flag,
    )
    assert (j.q1, j.q) == (q1, q)


# -- prompt reconstruction (3.4.1) and the meta prompt (Figures 7, 8) ------------------------------------------


def test_agent_prompts_seed_layout_puts_role_instructions_in_the_system_prompt() -> None:
    system, user = agent_prompts(debater_record("skeptic", "seed"))
    assert system.startswith("You are a Skeptic Agent")
    assert ESSAY.text in user and "You are a Skeptic Agent" not in user


def test_agent_prompts_shared_prefix_layout_has_role_instructions_in_the_user_prompt() -> None:
    system, user = agent_prompts(debater_record("advocate", "shared_prefix"))
    assert system.startswith("You take part in a multi-agent system") and "Advocate" not in system
    assert "You are an Advocate Agent" in user and ESSAY.text in user
    assert user.index(ESSAY.text) < user.index("You are an Advocate Agent")


def test_agent_prompts_labels_assistant_turns() -> None:
    record = debater_record().model_copy(
        update={
            "messages": [
                Message(role="system", content="sys A"),
                Message(role="system", content="sys B"),
                Message(role="user", content="task"),
                Message(role="assistant", content="earlier"),
                Message(role="user", content="more"),
            ]
        }
    )
    assert agent_prompts(record) == ("sys A\n\nsys B", "task\n\n[The agent's earlier reply]\nearlier\n\nmore")


@pytest.mark.parametrize("layout", ["seed", "shared_prefix"])
def test_meta_prompt_holds_the_agents_prompts_and_response(layout: PromptLayout) -> None:
    prompts = PromptLibrary()
    record = debater_record("advocate", layout, text="  Strength: the essay says 'waiting without complaining'. ")
    system, user = agent_prompts(record)
    messages = meta_messages(prompts, record)
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content.startswith("You are a meta-evaluator assessing the quality")
    assert "critical_issues_description, and reasoning (2\u20133 sentences)." in messages[0].content
    task = messages[1].content
    assert task.startswith("# Agent Being Evaluated: Advocate\n")
    assert system in task and user in task and record.text.strip() in task
    assert "$5 worth" in task  # a literal $ in the essay survives the template
    assert task.endswith("Output ONLY the JSON object.")
    assert task.index(system) < task.index(user) < task.index(record.text.strip())


# -- json mode ---------------------------------------------------------------------------------------------------


async def test_json_mode_records_the_judgment(tmp_path: Path) -> None:
    fake = FakeProvider(script=[f"```json\n{answer()}\n```"], caps=WITH_SCHEMA)
    ctx = make_ctx(tmp_path, fake)
    source = debater_record("skeptic", round_=2)
    rec = await meta_evaluate(ctx, source, method="auto")
    assert rec.key == meta_key(source.key) == "meta/" + source.key
    assert (rec.run_id, rec.protocol, rec.role, rec.essay_id, rec.trait) == (
        "test",
        META_PROTOCOL,
        META_ROLE,
        "e1",
        "Ideas",
    )
    assert (rec.round, rec.index, rec.answers, rec.error) == (2, 0, 1, None)
    assert rec.context["evaluated_key"] == source.key and rec.context["evaluated_role"] == "skeptic"
    assert rec.context["evaluated_protocol"] == "debate/adv_1" and rec.context["method"] == "json"
    assert rec.context["judgment"] == GOOD and rec.rationale == GOOD["reasoning"]
    assert "distributions" not in rec.context
    (request,) = fake.calls
    assert request.json_schema == META_SCHEMA and request.temperature == 0.0 and request.seed == 1234
    assert request.messages == rec.messages == meta_messages(ctx.prompts, source)
    assert ctx.store.get(rec.key) == rec


async def test_json_mode_without_schema_support_sends_none(tmp_path: Path) -> None:
    fake = FakeProvider(script=[answer()], caps=TEXT_ONLY)
    await meta_evaluate(make_ctx(tmp_path, fake), debater_record(), method="json")
    assert fake.calls[0].json_schema is None


async def test_json_mode_follow_up_recovers_the_object(tmp_path: Path) -> None:
    fake = FakeProvider(script=["Solid response, I would give it high marks.", answer(critical_flag=1)], caps=TEXT_ONLY)
    rec = await meta_evaluate(make_ctx(tmp_path, fake), debater_record(), method="json")
    assert rec.error is None and rec.answers == 2 and rec.context["judgment"]["critical_flag"] == 1
    assert rec.text.startswith("Solid response") and "\n\n[follow-up]\n" in rec.text
    follow = fake.calls[1]
    assert follow.messages[:2] == fake.calls[0].messages
    assert follow.messages[2] == Message(role="assistant", content="Solid response, I would give it high marks.")
    assert follow.messages[3] == Message(role="user", content=FOLLOWUP) and follow.temperature == 0.0


async def test_json_mode_failure_is_recorded_never_imputed(tmp_path: Path) -> None:
    fake = FakeProvider(script=["no idea", answer(instruction_following=5)], caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, fake)
    summary = await run_meta_evaluation(ctx, [debater_record()], method="json")
    assert (summary.made, summary.reused, summary.failed, summary.total) == (1, 0, 1, 1)
    (rec,) = ctx.store.records()
    assert rec.error == "unusable judgment: instruction_following = 5 out of range 1..3"
    assert rec.context["judgment"] is None and rec.rationale is None and rec.answers == 2


# -- constrained mode ----------------------------------------------------------------------------------------------

REASONING = 'Quotes the essay twice; \\"waiting\\" is apt.'
PICK = {"instruction_following": "3", "justification_quality": "2", "evidence_grounding": "3", "critical_flag": "0"}


def constrained_script(request: ChatRequest) -> FakeReply:
    """A backend for constrained mode: 70 % on :data:`PICK`'s choice, then the reasoning up to its quote."""
    assert request.prefill is not None
    if request.choices is not None:
        field = request.prefill.rsplit('"', 2)[-2]
        best = PICK[field]
        lps = {c: (math.log(0.7) if c == best else math.log(0.3 / (len(request.choices) - 1))) for c in request.choices}
        return FakeReply(text="", choice_logprobs=lps)
    assert request.stop == ['"']
    so_far = request.prefill.split(', "reasoning": "', 1)[1]
    assert REASONING.startswith(so_far)
    return FakeReply(text=REASONING[len(so_far) :] + '"}')  # the fake cuts it at the first quote


async def test_constrained_mode_builds_the_object_field_by_field(tmp_path: Path) -> None:
    fake = FakeProvider(script=constrained_script)
    rec = await meta_evaluate(make_ctx(tmp_path, fake), debater_record(), max_tokens=123)
    # four fields, then the reasoning in three pieces: the stop at '"' cut it at each escaped quote
    assert rec.error is None and rec.answers == 7 and rec.context["method"] == "constrained"
    judgment = MetaJudgment.model_validate(rec.context["judgment"])
    assert (judgment.instruction_following, judgment.justification_quality, judgment.q1, judgment.q) == (3, 2, 8, 8)
    assert (
        judgment.reasoning == 'Quotes the essay twice; "waiting" is apt.' and judgment.critical_issues_description == ""
    )
    dists = rec.context["distributions"]
    assert set(dists) == set(PICK) and set(dists["critical_flag"]) == {"0", "1"}
    for field, dist in dists.items():
        assert sum(dist.values()) == pytest.approx(1.0) and max(dist, key=dist.get) == PICK[field]
    assert dists["justification_quality"]["2"] == pytest.approx(0.7)
    prefills = [c.prefill for c in fake.calls]
    assert prefills[0] == '{"instruction_following": '
    scores = '{"instruction_following": 3, "justification_quality": 2, "evidence_grounding": 3, "critical_flag": '
    assert prefills[3] == scores and prefills[4] == scores + '0, "reasoning": "'
    assert prefills[6] == prefills[4] + 'Quotes the essay twice; \\"waiting\\"'
    assert [c.choices for c in fake.calls] == [["1", "2", "3"]] * 3 + [["0", "1"]] + [None] * 3
    assert all(c.temperature == 0.0 and c.seed == 1234 for c in fake.calls)
    assert [c.max_tokens for c in fake.calls] == [1, 1, 1, 1, 123, 123, 123]
    assert parse_meta_judgment(rec.text).model_dump() == judgment.model_dump()  # the raw text is the object


async def test_constrained_mode_needs_prefill_and_choices(tmp_path: Path) -> None:
    fake = FakeProvider(script=[answer()], caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, fake)
    with pytest.raises(ConfigError, match="prefill and choices"):
        await run_meta_evaluation(ctx, [debater_record()], method="constrained")
    assert fake.calls == [] and ctx.store.count() == 0


# -- runs: resume, concurrency, backend failures, the frame ------------------------------------------------------


async def test_resume_makes_no_new_calls(tmp_path: Path) -> None:
    records = [debater_record("advocate"), debater_record("skeptic"), debater_record("advocate", round_=2)]
    first = make_ctx(tmp_path, FakeProvider(script=constrained_script))
    summary = await run_meta_evaluation(first, records)
    assert (summary.made, summary.reused, summary.failed, summary.total) == (3, 0, 0, 3)
    stored = {r.key: r for r in first.store.records()}
    first.store.close()
    again_fake = FakeProvider(script=constrained_script)
    again = make_ctx(tmp_path, again_fake)
    summary = await run_meta_evaluation(again, records)
    assert (summary.made, summary.reused, summary.total) == (0, 3, 3) and again_fake.calls == []
    assert {r.key: r for r in again.store.records()} == stored


class SlowJudge(Provider):
    """Answers every request after a pause, counting how many are in flight at once."""

    name = "slow"
    capabilities = TEXT_ONLY
    max_concurrency = 64

    def __init__(self) -> None:
        self.active = self.peak = 0

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        return ChatResponse(text=answer())


async def test_run_bounds_concurrency(tmp_path: Path) -> None:
    provider = SlowJudge()
    records = [debater_record(round_=r) for r in range(1, 8)]
    summary = await run_meta_evaluation(make_ctx(tmp_path, provider), records, concurrency=2)
    assert summary.made == 7 and provider.peak == 2


async def test_backend_failure_propagates_and_stores_nothing_for_it(tmp_path: Path) -> None:
    fake = FakeProvider(script=[FakeReply(text="", error=ProviderError("backend down"))], caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, fake)
    with pytest.raises(ProviderError, match="backend down"):
        await run_meta_evaluation(ctx, [debater_record()])
    assert ctx.store.count() == 0


async def test_a_meta_record_is_not_evaluated_again(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider(script=[answer()], caps=TEXT_ONLY))
    rec = await meta_evaluate(ctx, debater_record())
    with pytest.raises(ValueError, match="itself a meta-evaluation"):
        await meta_evaluate(ctx, rec)


async def test_judgments_frame(tmp_path: Path) -> None:
    fake = FakeProvider(script=[answer(), answer(critical_flag=1), "nothing", "still nothing"], caps=TEXT_ONLY)
    ctx = make_ctx(tmp_path, fake)
    sources = [debater_record("advocate"), debater_record("skeptic"), debater_record("advocate", round_=2)]
    for source in sources:  # one at a time, so the script's order is the records' order
        await meta_evaluate(ctx, source)
    frame = judgments_frame([*ctx.store.records(), sources[0]]).set_index("evaluated_key")
    assert len(frame) == 3 and list(frame.index) == [s.key for s in sources]
    adv, skp, bad = (frame.loc[s.key] for s in sources)
    assert (adv["instruction_following"], adv["q1"], adv["q"], adv["ok"]) == (3, 8, 8, True)
    assert (skp["critical_flag"], skp["q1"], skp["q"], skp["evaluated_role"]) == (1, 8, 0, "skeptic")
    assert bad["ok"] == False and pd.isna(bad["q"]) and pd.isna(bad["evidence_grounding"])  # noqa: E712
    assert bad["error"].startswith("unusable judgment: no JSON object")
    assert set(frame["protocol"]) == {"debate/adv_1"} and set(frame["method"]) == {"json"}
    assert pd.isna(adv["error"]) and frame["ok"].dtype == bool and frame["q"].dtype == "float64"


def test_judgments_frame_of_nothing_has_the_columns() -> None:
    frame = judgments_frame([])
    assert frame.empty and {"evaluated_key", "q1", "q", "ok", "error", "critical_flag"} <= set(frame.columns)

"""The evidence check in a run: per-call counts in the records, the Judge's feedback, the eval table, and the
placeholder settings (``--placeholders note|mask|none``, ``--evidence-check off|record|feedback``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import StubBank, make_ctx

from madrag.agents.calls import CallContext
from madrag.agents.evidence import check_answer, extract_quotes, placeholder_error_mentions
from madrag.data.essay import Essay
from madrag.evaluation.agreement import evaluate
from madrag.evaluation.evidence import EVIDENCE_TITLE, evidence_display, evidence_frame
from madrag.evaluation.report import write_report
from madrag.evaluation.tables import render_text
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, request_role
from madrag.records import AgentRecord
from madrag.rubric import Rubric
from madrag.settings import EvidenceCheck, ScoringSettings

INVENTED = "the writer never once mentioned how long the wait felt"


def _script(essay: Essay) -> FakeProvider:
    """Answers quoting the essay: the Advocate a true passage (re-cased), the Skeptic an invented one and a
    placeholder cited as an error, the Judge the true passage and a score."""
    true_quote = " ".join(essay.text.split()[2:10])

    def script(request: ChatRequest) -> FakeReply:
        role = request_role(request)
        if role == "advocate":
            return FakeReply(f'The essay shows it: "{true_quote.upper()}".')
        if role == "skeptic":
            return FakeReply(f'The writer says "{INVENTED}". The name @CAPS1 is misspelled.')
        return FakeReply(f'The Advocate is right that "{true_quote}" is relevant.\nFinal score: 2')

    return FakeProvider(script=script, caps=Capabilities())


async def _run(tmp_path: Path, essay: Essay, rubric: Rubric, mode: EvidenceCheck) -> CallContext:
    settings = ScoringSettings(evidence_check=mode)
    ctx = make_ctx(tmp_path, _script(essay), bank=StubBank([essay]), settings=settings)
    await run_scoring(ctx, [essay], rubric, [get_protocol("MAD")])
    return ctx


def _by_role(ctx: CallContext, trait: str) -> dict[str, AgentRecord]:
    return {r.role: r for r in ctx.store.records() if r.trait == trait}


async def test_record_mode_counts_quotes_per_call_and_changes_no_prompt(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay, trait = essays7[0], rubric7.traits[0].name
    ctx = await _run(tmp_path, essay, rubric7, "record")
    records = _by_role(ctx, trait)
    advocate, skeptic, judge = records["advocate"].evidence, records["skeptic"].evidence, records["judge"].evidence
    assert advocate is not None and (advocate.quotes_found, advocate.quotes_verified) == (1, 1)
    assert skeptic is not None and skeptic.quotes_unverified == 1 and skeptic.unverified_quotes == [INVENTED]
    assert skeptic.placeholder_errors == 1
    assert judge is not None and (judge.quotes_found, judge.quotes_unverified) == (1, 0)
    judge_prompt = "\n".join(m.content for m in records["judge"].messages)
    assert "Evidence check" not in judge_prompt and INVENTED in judge_prompt  # the transcript, no feedback

    frame = evidence_frame(list(ctx.store.records()), ["MAD"])
    rows = {r["role"]: r for r in frame.to_dict("records")}
    n_traits = len(rubric7.traits)
    assert list(rows) == ["advocate", "skeptic", "judge"] and set(frame["protocol"]) == {"MAD"}
    assert rows["skeptic"]["unverified_rate"] == 1.0 and rows["skeptic"]["quotes"] == n_traits
    assert rows["advocate"]["unverified_rate"] == 0.0 and rows["skeptic"]["calls_with_placeholder_errors"] == n_traits
    shown = evidence_display(frame)
    assert shown.loc["MAD / skeptic", "unverified %"] == "100.0%"


async def test_feedback_mode_tells_the_judge_the_unverified_quotes(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay, trait = essays7[0], rubric7.traits[0].name
    ctx = await _run(tmp_path, essay, rubric7, "feedback")
    judge = _by_role(ctx, trait)["judge"]
    prompt = "\n".join(m.content for m in judge.messages)
    feedback = prompt[prompt.index("Evidence check") :]
    assert f'- "{INVENTED}" (Skeptic 1)' in feedback
    assert "Check each claim against the essay text itself" in feedback
    assert ctx.settings.evidence_check == "feedback"


async def test_off_mode_checks_no_quote_but_still_counts_placeholder_errors(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    ctx = await _run(tmp_path, essays7[0], rubric7, "off")
    skeptic = _by_role(ctx, rubric7.traits[0].name)["skeptic"].evidence
    assert skeptic is not None and not skeptic.checked and skeptic.quotes_found == 0
    assert skeptic.placeholder_errors == 1
    shown = evidence_display(evidence_frame(list(ctx.store.records()), ["MAD"]))
    assert shown.loc["MAD / skeptic", "unverified %"] == "off"


async def test_eval_and_report_show_the_unverified_quote_rate_per_role(
    tmp_path: Path, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay = essays7[0]
    ctx = make_ctx(tmp_path, _script(essay), bank=StubBank([essay]))
    protocols = [get_protocol("MAD"), get_protocol("MADRAG")]
    ctx.store.add_essays([essay])
    config = {"rubric": rubric7.model_dump(mode="json"), "protocols": [p.describe() for p in protocols]}
    ctx.store.set_meta("config", config)
    await run_scoring(ctx, [essay], rubric7, protocols)
    ctx.store.close()
    ev = evaluate(tmp_path, bootstrap=0)
    assert list(ev.evidence["protocol"]) == ["MAD"] * 3 + ["MADRAG"] * 3  # the shared debate counts for both
    text = render_text(ev, width=200)
    assert "evidence check" in text and "MADRAG / skeptic" in text and "100.0%" in text
    html = write_report(tmp_path, bootstrap=0).read_text(encoding="utf-8")
    assert EVIDENCE_TITLE in html and f"not found in the essay: 1 (\u201c{INVENTED}\u201d)" in html
    assert "placeholder cited as an error: 1" in html


def test_settings_differ_so_runs_do_not_resume_into_each_other() -> None:
    dumps = {m: ScoringSettings(evidence_check=m).model_dump(mode="json") for m in ("off", "record", "feedback")}
    assert len({str(sorted(d.items())) for d in dumps.values()}) == 3
    assert ScoringSettings().evidence_check == "record"
    assert ScoringSettings().placeholders == "note"  # the papers' prompts (the confidence paper's Appendix C)


def test_old_records_without_counts_still_load() -> None:
    record = AgentRecord.model_validate({"run_id": "r", "key": "k", "essay_id": "e", "trait": "t", "protocol": "MA",
                                         "role": "judge"})  # fmt: skip
    assert record.evidence is None


@pytest.mark.parametrize(
    ("sentence", "count"),
    [
        ("The writer misspells @CAPS1 twice.", 1),
        ("Using [name] so often is confusing.", 1),
        ("@PERSON1 is a placeholder, not an error.", 0),
        ("@CAPS1 and @CAPS2 are placeholders and I do not count them as mistakes.", 0),
        ("The essay has many spelling errors. @CAPS1 helped the writer.", 0),
        ("Capitalization of @CAPS1 is wrong. The @NUM1 is odd.", 2),
    ],
)
def test_placeholder_error_mentions(sentence: str, count: int) -> None:
    assert placeholder_error_mentions(sentence) == count


def test_apostrophes_and_short_scare_quotes_are_not_quotes() -> None:
    text = "The writer's 'voice' isn't strong; the word \"patience\" and 'it is worth the wait' appear."
    assert extract_quotes(text) == ["it is worth the wait"]
    assert check_answer(text, "Waiting: it is worth the wait.").quotes_verified == 1

"""The seeds' prompts by default: every role's system prompt ends with the anonymization context (the confidence paper
Appendix C, "Anonymization $ANON_CONTEXT"), the debaters never see a confidence (the MADRAG paper Algorithm 1: only the
Judge gets c^A and c^K), and the Judge is not told how long its rationale should be (the confidence paper's Figure
6)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from tests.helpers import StubBank, make_ctx

from madrag.agents.prompts import PromptLibrary
from madrag.cli.score import score
from madrag.data import Essay, split_by_fold
from madrag.errors import ConfigError
from madrag.pipeline.job import ScoreJob, execute
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, default_script, request_role
from madrag.providers.spec import ProviderSpec
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore


@pytest.fixture
def sample(essays7: list[Essay]) -> tuple[list[Essay], list[Essay]]:
    split = split_by_fold(essays7, 0)
    return split.eval[:1], split.pool[:200]


async def _madrag_calls(
    tmp_path: Path,
    rubric: Rubric,
    sample: tuple[list[Essay], list[Essay]],
    settings: ScoringSettings,
    fake: FakeProvider,
) -> dict[str, list[ChatRequest]]:
    essays, pool = sample
    ctx = make_ctx(tmp_path, fake, StubBank(pool), settings=settings)
    await run_scoring(ctx, essays, rubric, [get_protocol("MADRAG")])
    by_role: dict[str, list[ChatRequest]] = {}
    for request in fake.calls:
        by_role.setdefault(request_role(request), []).append(request)
    assert set(by_role) == {"advocate", "skeptic", "judge"}
    return by_role


def _all_text(request: ChatRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def test_default_placeholders_are_the_seeds_anonymization_context() -> None:
    assert ScoringSettings().placeholders == "note"
    assert inspect.signature(score).parameters["placeholders"].default == "note"


async def test_every_role_system_prompt_ends_with_the_anonymization_context(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    by_role = await _madrag_calls(tmp_path, rubric7, sample, ScoringSettings(), FakeProvider())
    for role, requests in by_role.items():
        for request in requests:
            system = request.messages[0]
            assert system.role == "system"
            last = system.content.splitlines()[-1]
            assert last.startswith("Anonymization "), (
                role
            )  # the confidence paper's Appendix C: "Anonymization $ANON_CONTEXT"
            assert (
                "@CAPS1" in last and "ignore" in last.lower()
            )  # what they are, and to ignore them (the confidence paper's 4.4)


async def test_placeholders_none_drops_the_label_and_the_context(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    by_role = await _madrag_calls(tmp_path, rubric7, sample, ScoringSettings(placeholders="none"), FakeProvider())
    for requests in by_role.values():
        assert all("Anonymization" not in _all_text(r) for r in requests)


async def test_the_skeptic_never_sees_the_advocates_confidence(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    by_role = await _madrag_calls(tmp_path, rubric7, sample, ScoringSettings(), FakeProvider())
    for request in by_role["skeptic"]:
        text = _all_text(request)
        assert "[Advocate, round 1]" in text  # the Advocate's argument is there (Skeptic(x, a))
        assert "confidence" not in text.lower()
    for request in by_role["judge"]:  # the Judge still gets both confidences (Judge(x, F, tau, c^A, c^K))
        text = _all_text(request)
        assert "[Advocate, round 1, confidence 0.90]" in text and "[Skeptic, round 1, confidence 0.90]" in text


async def test_a_self_reported_confidence_is_cut_from_what_the_next_debater_reads(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    def script(request: ChatRequest) -> str | FakeReply:
        if request_role(request) in ("advocate", "skeptic"):
            return "The essay keeps to its topic with a concrete example.\nConfidence: 0.85"
        return default_script(request)

    no_logprobs = Capabilities(logprobs=False, prefill=True, choices=True, seed=True)
    fake = FakeProvider(script=script, caps=no_logprobs)
    essays, pool = sample
    ctx = make_ctx(tmp_path, fake, StubBank(pool))
    assert ctx.self_report_confidence
    await run_scoring(ctx, essays, rubric7, [get_protocol("MADRAG[adv_r2]")])
    debaters = [r for r in fake.calls if request_role(r) in ("advocate", "skeptic")]
    later = [r for r in debaters if "Debate transcript:" in _all_text(r)]
    assert later  # every turn after the first reads the turns before it
    for request in later:
        transcript = _all_text(request).split("Debate transcript:", 1)[1]
        assert "0.85" not in transcript and "concrete example" in transcript
    judge = next(r for r in fake.calls if request_role(r) == "judge")
    assert "confidence 0.85" in _all_text(judge)


async def test_the_judge_is_not_told_how_long_to_write_and_ends_on_the_final_score(
    tmp_path: Path, rubric7: Rubric, sample: tuple[list[Essay], list[Essay]]
) -> None:
    by_role = await _madrag_calls(tmp_path, rubric7, sample, ScoringSettings(), FakeProvider())
    trait = {t.name: t for t in rubric7.traits}
    for request in by_role["judge"]:
        user = request.messages[-1].content
        assert "short rationale" not in user.lower()
        t = trait[request.trait or ""]
        assert user.endswith(f"Final score: N\nwhere N is an integer between {t.min} and {t.max}.")


def test_no_template_asks_for_a_short_answer() -> None:
    prompts = PromptLibrary()
    for name in ("judge_user", "sa_user"):
        assert "short" not in prompts.text(name).lower()


def _job(tmp_path: Path, settings: ScoringSettings) -> ScoreJob:
    data = tmp_path / "essays.csv"
    data.write_text(
        "id,text,fold,A\n"
        + "".join(f"e{i},@CAPS1 wrote essay {i} about a park.,{i % 2},{1 + i % 3}\n" for i in range(6)),
        encoding="utf-8",
    )
    rubric = tmp_path / "rubric.json"
    rubric.write_text(
        '{"name": "r", "prompt": "Write about a park.", "traits": [{"name": "A", "min": 1, "max": 3, '
        '"levels": {"1": "weak", "2": "ok", "3": "strong"}}]}',
        encoding="utf-8",
    )
    return ScoreJob(
        data=data,
        rubric=rubric,
        run_dir=tmp_path / "run",
        limit=2,
        protocols=["MAD"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
        embedder="hashing",
        settings=settings,
    )


async def test_a_run_made_under_the_old_default_keeps_it_and_never_resumes_into_the_new_one(tmp_path: Path) -> None:
    """A run stores every setting, so one made when ``none`` was the default recorded ``placeholders: none``: the
    new default cannot slip into it. The same command under the new default is refused (settings differ); with
    ``--placeholders none`` it resumes unchanged, every call answered from the store."""
    old = _job(tmp_path, ScoringSettings(placeholders="none"))
    first = await execute(old)
    assert first.stats.made > 0
    store = RunStore(tmp_path / "run" / "store.sqlite", read_only=True)
    config = store.get_meta("config")
    assert config is not None and config["settings"]["placeholders"] == "none"
    before = {r.key: r.messages for r in store.records()}
    assert all("Anonymization" not in m.content for messages in before.values() for m in messages)
    store.close()
    with pytest.raises(ConfigError, match=r"different settings \(settings\.placeholders\)"):
        await execute(_job(tmp_path, ScoringSettings()))
    again = await execute(old)
    assert again.resumed and again.stats.made == 0
    scored = [(s.essay_id, s.trait, s.score) for s in first.scores]
    assert [(s.essay_id, s.trait, s.score) for s in again.scores] == scored
    store = RunStore(tmp_path / "run" / "store.sqlite", read_only=True)
    assert {r.key: r.messages for r in store.records()} == before
    store.close()

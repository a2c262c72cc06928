"""The largest prompt a run can send, checked before its first call: every protocol rehearsed on the run's longest
essay with its real templates, the longest exemplars per level and debate turns at their token limits; a run
whose largest prompt cannot fit the server's context refused in one line naming the limits that would fit, and
those limits, as printed, accepted (by a new run and by a resumed one). Against the stub server answering as
llama.cpp's (``/props``, ``/tokenize``: one token per word)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from tests.unit.protocols.test_mts_template import HOLISTIC, synthetic_template

from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.pipeline.job import ScoreJob, execute
from madrag.pipeline.worst_case import LongestBank, longest_essay, worst_prompts
from madrag.protocols import available, get_protocol
from madrag.providers import ProviderSpec
from madrag.providers.base import Capabilities
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings
from madrag.testing.stub_server import StubServer

TEXT = Capabilities(logprobs=False)
CHOICES = Capabilities(logprobs=True, max_top_logprobs=20, prefill=True, choices=True, seed=True)


def _pool(essays: list[Essay]) -> list[Essay]:
    return [e for e in essays if e.rater_scores][:60]


@pytest.mark.parametrize("caps", [TEXT, CHOICES], ids=["text", "choices"])
def test_every_protocol_is_rehearsed(tmp_path: Path, essays7: list[Essay], rubric7: Rubric, caps: Capabilities) -> None:
    protocols = [get_protocol(n) for n in available()]
    essay = longest_essay(essays7[:20])
    found = asyncio.run(
        worst_prompts(protocols, essay, _pool(essays7), rubric7, PromptLibrary(), ScoringSettings(), {"*": caps})
    )
    assert {p.protocol for p in found} == {p.name for p in protocols}  # every protocol sends at least one prompt
    authors = get_protocol(f"MTS[template={synthetic_template(tmp_path / 'template.xlsx')}]")
    holistic = asyncio.run(
        worst_prompts([authors], essay, [], HOLISTIC, PromptLibrary(), ScoringSettings(), {"*": caps})
    )
    assert max(len(p.shown) for p in holistic) == 1  # a score turn shows its conversation's quotes turn
    assert all(essay.text.split()[0] in p.text for p in found if p.role != "meta_evaluator")
    judge = next(p for p in found if p.protocol == "MADRAG" and p.role == "judge" and p.answer.setting)
    settings = ScoringSettings()
    # the debate's two turns at the debaters' limit, and the longest pool essay of each level as its exemplars
    assert [s.tokens for s in judge.shown] == [settings.debater_max_tokens] * 2
    assert judge.answer.setting == "judge_max_tokens" and judge.uses("debater_max_tokens") == 2
    ideas = next(t for t in rubric7.traits if t.name == judge.trait)
    for level in LongestBank(_pool(essays7), rubric7, settings).per_level(essay, ideas):
        assert level.exemplar is not None and level.exemplar.text.split()[-1] in judge.text
    rounds = [p for p in found if p.protocol == "ConsensusMAD" and p.role == "strict" and p.answer.setting]
    assert max(len(p.shown) for p in rounds) == 2  # a round shows both agents' previous answers


def _job(asap: Path, essays: list[Essay], run_dir: Path, base_url: str, **settings: int) -> ScoreJob:
    return ScoreJob(
        essays=essays,
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        eval_fold=None,
        protocols=["MAD"],
        provider=ProviderSpec(kind="openai", model="stub-model", base_url=base_url, timeout_s=20),
        settings=ScoringSettings(**settings),
        cache_dir=run_dir.parent / "cache",
        response_cache=False,
    )


def _limits(message: str) -> dict[str, int]:
    return {
        m.group(1).replace("-", "_"): int(m.group(2)) for m in re.finditer(r"--([a-z-]+-max-tokens) (\d+)", message)
    }


async def test_a_refusal_names_limits_that_fit_and_they_run_as_printed(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    run_dir = tmp_path / "run"
    essays = essays7[:3]
    with StubServer(capacity=1, latency_s=0.0, props=True, n_ctx=3000, debater_tokens=40) as server:
        with pytest.raises(ConfigError) as refused:
            await execute(_job(asap, essays, run_dir, server.base_url))
        assert server.stats().requests == 0 and not run_dir.exists()
        message = str(refused.value)
        assert "MAD's judge prompt for essay" in message and "2048 for 2 earlier answers" in message, message
        assert "token limits may change on resume" in message
        fits = _limits(message)
        assert set(fits) == {"debater_max_tokens", "judge_max_tokens"}
        # each limit alone, as printed, passes the check and the run scores
        for setting, value in fits.items():
            done = await execute(_job(asap, essays, tmp_path / setting, server.base_url, **{setting: value}))
            assert len(done.scores) == 3 * 4 and done.stats.failed_calls == 0


async def test_a_resumed_run_takes_new_token_limits_and_logs_them(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    """A run resumed with a debater limit its server's context cannot hold: the check refuses it before any call,
    the limit it names is accepted in the same run folder, recorded in run.log and kept for a later resume."""
    run_dir = tmp_path / "run"
    essays = essays7[:2]
    with StubServer(capacity=1, latency_s=0.0, props=True, n_ctx=1100, debater_tokens=40) as server:
        first = _job(asap, essays, run_dir, server.base_url, debater_max_tokens=64, judge_max_tokens=64)
        await execute(first.model_copy(update={"ids": [essays[0].id]}))
        asked = server.stats().requests
        with pytest.raises(ConfigError) as refused:
            await execute(_job(asap, essays, run_dir, server.base_url, debater_max_tokens=400, judge_max_tokens=64))
        assert server.stats().requests == asked  # refused before any call
        fit = _limits(str(refused.value)).get("debater_max_tokens")
        assert fit is not None, refused.value
        done = await execute(_job(asap, essays, run_dir, server.base_url, debater_max_tokens=fit, judge_max_tokens=64))
    assert done.resumed and len(done.scores) == 2 * 4 and done.stats.failed_calls == 0
    log = (run_dir / "run.log").read_text(encoding="utf-8")
    assert f"token limits changed this session: debater_max_tokens 64 -> {fit}" in log
    assert "debater_max_tokens 64 -> 400" not in log  # the refused session changed nothing
    from madrag.pipeline.recorded import recorded_job

    assert recorded_job(run_dir).settings.debater_max_tokens == fit  # madrag resume continues with them

"""On llama.cpp's own server with one slot and a small context: a run whose largest Judge prompt (the longest essay,
the longest exemplars, the debate at the debaters' limits) exceeds the context is refused before any scoring call,
naming the limit that fits, and that limit, as printed, runs; a run whose one long essay overflows the context at
run time (the server does not say its context to madrag here, so nothing refuses it earlier) scores every other
essay, records and names the failed one with its essay, trait and role, and resumes to the same end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from madrag.data.essay import Essay
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.providers.server_props import ServerProps
from madrag.records import AgentRecord
from madrag.rubric import Rubric, load_rubric
from madrag.settings import ScoringSettings

try:
    from tests.servers import SERVED_MODEL, llama_server_fixture
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from servers import SERVED_MODEL, llama_server_fixture  # type: ignore[no-redef,import-not-found,unused-ignore]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

N_CTX = 2048
llama_server = llama_server_fixture(scope="module", n_ctx=N_CTX, threads=1)


def _ideas(asap: Path, tmp_path: Path) -> Path:
    rubric = json.loads((asap / "rubric_set7.json").read_text(encoding="utf-8"))
    rubric["traits"] = [t for t in rubric["traits"] if t["name"] == "Ideas"]
    (tmp_path / "rubric.json").write_text(json.dumps(rubric), encoding="utf-8")
    return tmp_path / "rubric.json"


def _score(llama_server: str, asap: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MADRAG_NO_KEY"}
    cmd = [
        sys.executable, "-m", "madrag.cli", "score",
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(_ideas(asap, tmp_path)),
        "--limit", "2", "--protocol", "MADRAG", "--judge-max-tokens", "16", "--exemplar-max-words", "30",
        "--provider", "openai", "--model", SERVED_MODEL, "--base-url", llama_server, "--api-key-env", "MADRAG_NO_KEY",
        "--embedder", "hashing", "--run-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
        *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def test_a_judge_prompt_over_the_context_is_refused_before_any_call_and_its_fix_runs(
    llama_server: str, asap: Path, tmp_path: Path
) -> None:
    refused = _score(llama_server, asap, tmp_path)  # two debate turns of 1,024 tokens cannot fit 2,048
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2, refused.stderr
    assert "MADRAG's judge prompt for essay" in said and "counted by the server's /tokenize" in said, said
    assert f"context of {N_CTX} tokens per slot" in said and not (tmp_path / "run").exists()
    fit = re.search(r"or score with (--debater-max-tokens \d+)", said)
    assert fit is not None, said
    done = _score(llama_server, asap, tmp_path, *fit.group(1).split())  # the limit as printed
    assert done.returncode == 0, done.stderr
    assert "end: complete" in (tmp_path / "run" / "run.log").read_text(encoding="utf-8")


class _Unsaid(OpenAICompatProvider):
    """llama.cpp's server as madrag sees a server that does not say its context (behind a proxy, say)."""

    async def server_props(self) -> ServerProps | None:
        return None


async def test_one_essay_over_the_context_at_run_time_fails_alone_and_is_named(
    llama_server: str, asap: Path, essays7: list[Essay], tmp_path: Path
) -> None:
    rubric = Rubric(traits=[t for t in load_rubric(asap / "rubric_set7.json").traits if t.name == "Ideas"])
    short = sorted(essays7, key=lambda e: len(e.text))[:3]
    long = short[2].model_copy(update={"id": "long", "text": "\n\n".join(e.text for e in essays7[:20])})
    job = ScoreJob(
        essays=[*short, long],
        rubric=rubric,
        run_dir=tmp_path / "run",
        eval_fold=None,
        protocols=["MA"],
        provider=ProviderSpec(kind="openai", model=SERVED_MODEL, base_url=llama_server, timeout_s=300),
        cache_dir=tmp_path / "cache",
        response_cache=False,
        max_failures=1,
        settings=ScoringSettings(judge_max_tokens=16),
    )
    provider = _Unsaid(SERVED_MODEL, base_url=llama_server, api_key_env="MADRAG_NO_KEY", max_concurrency=1)
    try:
        assert (await provider.count_tokens(long.text) or 0) > N_CTX  # the long essay alone overflows
        result = await execute(job, backend=provider)
        again = await execute(job, backend=provider)  # a resume finishes the same way
    finally:
        await provider.aclose()
    assert {s.essay_id for s in result.scores} == {e.id for e in short}  # every other essay scored
    assert result.stats.failed_calls == 1 and again.stats.failed_calls == 1 and again.resumed
    records = [r for r in _records(tmp_path / "run") if r.failed]
    assert [(r.essay_id, r.trait, r.role, r.protocol) for r in records] == [("long", "Ideas", "judge", "MA")] * 2
    assert records[0].error is not None and "does not fit the server's context" in records[0].error
    assert "exceed" in records[0].error  # llama.cpp's own words, kept


def _records(run_dir: Path) -> list[AgentRecord]:
    from madrag.evaluation.run import open_store

    store = open_store(run_dir)
    try:
        return list(store.records())
    finally:
        store.close()

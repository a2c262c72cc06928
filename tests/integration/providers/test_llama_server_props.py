"""llama.cpp's own server with one slot says its slots and context (``/props``) and counts tokens
(``/tokenize``): a short MADRAG run with default settings sends one request at a time and finishes without a
timeout-retry, and a run whose prompt and answer cannot fit the slot's context is refused before any call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from madrag.evaluation.run import open_store
from madrag.providers.openai_compat import OpenAICompatProvider

try:
    from tests.servers import SERVED_MODEL, llama_server_fixture
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from servers import SERVED_MODEL, llama_server_fixture  # type: ignore[no-redef,import-not-found,unused-ignore]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

# one slot (llama_server's default --parallel 1), one thread: a busy CPU makes two spin against each other
llama_server = llama_server_fixture(scope="module", threads=1)


async def test_the_server_says_its_slots_context_and_tokens(llama_server: str) -> None:
    provider = OpenAICompatProvider(SERVED_MODEL, base_url=llama_server, api_key_env="MADRAG_NO_KEY")
    try:
        props = await provider.server_props()
        tokens = await provider.count_tokens("The bus was late, so I learned to wait.")
    finally:
        await provider.aclose()
    assert props is not None and props.slots == 1 and props.n_ctx is not None and props.n_ctx >= 512
    # the model and the build it says it runs, for the run's log (issue 48)
    assert props.model == SERVED_MODEL and props.build  # its --alias; xllamacpp says "b0-unknown"
    assert tokens is not None and 5 <= tokens <= 20


def _score(llama_server: str, asap: Path, tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    rubric = json.loads((asap / "rubric_set7.json").read_text(encoding="utf-8"))
    rubric["traits"] = [t for t in rubric["traits"] if t["name"] == "Ideas"]
    (tmp_path / "rubric.json").write_text(json.dumps(rubric), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "MADRAG_NO_KEY"}
    cmd = [
        sys.executable, "-m", "madrag.cli", "score",
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(tmp_path / "rubric.json"),
        "--limit", "2",
        "--provider", "openai", "--model", SERVED_MODEL, "--base-url", llama_server, "--api-key-env", "MADRAG_NO_KEY",
        "--embedder", "hashing", "--debater-max-tokens", "16", "--exemplar-max-words", "30",
        "--run-dir", str(tmp_path / name), "--cache-dir", str(tmp_path / "cache"),
        *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def test_a_default_run_on_one_slot_finishes_without_a_timeout_retry(
    llama_server: str, asap: Path, tmp_path: Path
) -> None:
    done = _score(llama_server, asap, tmp_path, "run", "--judge-max-tokens", "16")
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "run" / "run.log").read_text(encoding="utf-8")
    assert "retry" not in log and "timed out" not in log and "end: complete" in log
    store = open_store(tmp_path / "run")
    try:
        found = store.get_meta("preflight")
    finally:
        store.close()
    assert found["*"]["server"]["total_slots"] == 1
    # run.log names the concurrency resolved from the server's one slot and the model and build it reports
    assert "concurrency 1 (the server's 1 slot; the default 8 would wait in its queue)" in log
    assert f"model {found['*']['server']['model']}, build {found['*']['server']['build']}" in log


def test_a_prompt_over_the_context_is_refused_before_any_call(llama_server: str, asap: Path, tmp_path: Path) -> None:
    done = _score(llama_server, asap, tmp_path, "big", "--judge-max-tokens", "100000")
    assert done.returncode == 2
    assert "answer tokens" in done.stderr and "tokens per slot" in done.stderr, done.stderr
    assert not (tmp_path / "big").exists()


async def test_the_meta_evaluator_keeps_to_the_one_slot(llama_server: str, tmp_path: Path) -> None:
    """Issue 48: the confidence study's meta-evaluator reads the server's slots as ``madrag score`` does (one
    judgment at a time on one slot, not the default 8, which waited in its queue until their timeout) and logs
    its session in its folder's run.log."""
    try:
        from tests.e2e.confidence.test_confidence_study import make_debate_run
    except ImportError:
        from e2e.confidence.test_confidence_study import make_debate_run  # type: ignore[no-redef,import-not-found,unused-ignore]

    from madrag.paper.confidence.job import MetaJob, execute_meta
    from madrag.providers.spec import ProviderSpec

    run_dir, out = tmp_path / "run", tmp_path / "meta"
    make_debate_run(run_dir)
    spec = ProviderSpec(kind="openai", model="gpt-4o-mini", base_url=llama_server, api_key_env="MADRAG_NO_KEY")
    done = await execute_meta(
        MetaJob(run_dir=run_dir, out_dir=out, provider=spec, method="json", limit=1, max_tokens=8)
    )
    assert done.summary.total == 2
    log = (out / "run.log").read_text(encoding="utf-8")
    assert "concurrency 1 (the server's 1 slot; the default 8 would wait in its queue)" in log, log
    assert f"model {SERVED_MODEL}" in log and "timed out" not in log and "end: complete" in log
    store = open_store(out)
    try:
        judged = list(store.records())
    finally:
        store.close()
    assert judged and {(r.model, r.requested_model) for r in judged} == {(SERVED_MODEL, "gpt-4o-mini")}

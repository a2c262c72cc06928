"""The confidence study end to end: a debate run with planted confidence/quality structure -> meta-evaluation
job (resumable, own store) -> features, correlations checked against scipy, top features, files, CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from madrag.errors import ConfigError, InputError
from madrag.paper.confidence import job as job_module
from madrag.paper.confidence.job import MetaJob, debater_records, execute_meta
from madrag.paper.confidence.study import run_study, save_study
from madrag.providers.base import Capabilities, ChatRequest, Message, TokenLogprob
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.records import AgentRecord
from madrag.store import RunStore

N_ESSAYS = 12
QUALITY = re.compile(r"QUALITY=(\d)")


def make_debate_run(run_dir: Path, seed: int = 0) -> dict[str, int]:
    """A run store of Advocate and Skeptic records whose judged quality falls as the spread of their first three
    token logprobs grows (the paper's strongest signal); returns key -> planted quality."""
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True)
    store = RunStore(run_dir / "store.sqlite")
    store.set_meta("run_id", "debate-run")
    planted: dict[str, int] = {}
    for i in range(N_ESSAYS):
        for role in ("advocate", "skeptic"):
            spread = float(rng.uniform(0.0, 3.0))
            quality = 3 if spread < 1.0 else 2 if spread < 2.0 else 1
            n = int(rng.integers(8, 30))
            lps = list(-rng.uniform(0.0, 0.5, size=n))
            lps[0], lps[1], lps[2] = -0.05, -0.05 - spread, -0.05 - spread / 2
            key = f"debate/both/e{i}/Ideas/{role}/r1"
            text = f"Argument QUALITY={quality} " + " ".join(f"w{j}" for j in range(n - 2))
            store.put(
                AgentRecord(
                    run_id="debate-run",
                    key=key,
                    essay_id=f"e{i:02d}",
                    trait="Ideas",
                    protocol="debate/both",
                    role=role,
                    messages=[
                        Message(
                            role="system", content=f"You are {'an Advocate' if role == 'advocate' else 'a Skeptic'}"
                        ),
                        Message(role="user", content=f"Essay {i} text."),
                    ],
                    text=text,
                    tokens=[TokenLogprob(token=f" t{j}", logprob=lp) for j, lp in enumerate(lps)],
                )
            )
            planted[key] = quality
    # a Judge record and a failed debater record: neither is judged
    store.put(
        AgentRecord(run_id="debate-run", key="judge/e00", essay_id="e00", trait="Ideas", protocol="MAD", role="judge")
    )
    store.put(
        AgentRecord(
            run_id="debate-run", key="bad", essay_id="e00", trait="Ideas", protocol="debate/both", role="advocate",
            error="backend failed",
        )
    )  # fmt: skip
    store.close()
    return planted


def judge_script(request: ChatRequest) -> FakeReply:
    """The evaluator: reads the planted quality from the response it is shown; flags quality 1 as critical."""
    found = QUALITY.findall(request.messages[-1].content)
    q = int(found[-1]) if found else 2
    answer = {
        "instruction_following": q,
        "justification_quality": q,
        "evidence_grounding": max(1, q - 1) if q < 3 else 3,
        "critical_flag": int(q == 1),
        "critical_issues_description": "hallucinated quote" if q == 1 else "",
        "reasoning": "Planted.",
    }
    return FakeReply(text="```json\n" + json.dumps(answer) + "\n```")


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    """The meta job's backend replaced by a scripted fake provider (no retries)."""
    provider = FakeProvider(script=judge_script, caps=Capabilities(logprobs=True, max_top_logprobs=5, json_schema=True))

    def managed(_spec: object, _cache: object) -> ManagedProvider:
        return ManagedProvider(provider, RetryPolicy(retries=0, base_delay_s=0.0, max_delay_s=0.0))

    monkeypatch.setattr(job_module, "managed", managed)
    return provider


async def test_meta_job_then_study(tmp_path: Path, fake_backend: FakeProvider) -> None:
    run_dir = tmp_path / "run"
    planted = make_debate_run(run_dir)
    job = MetaJob(run_dir=run_dir, method="json")
    first = await execute_meta(job)
    assert (first.selected, first.summary.made, first.summary.failed) == (2 * N_ESSAYS, 2 * N_ESSAYS, 0)
    assert len(fake_backend.calls) == 2 * N_ESSAYS
    assert all(c.temperature == 0.0 and c.json_schema is not None for c in fake_backend.calls)
    again = await execute_meta(job)  # resumed: nothing asked twice
    assert again.resumed and again.summary.made == 0 and again.summary.reused == 2 * N_ESSAYS
    assert len(fake_backend.calls) == 2 * N_ESSAYS
    with pytest.raises(ConfigError, match="different settings"):
        await execute_meta(job.model_copy(update={"seed": 99}))

    study = run_study(run_dir, job.meta_dir)
    assert len(study.features) == 2 * N_ESSAYS and study.judgments is not None and study.judgments["ok"].all()
    merged = study.features.set_index("key")
    qs = np.array([planted[k] for k in merged.index])
    # Q as the paper defines it: the sum of the three dimensions, 0 when the critical flag is raised
    judged = study.judgments.set_index("evaluated_key").loc[merged.index]
    expected_q = np.where(qs == 1, 0, 2 * qs + np.where(qs < 3, np.maximum(1, qs - 1), 3))
    assert judged["q"].to_numpy().tolist() == expected_q.tolist()
    corr = study.correlations
    assert corr is not None
    for role in ("advocate", "skeptic"):
        mask = (merged["role"] == role).to_numpy()
        x = (merged["first3_max"] - merged["first3_min"]).to_numpy()[mask]
        rho = stats.spearmanr(x, expected_q[mask]).statistic
        row = corr[(corr["group"] == role) & (corr["target"] == "q") & (corr["feature"] == "first3_range")].iloc[0]
        assert row["n"] == mask.sum() and row["spearman"] == pytest.approx(rho) and rho < -0.6
        crit = (qs[mask] == 1).astype(int)
        auc_row = corr[
            (corr["group"] == role) & (corr["target"] == "critical_flag") & (corr["feature"] == "first3_range")
        ]
        assert auc_row["auroc"].iloc[0] == pytest.approx(roc_auc_score(crit, x))
    top = study.top
    assert top is not None
    best = top[(top["group"] == "advocate") & (top["target"] == "q") & (top["rank"] == 1)].iloc[0]
    pool = corr[(corr["group"] == "advocate") & (corr["target"] == "q")]["spearman"]
    # the confidence paper's Appendix B: ranked by Spearman correlation itself, highest first
    assert study.meta["rank_by"] == "signed" and best["spearman"] == pytest.approx(pool.max())
    written = save_study(study, tmp_path / "out")
    names = {p.name for p in written}
    assert {"features.csv", "correlations.csv", "top_features.csv", "trajectories.png", "confidence.md"} <= names
    assert {"figure3.png", "figure3_distribution.csv", "pass_rates.csv"} <= names  # the confidence paper's Figure 3
    assert (tmp_path / "out" / "trajectories.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (tmp_path / "out" / "confidence.md").read_text()
    assert "Top 3 confidence features" in report and "ranked by Spearman rho" in report


def test_selection_and_bad_input(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    make_debate_run(run_dir)
    records = debater_records(run_dir, ["skeptic"], limit=3)
    assert {r.role for r in records} == {"skeptic"} and len({r.essay_id for r in records}) == 3
    assert all(r.error is None for r in debater_records(run_dir, ["advocate"]))
    with pytest.raises(InputError, match="advocate and/or skeptic"):
        debater_records(run_dir, ["judge"])
    with pytest.raises(InputError, match="no run"):
        debater_records(tmp_path / "nowhere", ["advocate"])


def test_analyze_without_meta_from_the_command_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    make_debate_run(run_dir)
    cmd = [sys.executable, "-m", "madrag.cli", "paper", "confidence", "analyze", "--run-dir", str(run_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no meta-evaluation" in proc.stdout
    out = run_dir / "confidence"
    assert (out / "features.csv").is_file() and (out / "trajectories.png").is_file()
    assert not (out / "correlations.csv").exists()
    bad = subprocess.run([*cmd, "--rank-by", "loud"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --rank-by must be signed or abs")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("method", ["constrained", "json"])
def test_score_meta_eval_analyze_from_the_command_line(asap: Path, tmp_path: Path, method: str) -> None:
    run_dir = tmp_path / "run"
    scored = _cli(
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir), "--cache-dir", str(tmp_path / "cache"), "--protocol", "MAD", "--provider", "fake",
        "--limit", "2",
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    judged = _cli(
        "paper", "confidence", "meta-eval", "--run-dir", str(run_dir), "--provider", "fake", "--method", method
    )
    assert judged.returncode == 0, judged.stderr
    # 2 essays x 4 traits x (Advocate + Skeptic)
    assert "16 responses: 16 judged now, 0 already judged, 0 unusable" in judged.stdout.replace("\n", " ")
    again = _cli(
        "paper", "confidence", "meta-eval", "--run-dir", str(run_dir), "--provider", "fake", "--method", method
    )
    assert again.returncode == 0 and "0 judged now, 16 already judged" in again.stdout.replace("\n", " ")
    store = RunStore(run_dir / "meta" / "store.sqlite")
    try:
        metas = list(store.records())
    finally:
        store.close()
    assert len(metas) == 16 and all(r.error is None and r.context["method"] == method for r in metas)
    if method == "constrained":
        assert all(r.answers == 5 and set(r.context["distributions"]) == {"instruction_following",
                   "justification_quality", "evidence_grounding", "critical_flag"} for r in metas)  # fmt: skip
    analyzed = _cli("paper", "confidence", "analyze", "--run-dir", str(run_dir))
    assert analyzed.returncode == 0, analyzed.stderr
    summary = (run_dir / "confidence" / "judgment_summary.csv").read_text().splitlines()
    assert summary[0].startswith("role,responses,judged,unusable") and len(summary) == 3
    other = _cli(
        "paper", "confidence", "meta-eval", "--run-dir", str(run_dir), "--provider", "fake", "--max-tokens", "50"
    )
    assert other.returncode == 2 and "different settings" in other.stderr


async def test_a_meta_eval_refused_before_its_first_call_leaves_no_folder(tmp_path: Path) -> None:
    """A dead server: refused before anything is written, so the fixed command works on the same --out; a store
    bound to other settings names --out, the option meta-eval has."""
    from tests.servers import free_port

    from madrag.errors import ProviderError
    from madrag.providers.spec import ProviderSpec

    run_dir, out = tmp_path / "run", tmp_path / "meta"
    make_debate_run(run_dir)
    dead = ProviderSpec(kind="openai", model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", timeout_s=5)
    with pytest.raises(ProviderError, match="cannot reach"):
        await execute_meta(MetaJob(run_dir=run_dir, out_dir=out, provider=dead, method="json"))
    assert not out.exists()
    fake = ProviderSpec(kind="fake")
    done = await execute_meta(MetaJob(run_dir=run_dir, out_dir=out, provider=fake, method="json", limit=1))
    assert done.summary.total == 2 and (out / "store.sqlite").is_file()
    with pytest.raises(ConfigError, match=r"different settings.*give another --out") as refused:
        await execute_meta(MetaJob(run_dir=run_dir, out_dir=out, provider=fake, method="json", seed=99))
    assert "--run-dir" not in str(refused.value)


async def test_a_larger_max_tokens_on_the_same_out_makes_the_cut_judgments_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judgment cut off by the token limit before its scores is unusable; the same command with a larger
    --max-tokens on the same --out makes exactly those again (the usable ones are kept), and the study reads the
    new ones."""

    def script(request: ChatRequest) -> FakeReply:
        found = QUALITY.findall(request.messages[1].content)  # the judged response (a follow-up asks again)
        if request.max_tokens < 100 and found and found[-1] == "3":  # a long answer: cut before its scores
            return FakeReply(text='```json\n{"reasoning": "The agent quotes the essay and then', finish_reason="length")
        return judge_script(request)

    provider = FakeProvider(script=script, caps=Capabilities(json_schema=True))
    policy = RetryPolicy(retries=0, base_delay_s=0.0, max_delay_s=0.0)
    monkeypatch.setattr(job_module, "managed", lambda _spec, _cache: ManagedProvider(provider, policy))
    run_dir = tmp_path / "run"
    planted = make_debate_run(run_dir)
    n_cut = sum(q == 3 for q in planted.values())
    job = MetaJob(run_dir=run_dir, method="json", max_tokens=50)
    first = await execute_meta(job)
    assert 0 < n_cut < 2 * N_ESSAYS and first.summary.failed == first.summary.truncated == n_cut
    again = await execute_meta(job.model_copy(update={"max_tokens": 400}))
    assert again.resumed and again.summary.failed == 0
    assert again.summary.made == n_cut and again.summary.reused == 2 * N_ESSAYS - n_cut
    judgments = run_study(run_dir, job.meta_dir).judgments
    assert judgments is not None and len(judgments) == 2 * N_ESSAYS and judgments["ok"].all()


async def test_a_method_the_backend_cannot_do_leaves_no_folder(tmp_path: Path, fake_backend: FakeProvider) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "meta"
    make_debate_run(run_dir)
    with pytest.raises(ConfigError, match="'constrained' needs a backend with prefill and choices"):
        await execute_meta(MetaJob(run_dir=run_dir, out_dir=out, method="constrained"))
    assert not out.exists() and fake_backend.calls == []


async def test_the_meta_evaluator_keeps_to_the_servers_slots_and_logs_its_session(tmp_path: Path) -> None:
    """Issue 48: a llama.cpp-like server with 2 slots gets at most 2 judgments at once (the default 8 would wait
    in its queue, where their timeout runs), read as ``madrag score`` reads it, and the meta folder has a run.log
    naming the resolved concurrency, the server's model and build, the non-default settings and madrag's version;
    each judgment records the model its answers named beside the one asked for."""
    from madrag.pipeline.run_log import RUN_LOG, read_status
    from madrag.providers.spec import ProviderSpec
    from madrag.testing.stub_server import StubServer

    run_dir, out = tmp_path / "run", tmp_path / "meta"
    make_debate_run(run_dir)
    with StubServer(capacity=2, latency_s=0.05, props=True, model="smollm2") as server:
        spec = ProviderSpec(kind="openai", model="gpt-4o-mini", base_url=server.base_url, logprobs=False)
        done = await execute_meta(MetaJob(run_dir=run_dir, out_dir=out, provider=spec, method="json", limit=4))
        seen = server.stats()
    assert done.summary.made == done.summary.total == 8
    assert seen.max_in_flight == 2  # the server's slots, never more
    log = (out / RUN_LOG).read_text(encoding="utf-8")
    assert "start: 8 records x meta-evaluation; backend openai model gpt-4o-mini options {" in log
    assert "'logprobs': False" in log and "concurrency not given" in log and "madrag 0.1.0 (" in log
    assert "scoring settings {'method': 'json'}" in log and "job {'limit': 4}" in log
    assert (
        "backend: openai (gpt-4o-mini): concurrency 2 (the server's 2 slots; the default 8 would wait in its queue); "
        "the server says: 2 slots, 4096 tokens of context per slot, model smollm2.gguf, build b0000-stub"
    ) in log
    assert read_status(out).status == "complete"
    store = RunStore(out / "store.sqlite", read_only=True)
    try:
        judged = list(store.records())
        assert store.get_meta("madrag")["version"] == "0.1.0"
    finally:
        store.close()
    assert {(r.model, r.requested_model) for r in judged} == {("smollm2", "gpt-4o-mini")}


async def test_a_judgment_over_the_servers_context_is_refused_before_the_folder(tmp_path: Path) -> None:
    """Issue 48: the meta-evaluator reads the server's context as ``madrag score`` does: a judgment's prompt and
    its --max-tokens over one slot's context is refused in one line, with the numbers, before any folder."""
    from madrag.providers.spec import ProviderSpec
    from madrag.testing.stub_server import StubServer

    run_dir, out = tmp_path / "run", tmp_path / "meta"
    make_debate_run(run_dir)
    with StubServer(capacity=1, latency_s=0.0, props=True, n_ctx=300) as server:
        spec = ProviderSpec(kind="openai", model="m", base_url=server.base_url)
        with pytest.raises(
            ConfigError,
            match=r"meta-evaluator's prompt for .*/tokenize.* 300 tokens per slot.*--max-tokens$",
        ):
            await execute_meta(MetaJob(run_dir=run_dir, out_dir=out, provider=spec, method="json", limit=1))
        assert server.stats().requests == 0
    assert not out.exists()

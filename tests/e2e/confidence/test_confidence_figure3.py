"""The confidence paper's Figure 3 (the meta-evaluator's score distribution per dimension, pass rates per role) and
Table 1
over two sets (one run each, ranked per set, never pooled), on synthetic judgments and fake-provider runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.e2e.confidence.test_confidence_study import (  # noqa: F401 (fake_backend: a fixture)
    fake_backend,
    make_debate_run,
)
from typer.testing import CliRunner

from madrag.cli.app import app
from madrag.errors import InputError
from madrag.paper.confidence.figure3 import pass_rates, save_figure3, score_distribution
from madrag.paper.confidence.job import MetaJob, execute_meta
from madrag.paper.confidence.sets import run_sets, save_sets
from madrag.paper.confidence.study import run_study, top_display
from madrag.providers.fake import FakeProvider

PNG = b"\x89PNG\r\n\x1a\n"


def _judgments() -> pd.DataFrame:
    """Four advocate and four skeptic judgments (one unusable), scores chosen by hand."""
    rows = [
        ("advocate", 3, 3, 3, True),
        ("advocate", 3, 2, 3, True),
        ("advocate", 2, 1, 3, True),
        ("advocate", 3, 3, 2, True),
        ("skeptic", 1, 3, 3, True),
        ("skeptic", 1, 2, 3, True),
        ("skeptic", 3, 3, 3, True),
        ("skeptic", None, None, None, False),
    ]
    return pd.DataFrame(
        [
            {
                "evaluated_role": r,
                "instruction_following": i,
                "justification_quality": j,
                "evidence_grounding": e,
                "ok": ok,
            }
            for r, i, j, e, ok in rows
        ]
    ).astype(dict.fromkeys(("instruction_following", "justification_quality", "evidence_grounding"), "float64"))


def test_the_distribution_counts_each_score_over_usable_judgments() -> None:
    dist = score_distribution(_judgments()).set_index(["set", "role", "dimension", "score"])
    assert dist.loc[("all", "all", "instruction_following", 3), "count"] == 4  # of the 7 usable
    assert dist.loc[("all", "all", "instruction_following", 3), "share"] == pytest.approx(4 / 7)
    assert dist.loc[("all", "all", "instruction_following", 1), "count"] == 2
    assert dist.loc[("all", "skeptic", "evidence_grounding", 3), "share"] == pytest.approx(1.0)
    assert dist.loc[("all", "advocate", "justification_quality", 1), "count"] == 1
    shares = dist.xs(("all", "all", "evidence_grounding"), level=("set", "role", "dimension"))["share"]
    assert shares.sum() == pytest.approx(1.0)


def test_pass_rates_per_role_count_a_score_of_two_or_more() -> None:
    rates = pass_rates(_judgments()).set_index(["set", "role", "dimension"])
    assert rates.loc[("all", "advocate", "instruction_following"), "pass_rate"] == pytest.approx(1.0)
    assert rates.loc[("all", "skeptic", "instruction_following"), "pass_rate"] == pytest.approx(1 / 3)
    assert rates.loc[("all", "skeptic", "instruction_following"), "judged"] == 3  # the unusable one is left out
    assert rates.loc[("all", "advocate", "justification_quality"), "pass_rate"] == pytest.approx(3 / 4)
    assert rates.loc[("all", "advocate", "justification_quality"), "at_max_rate"] == pytest.approx(2 / 4)
    strict = pass_rates(_judgments(), pass_min=3).set_index(["set", "role", "dimension"])
    assert strict.loc[("all", "advocate", "instruction_following"), "pass_rate"] == pytest.approx(3 / 4)


def test_figure3_is_written_with_its_numbers(tmp_path: Path) -> None:
    paths = save_figure3(_judgments(), tmp_path)
    assert {p.name for p in paths} == {"figure3.png", "figure3_distribution.csv", "pass_rates.csv"}
    assert (tmp_path / "figure3.png").read_bytes()[:8] == PNG
    saved = pd.read_csv(tmp_path / "figure3_distribution.csv")
    assert len(saved) == 3 * 3 * 3  # roles (advocate, skeptic, all) x dimensions x scores
    nothing = _judgments().assign(ok=False)
    assert save_figure3(nothing, tmp_path / "none") == []


async def _judged_run(run_dir: Path, seed: int) -> None:
    make_debate_run(run_dir, seed=seed)
    await execute_meta(MetaJob(run_dir=run_dir, method="json"))


async def test_table1_over_two_sets_ranks_each_set_on_its_own_run(
    tmp_path: Path,
    fake_backend: FakeProvider,  # noqa: F811
) -> None:
    runs = [tmp_path / "set7", tmp_path / "set8"]
    for seed, run in enumerate(runs):
        await _judged_run(run, seed)
    result = run_sets(runs, labels=["Set 7", "Set 8"])
    assert list(result.studies) == ["Set 7", "Set 8"]
    for name, run in zip(("Set 7", "Set 8"), runs, strict=True):
        alone = run_study(run, run / "meta")
        assert alone.top is not None
        mine = result.table1[result.table1["set"] == name].drop(columns="set").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, top_display(alone.top))  # per set, not pooled
    per_set = len(top_display(result.studies["Set 7"].top))  # type: ignore[arg-type]
    assert len(result.table1) == 2 * per_set
    written = save_sets(result, tmp_path / "out")
    assert (tmp_path / "out" / "figure3.png").read_bytes()[:8] == PNG
    assert (tmp_path / "out" / "Set-7" / "top_features.csv").is_file() and len(written) == 9
    assert (tmp_path / "out" / "table2.csv").is_file() and list(result.table2["set"]) == ["Set 7", "Set 8"]
    rates = pd.read_csv(tmp_path / "out" / "pass_rates.csv")
    assert set(rates["set"]) == {"Set 7", "Set 8", "all"}
    pooled = rates[(rates["set"] == "all") & (rates["role"] == "all")]
    assert pooled["judged"].tolist() == [2 * len(result.studies["Set 7"].judgments)] * 3  # type: ignore[arg-type]
    judged = result.judgments[result.judgments["ok"]]
    expected = float(np.mean(judged["instruction_following"] >= 2))
    got = pooled[pooled["dimension"] == "instruction_following"]["pass_rate"].iloc[0]
    assert got == pytest.approx(expected)
    assert "## Set 8" in (tmp_path / "out" / "table1.md").read_text()
    cli_out = tmp_path / "cli"  # `madrag confidence sets` writes the same table (in process: its exit code and files)
    args = ["paper", "confidence", "sets", *map(str, runs), "--labels", "Set 7,Set 8", "--out", str(cli_out)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, (done.output, done.exception)
    pd.testing.assert_frame_equal(pd.read_csv(cli_out / "table1.csv"), pd.read_csv(tmp_path / "out" / "table1.csv"))


def test_sets_need_two_judged_runs_with_distinct_labels(tmp_path: Path) -> None:
    runs = [tmp_path / "a", tmp_path / "b"]
    for seed, run in enumerate(runs):
        make_debate_run(run, seed=seed)
    with pytest.raises(InputError, match="two or more runs"):
        run_sets(runs[:1])
    with pytest.raises(InputError, match="labels must differ"):
        run_sets(runs, labels=["x", "x"])
    with pytest.raises(InputError, match="no meta-evaluation of"):
        run_sets(runs)
    cmd = [
        sys.executable,
        "-m",
        "madrag.cli",
        "paper",
        "confidence",
        "sets",
        *map(str, runs),
        "--out",
        str(tmp_path / "o"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no meta-evaluation of" in proc.stderr


async def test_sets_without_a_usable_judgment_name_only_the_files_they_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every judgment unreadable: no Figure 3 is drawn, and neither table1.md nor the command's output names its
    files (nor prints an empty table as if full)."""
    from madrag.paper.confidence import job as job_module
    from madrag.providers.base import Capabilities
    from madrag.providers.fake import FakeReply
    from madrag.providers.policy import ManagedProvider, RetryPolicy

    garbage = FakeProvider(script=lambda _request: FakeReply("no JSON here"), caps=Capabilities(json_schema=True))
    policy = RetryPolicy(retries=0, base_delay_s=0.0, max_delay_s=0.0)
    monkeypatch.setattr(job_module, "managed", lambda _spec, _cache: ManagedProvider(garbage, policy))
    runs = [tmp_path / "set7", tmp_path / "set8"]
    for seed, run in enumerate(runs):
        await _judged_run(run, seed)
    out = tmp_path / "cli"
    done = CliRunner().invoke(app, ["paper", "confidence", "sets", *map(str, runs), "--out", str(out)])
    assert done.exit_code == 0, (done.output, done.exception)
    for name in ("figure3.png", "figure3_distribution.csv", "pass_rates.csv"):
        assert not (out / name).exists()
    text = " ".join(done.output.split())
    assert "Figure 3 was not drawn: 0 of the 48 judgments" in text and "no feature could be ranked" in text
    assert "wrote 6 files and folders" in text and "figure3.png" not in text.split("wrote", 1)[1]
    table1 = (out / "table1.md").read_text(encoding="utf-8")
    assert "Figure 3 was not drawn" in table1 and "`figure3.png`" not in table1
    assert "no feature could be ranked" in table1

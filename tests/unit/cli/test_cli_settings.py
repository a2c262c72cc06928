"""The scoring settings' CLI options are generated from the settings model (one place to add a setting): their
names, help, choices and defaults come from :class:`ScoringSettings`; a field added to a settings model is an
option of ``madrag score`` and part of the run's configuration without another edit; ``--ray`` takes an optional
value by its command class, not by rewriting ``sys.argv``."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

import madrag.cli.score as score_module
from madrag.api.scoring import run_job
from madrag.cli.app import app
from madrag.cli.groups import flag, model_group, with_groups
from madrag.cli.score import ablate, ablate_consensus, score, score_command
from madrag.cli.score_options import ScoreCommand
from madrag.distributed.driver import RayExecutor
from madrag.distributed.options import RayOptions
from madrag.errors import ConfigError, InputError
from madrag.pipeline.job import ScoreJob
from madrag.protocols import ABLATION, CONSENSUS_ABLATION
from madrag.settings import ScoringSettings, stored_settings
from madrag.store import RunStore

_DONE = SimpleNamespace(stats=SimpleNamespace(failed_calls=0))
"""What the patched runner returns: a run without failed calls."""


class GreetingSettings(ScoringSettings):
    """The one edit that adds a setting: a field (type, default, description) on the settings model."""

    greeting: Literal["none", "hello"] = Field(default="none", description="Greet the essay's writer first.")
    # a default that changes what runs did: the value that reproduces a run made before the field existed
    politeness: int = Field(default=1, ge=0, description="How polite.", json_schema_extra={"before": 0})


def _options(command: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(command).parameters)


@pytest.mark.parametrize("command", [score, ablate, ablate_consensus])
def test_every_setting_is_an_option_with_the_models_default(command: Any) -> None:
    options = _options(command)
    for name, field in ScoringSettings.model_fields.items():
        assert name in options, name
        assert options[name].default == field.default
        info = options[name].annotation.__metadata__[0]
        assert info.help and info.help.split()[0] in (field.description or "")


def test_the_variants_differ_only_in_their_default_protocols(monkeypatch: pytest.MonkeyPatch, asap: Path) -> None:
    assert list(_options(score)) == list(_options(ablate)) == list(_options(ablate_consensus))
    jobs: list[ScoreJob] = []

    def record(job: ScoreJob) -> SimpleNamespace:
        jobs.append(job)
        return _DONE

    monkeypatch.setattr(score_module, "run_cli_job", record)
    args = ["--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json")]
    for name in ("score", "ablate", "ablate-consensus"):
        done = CliRunner().invoke(app, [name, *args])
        assert done.exit_code == 0, done.output
    assert [(j.protocols, j.protocol_preset) for j in jobs] == [
        (["MADRAG"], None),
        (list(ABLATION), "paper-ablation"),
        (list(CONSENSUS_ABLATION), "consensus-ablation"),
    ]


def test_a_literal_setting_is_checked_by_the_flag_that_names_its_values() -> None:
    built = model_group("settings", ScoringSettings).build
    defaults = {name: field.default for name, field in ScoringSettings.model_fields.items()}
    assert built({**defaults, "report": "argmax"}).report == "argmax"
    with pytest.raises(InputError, match=r"^--placeholders must be one of note, mask, none; got 'x'$"):
        built({**defaults, "placeholders": "x"})


def _typer(command: Any) -> typer.Typer:
    one = typer.Typer(add_completion=False)
    one.command(cls=ScoreCommand)(command)
    return one


def test_a_new_setting_is_an_option_of_score_and_in_the_run_config(tmp_path: Path, asap: Path) -> None:
    """The add-a-setting path: ``GreetingSettings`` adds two fields and nothing else; ``score`` built with its
    options takes ``--greeting`` (choices from its Literal, help from its description) and the run records it."""
    command = score_command("score", ["MAD"], "Score.", model_group("settings", GreetingSettings))
    options = _options(command)
    assert options["greeting"].default == "none" and flag("greeting") == "--greeting"
    runner = CliRunner()
    helped = runner.invoke(_typer(command), ["--help"], env={"COLUMNS": "200"})
    assert "--greeting" in helped.output and "Greet the essay's writer first." in helped.output
    run_dir = tmp_path / "run"
    args = [
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir),
        "--cache-dir", str(tmp_path / "cache"),
        "--provider", "fake",
        "--limit", "1",
    ]  # fmt: skip
    done = runner.invoke(_typer(command), [*args, "--greeting", "hello"])
    assert done.exit_code == 0, done.output
    store = RunStore(run_dir / "store.sqlite", read_only=True)
    try:
        config = store.get_meta("config")
    finally:
        store.close()
    assert config["settings"]["greeting"] == "hello" and config["settings"]["politeness"] == 1
    refused = runner.invoke(_typer(command), [*args, "--greeting", "hi"])
    assert refused.exit_code != 0 and "--greeting must be one of none, hello; got 'hi'" in str(refused.exception)


def test_a_run_made_before_a_setting_existed_reads_it_as_its_old_behaviour(tmp_path: Path, asap: Path) -> None:
    """A run made with the settings model before the new fields existed resumes under the model with them at the
    values that reproduce it (the default, or the field's ``before``), and only at those values."""
    base = {
        "data": asap / "training_set_rel3_sets7_8.tsv",
        "rubric": asap / "rubric_set7.json",
        "run_dir": tmp_path / "run",
        "cache_dir": tmp_path / "cache",
        "limit": 1,
        "protocols": ["MAD"],
        "provider": {"kind": "fake"},
    }
    first = run_job(ScoreJob.model_validate(base), progress=False)
    assert not first.resumed
    filled = stored_settings({}, GreetingSettings)
    assert filled["greeting"] == "none" and filled["politeness"] == 0
    as_before = GreetingSettings(politeness=0)
    again = run_job(ScoreJob.model_validate({**base, "settings": as_before}), progress=False)
    assert again.resumed and again.stats.made == 0
    for other, name in (
        (GreetingSettings(politeness=0, greeting="hello"), "greeting"),
        (GreetingSettings(), "politeness"),
    ):
        with pytest.raises(ConfigError, match=rf"different settings \(settings\.{name}\)"):
            run_job(ScoreJob.model_validate({**base, "settings": other}), progress=False)


def test_with_groups_names_a_missing_group() -> None:
    group = model_group("settings", ScoringSettings)

    def command(other: int = 1) -> None: ...

    with pytest.raises(TypeError, match="settings"):
        with_groups(group)(command)


@pytest.mark.parametrize(
    ("given", "expected"),
    [(["--ray"], RayOptions()), (["--ray", "10.0.0.1:6379"], RayOptions(address="10.0.0.1:6379")), ([], None)],
)
def test_ray_alone_is_a_local_instance(
    given: list[str], expected: RayOptions | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    jobs: list[ScoreJob] = []
    monkeypatch.setattr(score_module, "run_cli_job", lambda job: jobs.append(job) or _DONE)
    args = ["score", "--data", "d.csv", "--rubric", "r.json", "--run-dir", str(tmp_path), *given, "--limit", "2"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    executor = jobs[0].executor
    assert (executor.options if isinstance(executor, RayExecutor) else executor) == expected and jobs[0].limit == 2

"""``madrag resume RUN``: continue a run with the settings, inputs and prompt templates it recorded (any release's
run; one made before runs kept their templates needs ``--prompts-dir`` with that release's texts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from madrag.cli.options import CacheDirOpt
from madrag.cli.score import exit_on_failed_calls, run_cli_job
from madrag.cli.score_options import DEFAULT_CACHE
from madrag.pipeline.recorded import recorded_job


def resume_command(
    run_dir: Annotated[Path, typer.Argument(help="The run folder to continue.")],
    prompts_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder of the prompt templates the run was made with; only for a run that keeps no copy in "
            "RUN/prompts (made by a release before runs kept one). The refusal names the templates that differ."
        ),
    ] = None,
    cache_dir: CacheDirOpt = DEFAULT_CACHE,
    debater_max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Token limit of Advocate/Skeptic messages from now on (default: the run's last)."),
    ] = None,
    judge_max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Token limit of the Judge's answer from now on (default: the run's last)."),
    ] = None,
) -> None:
    """Continue the run in RUN_DIR exactly as it was made: its settings, essays, backend and prompt templates come
    from the run folder; only the calls it has left are made (none when it is finished).

    The token limits may change (each record keeps the limit it was made with; run.log says what changed).

    Exit code 0: every call answered. 2: an error. 3: calls failed after their retries (resume again).
    """
    job = recorded_job(run_dir, cache_dir=cache_dir, prompts_dir=prompts_dir)
    limits = {"debater_max_tokens": debater_max_tokens, "judge_max_tokens": judge_max_tokens}
    if changed := {k: v for k, v in limits.items() if v is not None}:
        job = job.model_copy(update={"settings": job.settings.model_copy(update=changed)})
    exit_on_failed_calls(run_cli_job(job))

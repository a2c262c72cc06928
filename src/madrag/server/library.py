"""The one place the server calls the madrag library: rubrics, essays, the scoring job, and reading a run.

Everything the web layer needs from the pipeline goes through these functions (and, for reading runs,
:mod:`madrag.server.runs.library_runs`), so the server has no scoring
path of its own: a run started here is the same ``ScoreJob`` run by the same ``execute`` into the same run store
as ``madrag score``, and is read back by the same ``evaluation.run`` reader.

Inputs are kept in the run directory: ``inputs/rubric.json`` and ``inputs/essays.jsonl`` (one JSON object per
essay in the layout the library's table loader reads: ``id, text, prompt, fold, rater<i>_<trait>``). A separate
exemplar pool (the shipped ASAP essays, with ``pool-`` ids) is the job's explicit pool (``ScoreJob.pool``), kept in
``inputs/pool.jsonl`` (one :class:`Essay` JSON per line, as the pipeline keeps an in-memory pool); every essay
uploaded is scored. (Runs made before kept that pool in ``essays.jsonl`` under fold 1 and scored fold 0; they
resume so.)
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

import madrag
from madrag.data.essay import Essay
from madrag.data.loaders import essay_from_row, load_asap, load_essays, load_table
from madrag.data.reading import decode_text
from madrag.data.refusals import Refusals
from madrag.data.row_limit import count_rows
from madrag.data.shipped import ASAP_DATA, ASAP_RUBRICS
from madrag.errors import InputError, RubricError
from madrag.evaluation.costs.estimate import estimate_run
from madrag.evaluation.costs.prices import ANY_MODEL, Price
from madrag.evaluation.costs.render import estimate_to_dict
from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import raw_csv_text
from madrag.pipeline.hooks import RunHooks
from madrag.pipeline.job import ScoreJob, essays_jsonl
from madrag.pipeline.migrations import open_store
from madrag.protocols import available, get_protocol
from madrag.protocols.base import TraitScore
from madrag.providers import Provider, ProviderSpec, make_provider, spec_identity
from madrag.retrieval.embedder import EmbedderName
from madrag.rubric import Rubric, load_rubric, rubric_from_mapping
from madrag.server.config import Limits
from madrag.server.http.refusals import check_count, row_id
from madrag.settings import ScoringSettings

PoolMode = Literal["none", "folds", "same", "asap"]
POOL_PREFIX = "pool-"
TINY_MODEL_NOTE = (
    "The embedded SmolLM2-135M model shows the pipeline working end to end; it is far too small to give valid "
    "scores. For real scoring use an OpenAI-compatible server."
)

# -- rubrics -----------------------------------------------------------------------------------------------


def shipped_rubrics(asap_dir: Path | None) -> dict[str, Rubric]:
    """The rubrics shipped with the ASAP data (sets 7 and 8), by id; empty when the data is not there."""
    if asap_dir is None:
        return {}
    files = {f"asap-set{essay_set}": asap_dir / name for essay_set, name in ASAP_RUBRICS.items()}
    return {rid: load_rubric(path) for rid, path in files.items() if path.is_file()}


def rubric_from_upload(data: bytes, filename: str) -> Rubric:
    """A rubric from an uploaded JSON or YAML file (by its suffix; JSON when it has none)."""
    suffix = Path(filename).suffix.lower()
    suffix = suffix if suffix in {".json", ".yaml", ".yml"} else ".json"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"rubric{suffix}"
        path.write_bytes(data)
        rubric = load_rubric(path)
    return rubric.model_copy(update={"name": rubric.name if rubric.name != "rubric" else Path(filename).stem})


def rubric_from_dict(raw: Any) -> Rubric:
    """A rubric from a mapping (the API's JSON body, or the page's form); a RubricError names the field."""
    if not isinstance(raw, dict):
        raise RubricError("a rubric must be an object with a 'traits' list")
    return rubric_from_mapping(raw, "")


def rubric_json(rubric: Rubric) -> str:
    """A rubric as the JSON the library loads."""
    return rubric.model_dump_json(indent=2, exclude_none=True)


# -- essays ------------------------------------------------------------------------------------------------


@dataclass
class EssayUpload:
    """Essays read from an upload, and the rows refused (summarised: counts per reason, the first few)."""

    essays: list[Essay]
    refused: Refusals = field(default_factory=Refusals)

    @property
    def has_scores(self) -> bool:
        return any(e.rater_scores for e in self.essays)

    @property
    def has_folds(self) -> bool:
        return bool(self.essays) and all(e.fold is not None for e in self.essays)


def _suffix(filename: str, fmt: str) -> str:
    if fmt in {"csv", "jsonl"}:
        return "." + fmt
    if fmt == "asap":
        return ".tsv"
    suffix = Path(filename).suffix.lower()
    return suffix if suffix in {".csv", ".jsonl", ".ndjson", ".tsv"} else ".csv"


def _rows(data: str, suffix: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(CSV header, [(where, one-row file text)]) of a table upload, for row-by-row checks."""
    if suffix in {".jsonl", ".ndjson"}:
        return [], [(f"line {i}", line) for i, line in enumerate(data.splitlines(), 1) if line.strip()]
    reader = csv.reader(io.StringIO(data))
    header = next(reader, [])
    out = []
    for i, row in enumerate(reader, 2):
        out.append((f"row {i}", raw_csv_text([header, row])))  # read back by the loader, cells kept exactly
    return header, out


def _named(exc: InputError, path: Path, where: str) -> str:
    """The loader's message about a one-row file with the row named instead (``/tmp/x/row.csv:2`` -> ``row 7``)."""
    return re.sub(re.escape(str(path)) + r"(:\d+)?", lambda _: where, str(exc))


def _row_by_row(data: str, suffix: str, rubric: Rubric, first_error: str) -> EssayUpload:
    """Load each row on its own, keeping the good ones and the reason for each refused one."""
    refused = Refusals()
    if suffix == ".tsv":
        refused.add("file", first_error)
        return EssayUpload([], refused)
    try:
        header, rows = _rows(data, suffix)
    except csv.Error:  # not splittable in rows (a field over the limit, a quote never closed): the loader's line
        refused.add("file", first_error)
        return EssayUpload([], refused)
    if suffix == ".csv" and ("id" not in header or "text" not in header):
        refused.add("header", first_error)
        return EssayUpload([], refused)
    essays: list[Essay] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"row{suffix}"
        for where, text in rows:
            path.write_text(text, encoding="utf-8")
            try:
                essays.extend(load_table(path, rubric))
            except InputError as exc:
                refused.add(where, _named(exc, path, where), row_id(text, suffix))
    return EssayUpload(essays, refused)


def essays_from_upload(data: bytes, filename: str, rubric: Rubric, fmt: str, limits: Limits) -> EssayUpload:
    """Essays from an uploaded CSV / JSONL / ASAP TSV, read by the library's loaders: 413 for a file of more
    than ``limits.max_rows`` rows (before any is read); rows the loaders refuse, essays longer than
    ``limits.max_essay_chars`` and repeated ids are refused with the reason."""
    suffix = _suffix(filename, fmt)
    text = decode_text(data, filename or "the file")[0]  # UTF-8, else the encoding detected (the ASAP TSV's latin-1)
    check_count(count_rows(io.StringIO(text), suffix), limits.max_rows, "data")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"essays{suffix}"
        path.write_text(text, encoding="utf-8")
        try:
            upload = EssayUpload(load_essays(path, rubric, "asap" if suffix == ".tsv" else "auto", limits.max_rows))
        except InputError as exc:
            upload = _row_by_row(text, suffix, rubric, str(exc).replace(str(path), filename or "upload"))
    return apply_limits(upload, limits)


def apply_limits(upload: EssayUpload, limits: Limits) -> EssayUpload:
    """413 for more than ``limits.max_rows`` essays; refuse essays over the length limit and repeated ids (with
    reasons)."""
    max_chars = limits.max_essay_chars
    check_count(len(upload.essays), limits.max_rows)
    kept: list[Essay] = []
    seen: set[str] = set()
    refused = upload.refused.model_copy(deep=True)
    for essay in upload.essays:
        if len(essay.text) > max_chars:
            refused.add(f"essay {essay.id}", f"longer than {max_chars:,} characters")
        elif essay.id in seen:
            refused.add(f"essay {essay.id}", "duplicate essay id")
        else:
            seen.add(essay.id)
            kept.append(essay)
    return EssayUpload(kept, refused)


def essay_from_fields(raw: dict[str, Any], rubric: Rubric, where: str) -> Essay:
    """One essay given as fields (``id``, ``text``, optional ``fold`` and trait scores), read by the library's
    table loader's row reader as one JSONL line is (its values as JSON gives them), in memory: a request of a
    class's essays writes no file per essay."""
    return essay_from_row(json.loads(json.dumps(raw)), rubric, where)


def essay_row(essay: Essay) -> dict[str, Any]:
    """An essay in the table loader's layout (JSONL object): id, text, prompt, fold, rater<i>_<trait>."""
    row: dict[str, Any] = {"id": essay.id, "text": essay.text, "prompt": essay.prompt, "fold": essay.fold}
    for trait, scores in essay.rater_scores.items():
        ids = essay.rater_ids.get(trait, list(range(len(scores))))
        for idx, score in zip(ids, scores, strict=False):
            row[f"rater{idx + 1}_{trait}"] = score
    return row


def write_essays(path: Path, essays: list[Essay]) -> None:
    """Essays as a JSONL file the table loader reads back unchanged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(json.dumps(essay_row(e), ensure_ascii=False) + "\n" for e in essays))


def read_essays(path: Path, rubric: Rubric) -> list[Essay]:
    """Essays written by :func:`write_essays` (held to the server's row limit when they came)."""
    return load_table(path, rubric, max_rows=None)


def pool_fits(asap_dir: Path | None, rubric: Rubric) -> bool:
    """Whether the shipped ASAP essays are there and scored on this rubric (its essay set, each trait's column)."""
    if asap_dir is None or rubric.essay_set not in ASAP_RUBRICS or not (asap_dir / ASAP_DATA).is_file():
        return False
    return all(t.column is not None for t in rubric.traits)


def shipped_pool(asap_dir: Path | None, rubric: Rubric) -> list[Essay] | None:
    """The shipped ASAP essays of the rubric's essay set, as an exemplar pool; None when not available."""
    return load_asap(asap_dir / ASAP_DATA, rubric) if asap_dir is not None and pool_fits(asap_dir, rubric) else None


# -- protocols and jobs --------------------------------------------------------------------------------------


def protocol_names() -> list[str]:
    """Every protocol the library offers."""
    return available()


def uses_retrieval(name: str) -> bool:
    """Whether a protocol needs an exemplar pool; a MadragError for an unknown name."""
    return get_protocol(name).needs.bank


POOL_FILE = "pool.jsonl"
"""The explicit exemplar pool of a run, beside its essays in ``inputs/``."""


@dataclass(frozen=True)
class JobInputs:
    """Where a run's inputs are and which fold it scores; ``pool``: its explicit exemplar pool's file (default:
    ``pool.jsonl`` beside the essays when there is one)."""

    data: Path
    rubric: Path
    eval_fold: int | None
    pool: Path | None = None

    def pool_file(self) -> Path | None:
        """The explicit pool's file, if the run has one."""
        found = self.data.parent / POOL_FILE
        return self.pool or (found if found.is_file() else None)


def write_inputs(
    run_dir: Path, rubric: Rubric, essays: list[Essay], pool_mode: PoolMode, pool: list[Essay] | None, fold: int
) -> JobInputs:
    """Write a run's rubric and essays into ``<run_dir>/inputs`` in the layout the job reads (module docstring)."""
    folder = run_dir / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    rubric_path = folder / "rubric.json"
    write_text_atomic(rubric_path, rubric_json(rubric))
    data = folder / "essays.jsonl"
    if pool_mode == "asap":
        if pool is None:
            raise InputError("the shipped ASAP pool is not available for this rubric")
        pooled = [e.model_copy(update={"fold": None, "id": POOL_PREFIX + e.id}) for e in pool]
        write_essays(data, essays)
        write_text_atomic(folder / POOL_FILE, essays_jsonl(pooled))
        return JobInputs(data, rubric_path, None, folder / POOL_FILE)
    write_essays(data, essays)
    return JobInputs(data, rubric_path, fold if pool_mode == "folds" else None)


def provider_spec(
    kind: str, model: str | None, base_url: str | None, key_env: str | None, concurrency: int | None, **extra: Any
) -> ProviderSpec:
    """The library's backend description (never holding a key: only the name of the variable it is in; None:
    the kind's own)."""
    key = {} if key_env is None else {"api_key_env": key_env}
    return ProviderSpec.model_validate(
        {"kind": kind, "model": model, "base_url": base_url, "concurrency": concurrency, **key, **extra}
    )


def backend_identity(spec: ProviderSpec) -> dict[str, object]:
    """What makes two backend instances the same: the library's identity of a spec (what the backend answers),
    and the settings an instance is built with (its kind's options: the embedded model's slots, the fake's delay)."""
    return {**spec_identity(spec), **spec.options.model_dump(mode="json")}


def make_backend(spec: ProviderSpec, api_key: SecretStr | None = None) -> Provider:
    """A provider instance for ``spec``, built by the library's factory (``api_key``: a key held in memory)."""
    return make_provider(spec, api_key)


def make_job(
    run_dir: Path,
    inputs: JobInputs,
    protocols: list[str],
    spec: ProviderSpec,
    settings: ScoringSettings,
    cache_dir: Path | None,
    limit: int | None = None,
    embedder: EmbedderName = "minilm",
) -> ScoreJob:
    """The library's scoring job for a server run (``embedder``: the exemplar pool's, MiniLM by default)."""
    extra: dict[str, Any] = {} if cache_dir is None else {"cache_dir": cache_dir}
    pool_file = inputs.pool_file()
    if pool_file is not None:
        lines = pool_file.read_text(encoding="utf-8").splitlines()
        extra["pool"] = [Essay.model_validate_json(line) for line in lines if line.strip()]
    return ScoreJob(
        data=inputs.data,
        max_rows=None,  # the server's own copy of essays it held to its --max-essays
        rubric=inputs.rubric,
        run_dir=run_dir,
        data_format="jsonl",
        eval_fold=inputs.eval_fold,
        limit=limit,
        protocols=protocols,
        provider=spec,
        settings=settings,
        embedder=embedder,
        **extra,
    )


async def run_job(job: ScoreJob, hooks: RunHooks, backend: Provider | None = None) -> tuple[list[TraitScore], int]:
    """Run (or resume) a job with the public API's ``madrag.arun_job`` (the one runner of prepared jobs) on a
    ready ``backend`` (the server's shared instance); the final trait scores of its essays and the number of
    calls that failed after their retries (recorded as failed: a resume retries them)."""
    result = await madrag.arun_job(job, backend=backend, progress=hooks)
    return result.trait_scores, result.failed_calls


def estimate(sample_dir: Path, n_essays: int, n_traits: int, price: tuple[float, float] | None) -> dict[str, Any]:
    """The library's dry-run estimate from a scored sample: calls, tokens and (with a price) spend."""
    prices = None if price is None else {ANY_MODEL: Price(price[0], price[1])}
    with closing(open_store(sample_dir / "store.sqlite", read_only=True)) as store:
        found = estimate_run(store, n_essays, n_traits, prices=prices)
    return estimate_to_dict(found)

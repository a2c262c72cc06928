"""``madrag.score`` and ``madrag.ascore``: score essays from a notebook or a script in one call.

Both build a :class:`~madrag.pipeline.job.ScoreJob` and run it through the same
:func:`~madrag.pipeline.job.execute` as ``madrag score``: the run directory, its store, resuming and the
stored configuration are exactly the CLI's. In-memory essays and a rubric given as a dict or :class:`Rubric` stay
in the job (the run keeps a copy in ``<run_dir>/inputs/``: ``essays.jsonl``, ``rubric.json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar, cast

from pydantic import ValidationError

from madrag.api.arguments import check_pool, to_settings, validation_line
from madrag.api.backend import ProviderLike, resolve_provider, resolve_role_providers
from madrag.api.executors import ray_executor
from madrag.api.inputs import EssaysLike, RubricLike, to_essays, to_rubric
from madrag.api.progress import ScoreProgress
from madrag.api.result import ScoringResult
from madrag.data.essay import Essay
from madrag.data.loaders import load_essays
from madrag.data.row_limit import MAX_ROWS
from madrag.data.splits import EACH
from madrag.distributed.options import RayOptions
from madrag.errors import InputError
from madrag.pipeline.hooks import RunHooks
from madrag.pipeline.job import ScoreJob, default_cache_dir, execute, job_rubric
from madrag.protocols import get_protocol
from madrag.providers import ProviderSpec
from madrag.providers.base import Provider
from madrag.retrieval.embedder import Embedder
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
Fold = int | Literal["all", "each"] | None
"""Which essays are scored: a fold (the other folds are the pool), ``"all"``, ``"each"`` (every fold, each with
the other folds as its pool: the MADRAG paper's Table 2) or ``None`` (fold 0 when every essay has a fold, else all)."""

TINY_MODEL_NOTE = (
    "note: the embedded SmolLM2-135M model shows the pipeline working end to end; it is far too small to give "
    "valid scores. For real scoring use an OpenAI-compatible server (CLI: --provider openai; Python: "
    "provider='openai:MODEL@URL') or a bigger GGUF model (--model-path; 'llamacpp:/path/to/model.gguf')."
)


def _eval_fold(fold: Fold, essays: list[Essay], pool_given: bool) -> int | str | None:
    """The fold scored: ``None`` (auto) is fold 0 when every essay has a fold, else every essay (``"all"``).
    With an explicit pool every essay is scored."""
    if pool_given:
        if fold not in (None, "all"):
            raise InputError("fold selects essays for the fold split; with pool= every essay given is scored")
        return None
    if fold == "all":
        return None
    if fold == "each":
        return EACH
    if fold is None:
        return 0 if all(e.fold is not None for e in essays) else None
    return fold


def _essays_source(
    essays: EssaysLike | str | Path, rubric: Rubric, max_rows: int | None
) -> tuple[Path | None, list[Essay]]:
    """(data file, essays): a path is a data file as ``madrag score --data`` reads it; anything else is
    in-memory essays."""
    if isinstance(essays, str | Path):
        path = Path(essays)
        if not path.exists():  # a file, or a folder of submissions
            raise InputError(f"data file not found: {path} (to score one essay text, pass a list: [text])")
        return path, load_essays(path, rubric, max_rows=max_rows)
    return None, to_essays(essays, rubric)


async def ascore(
    essays: EssaysLike | str | Path,
    rubric: RubricLike,
    *,
    protocol: str | Sequence[str] = "MADRAG",
    provider: ProviderLike = "llamacpp",
    pool: EssaysLike | None = None,
    fold: Fold = None,
    run_dir: str | Path | None = None,
    settings: ScoringSettings | Mapping[str, Any] | None = None,
    role_providers: Mapping[str, str | ProviderSpec] | None = None,
    limit: int | None = None,
    ids: Sequence[str] | None = None,
    essay_concurrency: int | None = None,
    cache_dir: str | Path | None = None,
    response_cache: bool | None = None,
    prompts_dir: str | Path | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
    ray: str | RayOptions | None = None,
    max_failures: int | None = None,
    max_rows: int | None = MAX_ROWS,
) -> ScoringResult:
    """Score essays trait by trait and return a :class:`ScoringResult` (the async twin of :func:`score`,
    which documents the arguments). Use it inside ``async`` code; :func:`score` everywhere else.

    >>> import asyncio, madrag
    >>> rubric = {"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")}]}
    >>> result = asyncio.run(madrag.ascore(["An essay."], rubric, protocol="MA", provider="fake", progress=False))
    >>> result.scores[["essay", "trait", "score"]].values.tolist()  # the fake answers the scale's middle
    [['1', 'Ideas', 2]]
    """
    if max_failures is not None and (isinstance(max_failures, bool) or max_failures < 1):
        raise InputError(f"max_failures must be a whole number >= 1, or None for no limit (got {max_failures!r})")
    the_rubric = to_rubric(rubric)
    data, loaded = _essays_source(essays, the_rubric, max_rows)
    exemplars = None if pool is None else to_essays(pool, the_rubric, "pool")
    if exemplars is not None:
        check_pool(loaded, exemplars)
    eval_fold = _eval_fold(fold, loaded, pool is not None)
    spec, backend = resolve_provider(provider)
    roles = resolve_role_providers(role_providers, spec)
    scoring = to_settings(settings)
    temporary = run_dir is None  # a temporary run directory is made once every argument was accepted
    if not isinstance(protocol, str) and not protocol:
        raise InputError("protocol: no protocol given; name at least one (e.g. 'MADRAG')")
    job = _job(
        temporary,
        data=data,
        essays=None if data is not None else loaded,
        pool=exemplars,
        rubric=Path(rubric) if isinstance(rubric, str | Path) else the_rubric,
        run_dir=None if run_dir is None else Path(run_dir),
        eval_fold=eval_fold,
        limit=limit,
        ids=list(ids) if ids is not None else None,
        protocols=[protocol] if isinstance(protocol, str) else list(protocol),
        provider=spec,
        role_providers=roles,
        settings=scoring,
        essay_concurrency=essay_concurrency,
        prompts_dir=Path(prompts_dir) if prompts_dir is not None else None,
        cache_dir=Path(cache_dir) if cache_dir is not None else default_cache_dir(),
        # a ready instance is not cached by default: the cache keys on its name and model only
        response_cache=response_cache if response_cache is not None else backend is None,
        executor=ray_executor(ray),
        max_failures=max_failures,
        max_rows=max_rows,
    )
    return await arun_job(job, backend=backend, embedder=embedder, progress=progress, temporary=temporary)


def _job(temporary: bool, **fields: Any) -> ScoreJob:
    """The ScoreJob of :func:`ascore`'s arguments (a value it refuses is one InputError line); a temporary run
    directory is made only once every argument was accepted."""
    try:
        ScoreJob.model_validate({**fields, "run_dir": fields["run_dir"] or Path(".")})
    except ValidationError as exc:
        raise InputError(validation_line(exc)) from None
    if temporary:
        fields["run_dir"] = Path(tempfile.mkdtemp(prefix="madrag-run-"))
    return ScoreJob(**fields)


async def arun_job(
    job: ScoreJob,
    *,
    backend: Provider | None = None,
    embedder: Embedder | None = None,
    progress: bool | RunHooks = True,
    temporary: bool = False,
) -> ScoringResult:
    """Run a :class:`ScoreJob` already built (as ``madrag score`` builds one from its options) with a progress
    bar and return a :class:`ScoringResult`: the one place :func:`score`, :func:`ascore` and other callers
    (the web app, workers) run a job. ``backend``: a ready provider instead of ``job.provider``; ``embedder``:
    the exemplar bank's, instead of MiniLM; ``temporary``: the run directory was made for this run.
    ``progress``: a bar or not, a :class:`ScoreProgress` of the caller's, or other
    :class:`~madrag.pipeline.hooks.RunHooks` to tell of the run (then without a bar)."""
    bar = progress if isinstance(progress, ScoreProgress) else ScoreProgress(enabled=progress is True)
    hooks = progress if isinstance(progress, RunHooks) else bar
    rubric = job_rubric(job)
    bar.per_essay = len(job.protocols) * len(rubric.traits)
    bar.protocols = set(job.protocols)
    bar.over_run = {name for name in job.protocols if get_protocol(name).needs.over_run}
    with bar:
        if temporary:
            bar.note(f"run directory (temporary): {job.run_dir}")
        if backend is None and job.provider.options.tiny_default():
            bar.note(TINY_MODEL_NOTE)
        done = await execute(job, hooks, backend=backend, embedder=embedder)
    return ScoringResult(
        run_dir=job.run_dir,
        temporary=temporary,
        run_id=done.run_id,
        resumed=done.resumed,
        rubric=rubric,
        protocols=list(job.protocols),
        essays=done.essays,
        trait_scores=done.scores,
        stats=done.stats,
        elapsed_s=done.elapsed_s,
        unusable=done.unusable,
    )


def run_sync(make: Callable[[], Coroutine[Any, Any, R]]) -> R:
    """Run a coroutine to completion from synchronous code: with ``asyncio.run`` in a plain script, or - when
    this thread already runs an event loop, as Jupyter's does - in a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    return _in_worker_thread(make)


def _in_worker_thread(make: Callable[[], Coroutine[Any, Any, R]]) -> R:
    """``asyncio.run(make())`` in a new thread. An interrupt while waiting (Jupyter's stop button) cancels
    the run there - as Ctrl-C does in a script: every finished call stays stored - and is raised here."""
    started, finished = threading.Event(), threading.Event()
    handle: dict[str, Any] = {}

    async def main() -> R:
        handle["loop"], handle["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        return await make()

    def target() -> None:
        try:
            handle["result"] = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting thread
            handle["error"] = exc
        finally:
            started.set()
            finished.set()

    threading.Thread(target=target, name="madrag-score", daemon=True).start()
    # the waiting uses events, not Thread.join: an interrupted join can leave the thread marked as stopped
    try:
        while not finished.wait(0.1):  # short waits: a pending interrupt is raised here promptly
            pass
    except BaseException:
        started.wait()
        if not finished.is_set() and "task" in handle:
            with contextlib.suppress(RuntimeError):  # the run ended (and its loop closed) meanwhile
                handle["loop"].call_soon_threadsafe(handle["task"].cancel)
        finished.wait()
        raise
    if "error" in handle:
        raise handle["error"]
    return cast(R, handle["result"])


def _synchronous(fn: Callable[P, Coroutine[Any, Any, R]], name: str, doc: str) -> Callable[P, R]:
    """``fn`` as a plain function with the same parameters, run by :func:`run_sync`."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(lambda: fn(*args, **kwargs))

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = doc
    return wrapper


SCORE_DOC = """Score essays trait by trait with a protocol (MADRAG by default) and return a :class:`ScoringResult`.

Works in a plain script and inside Jupyter, whose event loop is already running (the run then goes to a
worker thread with its own loop); :func:`ascore` is the async twin, with the same arguments.

Args:
    essays: a list of texts, a list of dicts or a pandas DataFrame (``id``, ``text``, optional ``fold``,
        ``prompt``, ``essay_set`` and scores: a column per rubric trait or ``rater1_<trait>``,
        ``rater2_<trait>`` ...), a list of :class:`Essay`, or the path of a data file (ASAP .tsv, .csv,
        .jsonl) as ``madrag score --data`` reads it.
    rubric: a :class:`Rubric`, a dict in the rubric file layout, or the path of a JSON/YAML rubric.
    protocol: a protocol name or a list of them (``MADRAG``, ``MAD``, ``MA``, ``SA``, ``SARAG``, ``MARAG``,
        the consensus paper's ``SingleJudge`` ... ``ScoreMaskedMAD``); several share their common calls.
    provider: ``"llamacpp"`` (the embedded model, offline), ``"llamacpp:/path/model.gguf"``,
        ``"openai:MODEL"``, ``"openai:MODEL@http://host:8000/v1"`` (any OpenAI-compatible server; the key is
        read from ``$OPENAI_API_KEY``), ``"fake"`` (canned answers), a :class:`ProviderSpec` or a
        :class:`Provider` instance such as ``FakeProvider(script=...)``.
    pool: scored essays (same forms as ``essays``, none with the id of an essay to score) retrieved as
        exemplars by the RAG protocols. Without it, essays with a ``fold`` are split as ``madrag score --fold``
        splits them (``fold`` is scored, the rest is the pool); essays without folds are all scored and all
        form the pool (the essay being scored is never retrieved).
    fold: the fold to score without ``pool``: an integer, ``"all"``, or ``None`` (fold 0 when every essay has
        a fold, else ``"all"``).
    run_dir: the run directory; an existing run is resumed (finished calls are read back, never repeated)
        and one made with other settings is refused. Default: a new temporary directory
        (``result.temporary`` is then True).
    settings: :class:`ScoringSettings` or a dict of them (token limits, seed, score method ...); an unknown key
        or an invalid value is a :class:`~madrag.errors.ConfigError` naming it.
    role_providers: backends for single judge roles of the consensus paper's protocols, e.g.
        ``{"lenient": "openai:gemma-3-4b@http://host:8000/v1"}``.
    limit, ids: score only the first ``limit`` selected essays, or the essays with these ids.
    essay_concurrency: essays in flight at once (default: enough to keep the backend busy).
    cache_dir: exemplar indexes and the response cache (default ``$MADRAG_CACHE`` or ``~/.cache/madrag``).
    response_cache: reuse identical earlier answers from the cache (default: on, off for a provider instance).
    prompts_dir: a folder of prompt templates overriding the packaged ones.
    embedder: the exemplar bank's embedder (default MiniLM, as the CLI uses).
    progress: show a progress bar (terminal or notebook); ``False`` turns it off.
    ray: score on Ray (``pip install 'madrag[ray]'``, docs/scaling.md): ``"local"`` (a local Ray instance),
        ``"HOST:PORT"`` or ``"auto"`` (a cluster), or :class:`~madrag.distributed.RayOptions`; the provider must
        then be a string or a :class:`ProviderSpec` (each worker builds its own backend).
    max_failures: stop once this many calls have failed after their retries (the calls in flight finish;
        :class:`~madrag.errors.TooManyFailures` is raised). Default None: every failed call is recorded as
        failed, its essay-trait left without a score, and the run goes on; ``result.failed_calls`` counts them
        and ``result.failures`` lists them. Scoring again with the same ``run_dir`` retries them.
    max_rows: the most rows a data file (``essays`` as a path) may hold, counted before it is read (default
        20,000, as ``madrag score --max-rows``; None: no limit).

Example:
    >>> import madrag
    >>> rubric = {"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")}]}
    >>> result = madrag.score(["A short essay.", "Another one."], rubric, protocol="MAD", provider="fake",
    ...                       progress=False)
    >>> result.scores[["essay", "trait", "protocol", "score"]].values.tolist()  # the fake: the scale's middle
    [['1', 'Ideas', 'MAD', 2], ['2', 'Ideas', 'MAD', 2]]
    >>> len(result.records)  # Advocate, Skeptic and Judge per essay and trait
    6
"""

score = _synchronous(ascore, "score", SCORE_DOC)
run_job = _synchronous(
    arun_job,
    "run_job",
    """:func:`arun_job` from synchronous code (also inside a running event loop, as :func:`score`).""",
)

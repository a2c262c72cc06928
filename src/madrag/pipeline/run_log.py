"""A run's own log, ``run.log`` in its folder: when each session of the run started and with what settings (every
one not at its default, the backend's options included, and madrag's version and commit:
:func:`settings_line`), what each backend's server said of itself and the values resolved from it (the
concurrency, the server's slots, context, model and build: :func:`log_backends`, with the warning of a given
concurrency above the slots), the retries, timeouts, endpoint pauses, adapted parameters and failed calls
madrag's loggers report while it runs, and how it ended: ``complete``, ``interrupted`` (Ctrl-C, a cancelled web
run) or ``failed`` (with the error). Every command that calls a model writes one (``madrag score`` and what runs
through its job: audits, resumes; the meta-evaluator in its own folder).

:func:`run_log` opens it for the duration of one :func:`~madrag.pipeline.job.execute` (a resume appends its own
session). It is entered only once the run folder exists (after the checks that may refuse a new run), so a
refused run leaves no log either. One :class:`_Router` on the ``madrag`` logger sends each record to the log of
the run whose task emitted it (a context variable, so two runs of one process, as the web app makes, keep
separate logs), and keeps the warnings on stderr exactly as before: when no other handler would show a record,
Python's last-resort handler still does.

:func:`read_status` reads a log back for ``madrag runs list``: its first start, the last session's end status,
or ``running`` while a writer holds the folder, ``interrupted`` when the last session never wrote its end (the
process was killed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from pydantic import BaseModel

    from madrag.providers.base import Provider
    from madrag.providers.spec import ProviderSpec
    from madrag.store import RunStore

RUN_LOG = "run.log"
"""The log's file name in the run folder."""

log = logging.getLogger("madrag.run")
_CURRENT: ContextVar[logging.Handler | None] = ContextVar("madrag_run_log", default=None)
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_START, _END = "madrag.run: start", "madrag.run: end: "


class _Router(logging.Handler):
    """Sends a ``madrag.*`` record to the current run's log; shows it on stderr as Python would have without
    this handler (its last-resort handler, when nothing else handles it)."""

    def emit(self, record: logging.LogRecord) -> None:
        target = _CURRENT.get()
        if target is not None and record.levelno >= target.level:
            target.handle(record)
        last = logging.lastResort
        if last is not None and record.levelno >= last.level and not self._others(record.name):
            last.handle(record)

    def _others(self, name: str) -> bool:
        """Whether a handler other than this one would see a record of logger ``name``."""
        logger: logging.Logger | None = logging.getLogger(name)
        while logger is not None:
            if any(handler is not self for handler in logger.handlers):
                return True
            logger = logger.parent if logger.propagate else None
        return False


_ROUTER = _Router()


def _install() -> None:
    root = logging.getLogger("madrag")
    if _ROUTER not in root.handlers:
        root.addHandler(_ROUTER)
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)  # the log's own start and end lines (INFO) reach the handlers


@contextmanager
def run_log(run_dir: Path, settings: str) -> Iterator[None]:
    """Log this session of the run in ``run_dir/run.log`` (appended): start with ``settings``, what madrag's
    loggers report meanwhile (WARNING and above, and this module's INFO), then the end status."""
    _install()
    handler = logging.FileHandler(Path(run_dir) / RUN_LOG, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(logging.INFO)
    token = _CURRENT.set(handler)
    started = time.monotonic()
    status = "failed"
    try:
        log.info("start: %s", settings)
        try:
            yield
            status = "complete"
        except (KeyboardInterrupt, asyncio.CancelledError):
            status = "interrupted"
            raise
        except BaseException as exc:
            # the run's own file only: the caller reports the error to the person (the CLI's one-line message)
            handler.handle(
                log.makeRecord(log.name, logging.ERROR, __file__, 0, "error: %s: %s", (type(exc).__name__, exc), None)
            )
            raise
        finally:
            log.info("end: %s after %.1fs", status, time.monotonic() - started)
    finally:
        _CURRENT.reset(token)
        handler.close()


@dataclass(frozen=True)
class LogStatus:
    """What a run's log says of it: ``started`` (the first session's start time, as written), ``status``
    (complete / interrupted / failed / running; None without a log) and the number of sessions."""

    started: str | None
    status: str | None
    sessions: int = 0


def read_status(run_dir: Path, running: bool = False) -> LogStatus:
    """The run's :class:`LogStatus` from its ``run.log`` (``running``: a writer holds the folder now)."""
    path = Path(run_dir) / RUN_LOG
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return LogStatus(None, "running" if running else None)
    starts = [line for line in lines if _START in line]
    first = starts[0][:19] if starts else None
    status: str | None = None
    for line in lines:
        if _START in line:
            status = "interrupted"  # until its end line says otherwise (a killed process writes none)
        elif _END in line:
            status = line.split(_END, 1)[1].split(" ", 1)[0]
    return LogStatus(first, "running" if running else status, len(starts))


def settings_line(
    spec: ProviderSpec,
    protocols: list[str],
    settings: BaseModel,
    n_essays: int,
    max_failures: int | None = None,
    given: Provider | None = None,
    job: dict[str, Any] | None = None,
    items: str = "essays",
) -> str:
    """One line of what this session of the run was asked: essays, protocols, backend (``given``: the ready
    backend the caller passed instead of ``spec``) and every option of it not at its default (``--no-logprobs``
    as ``logprobs False``; URLs without user info or query), the concurrency given (the one resolved is on the
    backend line, :func:`log_backends`), timeout and retries, the failure budget, ``job``'s other settings not
    at their default, every scoring setting that is not its default, and madrag's version (``items``: what
    ``n_essays`` counts)."""
    kind, model = (given.name, given.model) if given is not None else (spec.kind, spec.model)
    backend = kind + (f" model {model}" if model else "")
    options = {} if given is not None else _scrubbed(spec.options.model_dump(mode="json", exclude_defaults=True))
    if options:
        backend += f" options {options}"
    concurrency = f"concurrency {spec.concurrency}" if spec.concurrency else "concurrency not given"
    line = f"{n_essays} {items} x {', '.join(protocols)}; backend {backend}; {concurrency}, timeout {spec.timeout_s:g}s"
    line += f", retries {spec.retries}"
    if max_failures is not None:
        line += f", max failures {max_failures}"
    if job:
        line += f"; job {_scrubbed(job)}"
    changed = settings.model_dump(mode="json", exclude_defaults=True)
    line += f"; scoring settings {changed}" if changed else "; default scoring settings"
    return f"{line}; {madrag_version()}"


JOB_FIELDS = {"eval_fold", "limit", "essay_concurrency", "response_cache", "embedder", "role_providers", "data_format"}
"""A scoring job's own settings its run.log names when they are not at their default."""


def job_settings(job: BaseModel) -> dict[str, Any]:
    """The fields of ``job`` (a :class:`~madrag.pipeline.score_job.ScoreJob`) of :data:`JOB_FIELDS` not at their
    default, for :func:`settings_line`."""
    return job.model_dump(mode="json", exclude_defaults=True, include=JOB_FIELDS)


def _scrubbed(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every URL cut to scheme, host and path (where a key could hide: user info, query)."""

    def clean(value: Any) -> Any:
        if isinstance(value, str) and "://" in value:
            parts = urlsplit(value)
            host = (parts.hostname or "") + (f":{parts.port}" if parts.port is not None else "")
            return urlunsplit((parts.scheme, host, parts.path, "", ""))
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return {k: clean(v) for k, v in values.items()}


@functools.cache
def version_info() -> dict[str, str | None]:
    """madrag's ``version`` and, run from a git checkout of madrag, its ``commit`` (``git describe --always
    --dirty --tags --match 'v[0-9]*'``: a release tag's name and the commits since, else the commit's short hash;
    another tag, such as a prototype's, is not named; None for an installed package, or where git cannot say)."""
    try:
        version: str | None = metadata.version("madrag")  # what madrag.__version__ says (pyproject's version)
    except metadata.PackageNotFoundError:
        version = None
    root = Path(__file__).resolve().parents[3]  # src/madrag/pipeline/run_log.py -> the checkout
    commit = None
    if (root / ".git").exists() and (root / "pyproject.toml").is_file():
        try:
            done = subprocess.run(
                ["git", "-C", str(root), "describe", "--always", "--dirty", "--tags", "--match", "v[0-9]*"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            done = None
        commit = done.stdout.strip() or None if done is not None and done.returncode == 0 else None
    return {"version": version, "commit": commit}


def madrag_version() -> str:
    """``madrag 0.1.0 (git 3e6d5ef-dirty)``, or ``madrag 0.1.0 (installed, no commit)``."""
    info = version_info()
    commit = f"git {info['commit']}" if info["commit"] else "installed, no commit"
    return f"madrag {info['version'] or '(version unknown)'} ({commit})"


def backend_lines(found: dict[str, Any]) -> list[tuple[int, str]]:
    """(level, line) per backend of a run's start-up check (``found``: by role, ``*`` the main backend, as
    :func:`~madrag.pipeline.preflight.check_backends` returns it): the concurrency resolved and why, what the
    server said (slots, context, model, build), and the warning of a given concurrency above its slots."""
    from madrag.providers.server_props import ConcurrencyFit

    out: list[tuple[int, str]] = []
    for role, checked in found.items():
        if not isinstance(checked, dict) or "concurrency" not in checked:
            continue
        fit = ConcurrencyFit.from_dict(checked["concurrency"])
        where = str(checked.get("backend", "the backend"))
        label = "backend" if role == "*" else f"backend of {role}"
        out.append((logging.INFO, f"{label}: {where}: {fit.words()}; {_server_words(checked.get('server'))}"))
        if (warning := fit.warning(where)) is not None:
            out.append((logging.WARNING, warning))
    return out


def _server_words(server: Any) -> str:
    """What the server said of itself, in words (or that it said nothing)."""
    if not isinstance(server, dict):
        return "the server said nothing of its slots, context, model or build"
    said = []
    if server.get("total_slots") is not None:
        slots = server["total_slots"]
        said.append(f"{slots} slot" + ("" if slots == 1 else "s"))
    if server.get("n_ctx") is not None:
        said.append(f"{server['n_ctx']} tokens of context per slot")
    if server.get("max_model_len") is not None:
        said.append(f"the model's context of {server['max_model_len']} tokens (max_model_len)")
    said.append(f"model {server['model']}" if server.get("model") else "no model named")
    said.append(f"build {server['build']}" if server.get("build") else "no build named")
    return "the server says: " + ", ".join(said)


def log_backends(found: dict[str, Any], store: RunStore | None = None) -> None:
    """Write :func:`backend_lines` to the run's log (and a warning to stderr, as every warning), and keep
    madrag's version and commit in ``store`` (meta ``madrag``; the run's log has it per session)."""
    for level, line in backend_lines(found):
        log.log(level, line)
    if store is not None:
        store.set_meta("madrag", version_info())


def session_note(text: str, when: object = True) -> None:
    """A line of this session in the current run's log (e.g. the token limits a resume changed), if ``when``."""
    if when:
        log.info("%s", text)

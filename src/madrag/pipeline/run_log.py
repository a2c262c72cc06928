"""A run's own log, ``run.log`` in its folder: when each session of the run started and with what settings, the
retries, timeouts, endpoint pauses, adapted parameters and failed calls madrag's loggers report while it runs,
and how it ended: ``complete``, ``interrupted`` (Ctrl-C, a cancelled web run) or ``failed`` (with the error).

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
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from madrag.providers.base import Provider
    from madrag.providers.spec import ProviderSpec

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
) -> str:
    """One line of what this session of the run was asked: essays, protocols, backend (``given``: the ready
    backend the caller passed instead of ``spec``), its concurrency, timeout and retries, the failure budget and
    every scoring setting that is not its default."""
    kind, model = (given.name, given.model) if given is not None else (spec.kind, spec.model)
    backend = kind + (f" model {model}" if model else "")
    line = (
        f"{n_essays} essays x {', '.join(protocols)}; backend {backend}; concurrency "
        f"{spec.concurrency or 'auto'}, timeout {spec.timeout_s:g}s, retries {spec.retries}"
    )
    if max_failures is not None:
        line += f", max failures {max_failures}"
    changed = settings.model_dump(mode="json", exclude_defaults=True)
    return line + (f"; settings {changed}" if changed else "; default settings")


def session_note(text: str, when: object = True) -> None:
    """A line of this session in the current run's log (e.g. the token limits a resume changed), if ``when``."""
    if when:
        log.info("%s", text)

"""The application factory: the JSON API, the teacher's pages, static files from the package, ``/docs``.

``create_app(config)`` builds a FastAPI app around one :class:`~madrag.server.runs.scheduler.RunManager`; on start-up it
lists runs a stopped server left unfinished (as ``interrupted``, resumable), on shutdown it stops the runs in
flight (their finished calls are in their run stores).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from madrag import __version__
from madrag.data.shipped import find_asap_dir
from madrag.pipeline.run_log import version_info
from madrag.protocols.registry import REGISTRY
from madrag.providers.backends import load_backends
from madrag.server import api, pages, results
from madrag.server.catalog import Catalog
from madrag.server.config import ServerConfig
from madrag.server.drafts import Drafts
from madrag.server.http import errors
from madrag.server.http.errors import render_error
from madrag.server.http.security import Guard, TooLarge
from madrag.server.runs.scheduler import RunManager
from madrag.server.service import State
from madrag.store.writer_lock import WriterLock

log = logging.getLogger("madrag.server")
DESCRIPTION = """Rubric-based analytic essay scoring with LLM agents (Advocate, Skeptic, Judge per trait).

Every error is JSON: `{"error": {"status": ..., "message": ..., "field": ...}}`. When the server has a token,
send it as `Authorization: Bearer TOKEN`. Write requests take JSON bodies."""


DOCS_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>madrag API</title>
<link rel="stylesheet" href="/static/swagger-ui.css"></head><body><div id="swagger-ui"></div>
<script src="/static/swagger-ui-bundle.js"></script><script src="/static/docs.js"></script></body></html>"""
"""The API documentation: Swagger UI (vendored from the npm package swagger-ui-dist 5.35.0), no CDN."""


PREPARED_RUNS = 3
"""Finished runs whose results page is prepared at start-up (the most recent ones)."""


def prepare_recent(state: State) -> None:
    """Read the scores and build the results grid of the most recent finished runs, so the first page a teacher
    opens after a restart is served at once."""
    from madrag.server.pages.runs import prepared_grid

    finished = [m for m in state.runs.all() if m.status == "finished" and m.kind != "estimate"][:PREPARED_RUNS]
    for meta in finished:
        try:
            table = results.grid(state, meta.id)
            prepared_grid(state, meta.id, table)
        except Exception as exc:  # a damaged run must not stop the server; opening it reports the problem
            log.warning("could not prepare run %s: %s", meta.id, type(exc).__name__)


def prepare_first_run() -> None:
    """Before the server answers, what the first run it starts would otherwise do while requests wait on it: find
    the backend and protocol plugins (entry points, read once per process) and madrag's commit for ``run.log``.
    Twenty teachers creating runs at once on a server just started waited on the first run's start: ``POST
    /api/runs`` p95 0.50-0.56 s against 0.15-0.24 s once one run had started (``bench/post_runs.py``)."""
    load_backends()
    REGISTRY.load_plugins(strict=False)  # a plugin that cannot be imported is reported when a run names it
    version_info()


def data_dir_lock(config: ServerConfig) -> WriterLock:
    """The lock a server holds on its data directory while it serves (one server per data directory)."""
    hint = "another madrag serve uses it: stop that one, or give this one another --data-dir"
    return WriterLock(config.data_dir, "data directory", hint)


def create_app(config: ServerConfig | None = None, *, data_lock: WriterLock | None = None) -> FastAPI:
    """The web app and API for ``config`` (defaults: loopback, the default data directory). While it serves it
    holds its data directory's lock (:func:`data_dir_lock`; ``data_lock``: the caller holds it already, as
    ``madrag serve`` does from its start): a second app on the same data directory does not start."""
    config = config or ServerConfig()
    if config.token_required and not config.token:
        raise ValueError("a server on a non-loopback address needs a token")
    config = config.model_copy(update={"asap_dir": find_asap_dir(config.asap_dir)})
    config.data_dir.mkdir(parents=True, exist_ok=True)
    state = State(config, Catalog(config.data_dir, config.asap_dir), RunManager(config), Drafts(config.data_dir))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        """One server per data directory (its lock: its runs are this server's to resume; madrag serve holds it
        already); the first run's one-time work done (:func:`prepare_first_run`), runs a stopped server left active
        listed as interrupted (resumed with ``auto_resume``), recent results prepared; on shutdown the runs in
        flight stopped."""
        lock = None if data_lock is not None else data_dir_lock(config).acquire()
        try:
            prepare_first_run()
            state.runs.recover()
            threading.Thread(target=prepare_recent, args=(state,), name="madrag-prepare", daemon=True).start()
            try:
                yield
            finally:
                state.runs.close()
        finally:
            if lock is not None:
                lock.release()

    app = FastAPI(
        title="madrag",
        version=__version__,
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.madrag = state
    errors.install(app)

    @app.exception_handler(TooLarge)
    async def _too_large(request: Request, _exc: TooLarge) -> Response:
        limit = config.limits.max_upload_bytes
        return render_error(request, 413, f"request body over the upload limit of {limit:,} bytes")

    static = resources.files("madrag.server") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(DOCS_PAGE)

    app.include_router(api.router)
    pages.install(app)
    app.add_middleware(Guard, config=config)
    return app

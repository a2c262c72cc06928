"""The teacher's pages: server-rendered Jinja2 templates (:mod:`madrag.server.rendering`, autoescaped), one small
script and one style sheet from the package, no CDN.

The set-up steps are in :mod:`madrag.server.pages_setup` (the backend step and the start in
:mod:`madrag.server.pages_backend`), the run, results and essay pages in
:mod:`madrag.server.pages_runs`; the review queue, gradebook, student feedback and calibration in their own
`pages_*` modules; what every page shares (rendering with the CSRF token, the error page,
redirects) in :mod:`madrag.server.rendering`.
"""

from __future__ import annotations

from fastapi import FastAPI

from madrag.server import (
    pages_backend,
    pages_calibration,
    pages_feedback,
    pages_gradebook,
    pages_review,
    pages_runs,
    pages_setup,
)
from madrag.server.rendering import error_page


def install(app: FastAPI) -> None:
    """Add every page to ``app`` and let browser errors render as pages."""
    app.state.render_error_page = error_page
    app.include_router(pages_setup.router)
    app.include_router(pages_backend.router)
    app.include_router(pages_review.router)
    app.include_router(pages_gradebook.router)
    app.include_router(pages_feedback.router)
    app.include_router(pages_calibration.router)
    app.include_router(pages_runs.router)

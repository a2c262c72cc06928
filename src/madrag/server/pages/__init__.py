"""The teacher's pages: server-rendered Jinja2 templates (:mod:`.rendering`, autoescaped), one small script and
one style sheet from the package, no CDN.

One module per page feature, its view model and its routes together: the set-up steps (:mod:`.setup`), an
essay import's column mapping (:mod:`.class_import`), the backend step and the start (:mod:`.backend`), the
run, results and essay pages (:mod:`.runs`), the review queue (:mod:`.review`), the gradebook
(:mod:`.gradebook`), student feedback (:mod:`.feedback`), calibration (:mod:`.calibration`), a class from
Canvas and its grades sent back (:mod:`.lms`); what every page shares (rendering with the CSRF token, the error
page, redirects) in :mod:`.rendering`. The teacher's workflow itself (ranking, grades,
feedback drafts) is pure logic in :mod:`madrag.teacher`.

A new page is one module here (with a ``router``), one template in ``templates/``, and one line in ``PAGES``.
"""

from __future__ import annotations

from types import ModuleType

from fastapi import FastAPI

from madrag.server.pages import backend, calibration, class_import, feedback, gradebook, lms, review, runs, setup
from madrag.server.pages.rendering import error_page

PAGES: tuple[ModuleType, ...] = (setup, class_import, backend, review, gradebook, feedback, calibration, lms, runs)
"""Every page module, in the order their routes are matched (``runs`` last: its ``/runs/{run_id}`` pages must
not shadow a feature's ``/runs/{run_id}/...``)."""


def install(app: FastAPI) -> None:
    """Add every page to ``app`` and let browser errors render as pages."""
    app.state.render_error_page = error_page
    for page in PAGES:
        app.include_router(page.router)

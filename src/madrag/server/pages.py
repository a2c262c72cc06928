"""The teacher's pages (server-rendered)."""

from __future__ import annotations

from fastapi import FastAPI


def install(app: FastAPI) -> None:
    """Add the pages to ``app``."""

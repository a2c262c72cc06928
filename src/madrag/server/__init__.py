"""``madrag serve``: the web app for teachers and the HTTP API for programs, on the library's pipeline.

:func:`create_app` builds the FastAPI application from a :class:`ServerConfig`.
"""

from madrag.server.app import create_app
from madrag.server.config import Limits, ServerConfig

__all__ = ["Limits", "ServerConfig", "create_app"]

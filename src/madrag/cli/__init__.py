"""The ``madrag`` command line: the app and one module per command group (``python -m madrag.cli``)."""

from madrag.cli.app import app, main

__all__ = ["app", "main"]

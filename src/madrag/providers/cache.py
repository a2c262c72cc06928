"""On-disk response cache keyed by the full request (SQLite, one file, safe across processes)."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from madrag.providers.base import ChatResponse


def default_cache_dir() -> Path:
    """Exemplar indexes, the response cache and converted models: ``$MADRAG_CACHE``, else ``~/.cache/madrag``."""
    return Path(os.environ.get("MADRAG_CACHE", Path.home() / ".cache" / "madrag"))


class ResponseCache:
    """Maps :meth:`ChatRequest.cache_key` to a stored :class:`ChatResponse`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL)")

    def get(self, key: str) -> ChatResponse | None:
        """The stored response (marked ``cached``), or None."""
        with self._lock:
            row = self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return ChatResponse.model_validate_json(row[0]).model_copy(update={"cached": True, "retries": []})

    def put(self, key: str, response: ChatResponse) -> None:
        """Store (or replace) the response to ``key``."""
        blob = response.model_dump_json()
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses (key, response) VALUES (?, ?)", (key, blob))

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

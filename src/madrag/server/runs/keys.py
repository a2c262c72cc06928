"""API keys typed into a page or an API call: held in this process's memory only.

A key is stored under the name its run records (``MADRAG_SERVE_KEY_<ID>``, the run's ``key_env``), and given to
the backend's client when the run's backend is built. It is never put into ``os.environ`` (where child
processes and anything reading the environment would see it) and never written to disk: a restart forgets it,
and resuming such a run asks for it again.
"""

from __future__ import annotations

import threading

from pydantic import SecretStr

KEY_PREFIX = "MADRAG_SERVE_KEY_"


def key_name(run_id: str) -> str:
    """The name a run's typed key is held under (and recorded as the run's ``key_env``)."""
    return f"{KEY_PREFIX}{run_id.upper()}"


class KeyStore:
    """Typed API keys by name, in memory; each name's ``version`` counts its replacements (a backend built with
    an older key is not reused)."""

    def __init__(self) -> None:
        self._keys: dict[str, SecretStr] = {}
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

    def put(self, name: str, key: SecretStr) -> None:
        """Hold ``key`` under ``name`` (replacing any older one); an empty key is not held."""
        if not key.get_secret_value():
            return
        with self._lock:
            self._keys[name] = key
            self._versions[name] = self._versions.get(name, 0) + 1

    def get(self, name: str | None) -> SecretStr | None:
        """The key held under ``name``; None when there is none (a restart forgot it, or it was never typed)."""
        if name is None:
            return None
        with self._lock:
            return self._keys.get(name)

    def version(self, name: str | None) -> int:
        with self._lock:
            return 0 if name is None else self._versions.get(name, 0)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._keys

    def __repr__(self) -> str:
        return f"KeyStore({len(self._keys)} keys)"

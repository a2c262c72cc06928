"""The server's settings: where runs live, who may call it, how much it accepts, and its default backend.

A :class:`ServerConfig` is built by ``madrag serve`` from its options (or by a test) and handed to
:func:`madrag.server.app.create_app`. A backend's API key is never part of it: the server reads keys from its
environment (the variable :meth:`ServerConfig.key_env` names for the backend's kind) or holds a key typed into a
page in memory only.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from madrag.data.row_limit import MAX_ROWS
from madrag.providers.backends import find_backend
from madrag.providers.runtimes import DEFAULT_RUNTIME, LlamaRuntime
from madrag.retrieval.embedder import EmbedderName

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is reachable only from this machine."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


MIN_PUBLIC_TOKEN = 16
"""The fewest characters of the token of a server bound to a non-loopback address."""


def token_problem(token: str | None, host: str) -> str | None:
    """Why ``token`` cannot guard a server bound to ``host`` (None when it can, or when none is given): off
    loopback at least :data:`MIN_PUBLIC_TOKEN` characters and no whitespace; on loopback not blank."""
    if token is None:
        return None
    if not token.strip():
        return "the token is blank: give one of printable characters, or none"
    if is_loopback(host):
        return None
    if len(token) < MIN_PUBLIC_TOKEN or any(c.isspace() for c in token):
        return (
            f"a server bound to {host} (not a loopback address) needs a token of at least {MIN_PUBLIC_TOKEN} "
            "characters without spaces (or none: one is generated and printed once)"
        )
    return None


class Limits(BaseModel):
    """What one request may bring: an upload is refused with 413 above ``max_upload_bytes``; essays above
    ``max_rows`` or longer than ``max_essay_chars`` are refused with the reason."""

    model_config = ConfigDict(frozen=True)

    max_upload_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    max_rows: int = Field(default=MAX_ROWS, ge=1)  # the loaders' limit too (madrag.data.row_limit)
    max_essay_chars: int = Field(default=50_000, ge=100)
    max_rubric_bytes: int = Field(default=256 * 1024, ge=256)
    max_time_limit_s: float = Field(default=600.0, gt=0)


def default_data_dir() -> Path:
    """``$MADRAG_SERVER_DIR``, else ``~/.local/share/madrag/server``."""
    env = os.environ.get("MADRAG_SERVER_DIR")
    return Path(env) if env else Path.home() / ".local" / "share" / "madrag" / "server"


class ServerConfig(BaseModel):
    """Everything the app needs to start.

    ``token``: when set, every page and API call must carry it; it must be set when ``host`` is not a loopback
    address (``madrag serve`` generates one then). ``backend_concurrency``: requests in flight to one backend,
    shared by every run on it. ``embedder``: the exemplar pools' (MiniLM; ``hashing`` for quick checks and tests).
    ``api_key_env`` and ``kind_key_envs``: the environment variables of the backends' keys
    (:meth:`key_env`); ``api_key_urls`` and ``kind_key_urls``: the base URLs such a key is sent to besides its
    kind's own address (:meth:`key_urls`); ``allow_backend_urls``: the model servers a run or a connection test may
    reach besides loopback, the presets and the key URLs (:mod:`madrag.server.access`); ``allow_lms_urls``: the
    Canvas addresses the LMS pages and API may reach besides loopback ones (:func:`madrag.server.access.check_lms`).
    """

    model_config = ConfigDict(frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    limits: Limits = Field(default_factory=Limits)
    asap_dir: Path | None = None
    cache_dir: Path | None = None
    model_path: str | None = None  # the embedded backend's GGUF (chosen by whoever starts the server)
    slots: int = Field(default=2, ge=1)
    runtime: LlamaRuntime = DEFAULT_RUNTIME  # what runs the embedded backend's model (see madrag.providers.runtimes)
    backend_concurrency: int = Field(default=8, ge=1)
    api_key_env: str | None = None  # ``--api-key-env VAR``: the OpenAI-compatible backends' key variable
    kind_key_envs: dict[str, str] = Field(default_factory=dict)  # ``--api-key-env KIND=VAR``: one kind's
    api_key_urls: tuple[str, ...] = ()  # ``--api-key-url URL``: the OpenAI-compatible backends' key goes there too
    kind_key_urls: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # ``--api-key-url KIND=URL``
    allow_backend_urls: tuple[str, ...] = ()  # ``--allow-backend-url URL``: a model server runs may reach
    allow_lms_urls: tuple[str, ...] = ()  # ``--allow-lms-url URL``: a Canvas the LMS pages and API may reach
    auto_resume: bool = False
    embedder: EmbedderName = "minilm"

    @model_validator(mode="after")
    def _strong_token(self) -> ServerConfig:
        if problem := token_problem(self.token, self.host):
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _urls(self) -> ServerConfig:
        named = [
            *self.api_key_urls,
            *self.allow_backend_urls,
            *self.allow_lms_urls,
            *(u for us in self.kind_key_urls.values() for u in us),
        ]
        for url in named:
            parts = urlsplit(url.strip())
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
        return self

    def key_env(self, kind: str) -> str | None:
        """The environment variable a run of ``kind`` reads its API key from when none is typed in: the one
        named for that kind (``--api-key-env KIND=VAR``), else, for an OpenAI-compatible backend (the one the
        connection test applies to), the one named alone (``--api-key-env VAR``), else the kind's own default
        (its options' ``api_key_env``: ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``); None for a kind that reads no
        key from a variable. A ConfigError for a kind not registered."""
        backend = find_backend(kind)
        if kind in self.kind_key_envs:
            return self.kind_key_envs[kind]
        if self.api_key_env and backend.traits.connection_test:
            return self.api_key_env
        field = backend.option_fields().get("api_key_env")
        default = None if field is None else field.default
        return default if isinstance(default, str) and default else None

    def key_urls(self, kind: str) -> tuple[str, ...]:
        """The base URLs the server's environment key of ``kind`` is sent to besides the kind's own address
        (``--api-key-url KIND=URL``, and ``--api-key-url URL`` for an OpenAI-compatible backend)."""
        alone = self.api_key_urls if find_backend(kind).traits.connection_test else ()
        return (*self.kind_key_urls.get(kind, ()), *alone)

    @property
    def token_required(self) -> bool:
        """A token guards the server when one is set, and one must be set off loopback."""
        return self.token is not None or not is_loopback(self.host)

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

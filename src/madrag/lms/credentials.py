"""The Canvas address and access token, kept in one file of madrag's data directory, readable by its owner only
(mode 0600), and nowhere else: never logged, never in a run, a manifest, a journal or an export. The token is a
:class:`~pydantic.SecretStr`, so a repr or a dump of the model shows ``**********``."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from madrag.errors import ConfigError

FILE_NAME = "canvas-credentials.json"


def data_dir() -> Path:
    """madrag's data directory: ``$MADRAG_DATA_DIR``, else ``~/.local/share/madrag``."""
    env = os.environ.get("MADRAG_DATA_DIR")
    return Path(env) if env else Path.home() / ".local" / "share" / "madrag"


class CanvasCredentials(BaseModel):
    """A Canvas instance's address (``https://school.instructure.com``) and a user's access token."""

    model_config = ConfigDict(frozen=True)

    url: str
    token: SecretStr


def check_url(url: str) -> str:
    """The Canvas address as canvasapi takes it (no trailing ``/``, no ``/api/v1``); a ConfigError for one that is
    not an http(s) address."""
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"the Canvas address must start with https:// (e.g. https://school.instructure.com), not {url!r}"
        )
    return url


def credentials_path(folder: Path | None = None) -> Path:
    return (folder or data_dir()) / FILE_NAME


def save_credentials(url: str, token: str, folder: Path | None = None) -> Path:
    """Keep the address and token in the data directory, the file created readable by its owner only (0600) and
    renamed into place whole; returns its path."""
    if not token.strip():
        raise ConfigError(
            "the Canvas access token is empty: make one in Canvas under Account > Settings > New access token"
        )
    creds = CanvasCredentials(url=check_url(url), token=SecretStr(token.strip()))
    path = credentials_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"url": creds.url, "token": creds.token.get_secret_value()}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return path


def load_credentials(folder: Path | None = None) -> CanvasCredentials:
    """The stored address and token; a ConfigError saying how to store them when there are none, or when the file
    can be read by others (its mode is not 0600)."""
    path = credentials_path(folder)
    if not path.is_file():
        raise ConfigError("no Canvas connection: run `madrag lms connect --url https://school.instructure.com` first")
    if path.stat().st_mode & 0o077:
        raise ConfigError(f"{path} can be read by other users: run `chmod 600 {path}` (or `madrag lms connect` again)")
    try:
        return CanvasCredentials.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError):
        raise ConfigError(f"{path} is not a Canvas connection madrag wrote: run `madrag lms connect` again") from None

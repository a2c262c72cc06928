"""Google's OAuth for Classroom: the installed-app flow on this machine (a browser page of Google's, its answer
taken by a one-time server on ``127.0.0.1`` at a free port), with the school's own OAuth client file (none ships with
madrag: docs/lms.md says how a school registers one), and the token it gives kept in ``classroom-token.json`` in
madrag's data directory, readable by its owner only (0600, :func:`madrag.lms.credentials.write_private`): never
logged, never in a run, a manifest, a journal or an export. An expired token is refreshed with its refresh token
and kept again."""

from __future__ import annotations

import json
import webbrowser
from pathlib import Path
from typing import Any

from madrag.errors import ConfigError
from madrag.extras import require
from madrag.lms.calls import LmsTransient
from madrag.lms.credentials import data_dir, read_private, write_private

TOKEN_FILE = "classroom-token.json"
SIGN_IN_S = 300
SCOPES = (
    "https://www.googleapis.com/auth/classroom.courses.readonly",
    "https://www.googleapis.com/auth/classroom.coursework.students",
    "https://www.googleapis.com/auth/classroom.rosters.readonly",
    "https://www.googleapis.com/auth/classroom.profile.emails",
    "https://www.googleapis.com/auth/drive.readonly",
)
"""What madrag asks of the teacher's Google account: her courses, her courses' coursework and students' submissions
(read, grade, return, and create an assignment), the roster with emails, and the Drive files handed in (read)."""
CONNECT = "run `madrag lms classroom connect --client-file FILE` (FILE: your school's OAuth client, docs/lms.md)"


def token_path(folder: Path | None = None) -> Path:
    return (folder or data_dir()) / TOKEN_FILE


def authorize(client_file: Path) -> Any:
    """Google's sign-in in the browser with the school's OAuth client file: the credentials it grants."""
    if not client_file.is_file():
        raise ConfigError(f"no OAuth client file at {client_file}: download it from your school's Google Cloud project")
    flow = require("lms", "google_auth_oauthlib.flow").InstalledAppFlow
    try:
        app = flow.from_client_secrets_file(str(client_file), scopes=list(SCOPES))
    except (ValueError, KeyError) as exc:
        raise ConfigError(
            f"{client_file} is not an OAuth client file of a desktop app ({str(exc)[:120]}): docs/lms.md"
        ) from None
    try:
        return app.run_local_server(host="127.0.0.1", port=0, open_browser=_has_browser(), timeout_seconds=SIGN_IN_S)
    except require("lms", "google_auth_oauthlib.flow").WSGITimeoutError:
        raise ConfigError(f"no answer from Google's sign-in within {SIGN_IN_S // 60} minutes: connect again") from None


def _has_browser() -> bool:
    """Whether this machine can open a browser (without one the flow prints the address to open by hand)."""
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def save_token(credentials: Any, folder: Path | None = None) -> Path:
    """Keep the credentials (token, refresh token, the client's id) in the data directory, mode 0600."""
    path = token_path(folder)
    write_private(path, credentials.to_json())
    return path


def load_token(folder: Path | None = None) -> Any:
    """The kept credentials, refreshed (and kept again) when expired; a ConfigError saying how to connect."""
    path = token_path(folder)
    text = read_private(path, f"no Google Classroom connection: {CONNECT}")
    creds_module = require("lms", "google.oauth2.credentials")
    try:
        creds = creds_module.Credentials.from_authorized_user_info(json.loads(text), list(SCOPES))
    except (ValueError, KeyError):
        raise ConfigError(f"{path} is not a Google connection madrag wrote: {CONNECT}") from None
    if creds.expired and creds.refresh_token:
        transport = require("lms", "google.auth.transport.requests")
        errors = require("lms", "google.auth.exceptions")
        try:
            creds.refresh(transport.Request())
        except errors.RefreshError:
            raise ConfigError(f"Google no longer accepts the kept sign-in (revoked or expired): {CONNECT}") from None
        except errors.TransportError:
            raise LmsTransient("Google could not be reached to renew the kept sign-in: try again later") from None
        save_token(creds, folder)
    return creds

"""Shared inputs of the server tests: a small rubric, essays with scores and folds, and a client factory."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from madrag.server import ServerConfig, create_app

RUBRIC: dict[str, Any] = {
    "name": "Class rubric",
    "prompt": "Write about a time you were patient.",
    "traits": [
        {"name": "Ideas", "min": 0, "max": 3, "levels": {str(i): f"ideas level {i}" for i in range(4)}},
        {"name": "Style", "min": 1, "max": 4, "levels": {str(i): f"style level {i}" for i in range(1, 5)}},
    ],
}
TEXTS = [
    "I waited for the bus in the rain for an hour and kept calm because my sister was with me.",
    "Patience is when you wait. I waited at the doctor and read a book about whales.",
    "My grandmother taught me to fish; we sat by the lake all morning before anything bit.",
    "When the power went out we played cards by candle light until it came back.",
]
FAKE = {"kind": "fake"}


def essays_csv(n: int = 4, folds: bool = True, extra: list[dict[str, Any]] | None = None, scored: bool = True) -> str:
    """A CSV of ``n`` essays with two raters per trait (none when not ``scored``: a class nobody graded yet) and
    folds 0/1 alternating."""
    buf = io.StringIO()
    raters = ["rater1_Ideas", "rater2_Ideas", "rater1_Style", "rater2_Style"] if scored else []
    fields = ["id", "text", *raters] + (["fold"] if folds else [])
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    for i in range(n):
        row: dict[str, Any] = {
            "id": f"s{i + 1}",
            "text": TEXTS[i % len(TEXTS)],
            "rater1_Ideas": i % 4,
            "rater2_Ideas": (i + 1) % 4,
            "rater1_Style": 1 + i % 4,
            "rater2_Style": 1 + i % 4,
        }
        if folds:
            row["fold"] = i % 2
        writer.writerow({k: v for k, v in row.items() if k in fields})
    for row in extra or []:
        writer.writerow(row)
    return buf.getvalue()


def essays_json(n: int = 3) -> list[dict[str, Any]]:
    """Essays as API objects (id, text, one score per trait)."""
    return [{"id": f"e{i + 1}", "text": TEXTS[i % len(TEXTS)], "Ideas": i % 4, "Style": 1 + i % 4} for i in range(n)]


HTML = {"Accept": "text/html"}
"""The headers of a browser asking for a page."""


def token_in(page: str) -> str:
    """The CSRF token the page's forms carry."""
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def csrf(client: TestClient, path: str = "/") -> str:
    """The CSRF token of the page at ``path``."""
    return token_in(client.get(path, headers=HTML).text)


def form_post(client: TestClient, path: str, token: str, files: object = None, **data: str) -> Any:
    """A browser's form post with its CSRF token (no redirect followed)."""
    return client.post(path, data={"csrf_token": token, **data}, files=files, headers=HTML, follow_redirects=False)


def draft_at_backend(client: TestClient, token: str, n_essays: int = 2) -> str:
    """A draft through the set-up's first steps (the rubric, ``n_essays`` essays, no exemplars): its id, at the
    backend step."""
    draft: str = form_post(client, "/new", token).headers["location"].split("/")[2]
    rubric = {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")}
    form_post(client, f"/drafts/{draft}/rubric", token, rubric, mode="upload")
    essays = {"file": ("c.csv", essays_csv(n_essays, folds=False).encode(), "text/csv")}
    form_post(client, f"/drafts/{draft}/essays", token, essays, mode="upload")
    form_post(client, f"/drafts/{draft}/exemplars", token, pool="none")
    return draft


def make_config(tmp_path: Path, **fields: Any) -> ServerConfig:
    return ServerConfig(data_dir=tmp_path / "server", cache_dir=tmp_path / "cache", **fields)


@contextmanager
def client_for(config: ServerConfig, base_url: str = "http://127.0.0.1:8000") -> Iterator[TestClient]:
    with TestClient(create_app(config), base_url=base_url) as client:
        yield client


def wait_status(
    client: TestClient, run_id: str, timeout: float = 30.0, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """Poll a run until it is no longer queued or running."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/api/runs/{run_id}", headers=headers).json()
        if body["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return body
        time.sleep(0.05)

"""An Anthropic run started from the backend page, in process (FastAPI's TestClient) over the stub of Anthropic's
Messages API (tests/anthropic_stub.py, the anthropic backend's own tests' stub): the key typed into the page, or
else the server environment's ``ANTHROPIC_API_KEY`` where its operator bound it to the URL (never
``OPENAI_API_KEY``'s value, nor a key typed for another backend), reaches the API in ``x-api-key``; ``run.json``
records the kind and where the key came from, never the key; "Test connection" says plainly that such a server is
not tested before the run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.anthropic_stub import KEY, Stub, messages_api
from tests.script_server import closed_port
from tests.web_helpers import (
    client_for,
    csrf,
    draft_at_backend,
    form_post,
    make_config,
    wait_status,
)

from madrag.server import ServerConfig
from madrag.teacher.presets import PRESETS

MODEL = "claude-stub-1"
OPENAI_SECRET = "sk-openai-must-not-travel"


def _start(client: Any, token: str, draft: str, **fields: str) -> dict[str, Any]:
    """Start the run from the backend page with ``fields`` and wait for it to end; the run as the API shows it."""
    form = {"kind": "anthropic", "model": MODEL, "protocols": "MA", "action": "start", "max_tokens": "64", **fields}
    started = form_post(client, f"/drafts/{draft}/backend", token, **form)
    assert started.status_code == 303, started.text
    run_id = started.headers["location"].rsplit("/", 1)[-1]
    return wait_status(client, run_id, timeout=60)


def _recorded(tmp_path: Path, run_id: str) -> tuple[dict[str, Any], str]:
    """The run's ``run.json``, read and as text."""
    text = (tmp_path / "server" / "runs" / run_id / "run.json").read_text(encoding="utf-8")
    return json.loads(text), text


def test_an_anthropic_run_from_the_page_sends_the_typed_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    stub = Stub()
    with messages_api(stub) as url, client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        fields = {"kind": "anthropic", "model": MODEL, "base_url": url, "api_key": KEY}
        tested = form_post(client, f"/drafts/{draft}/backend", token, **fields, action="test")
        assert tested.status_code == 200 and 'class="field-error"' not in tested.text
        note = re.search(r'<p class="note" id="not-tested-anthropic"[^>]*role="status">([^<]*)</p>', tested.text)
        assert note is not None and "not tested before the run" in note.group(1)
        assert stub.requests == []  # said, not tried: the test request is an OpenAI-compatible one
        run = _start(client, token, draft, base_url=url, api_key=KEY, logprobs="yes", concurrency="2")
        assert run["status"] == "finished", run
        assert len(stub.requests) == 2 * 2 and stub.keys_seen() == {KEY}  # 2 essays x 2 traits, one judge each
        assert {body["model"] for _, body in stub.requests} == {MODEL}
        assert all(OPENAI_SECRET not in json.dumps(headers) for headers, _ in stub.requests)
        scores = client.get(f"/api/runs/{run['id']}/scores").json()["rows"]
        assert len(scores) == 4 and {row["score"] for row in scores} == {2}  # the stub's "Final score: 2"
    meta, text = _recorded(tmp_path, run["id"])
    assert meta["backend"]["kind"] == "anthropic" and meta["backend"]["model"] == MODEL
    assert meta["backend"]["base_url"] == url and meta["backend"]["key_source"] == "memory"
    assert meta["backend"]["logprobs"] is None  # the form's Confidence is not the anthropic backend's: dropped
    assert meta["backend"]["concurrency"] == 2
    assert meta["key_env"].startswith("MADRAG_SERVE_KEY_") and KEY not in text and OPENAI_SECRET not in text


def _bound(tmp_path: Path, url: str) -> ServerConfig:
    """``--api-key-env VAR`` (the OpenAI-compatible one's) and ``--api-key-url anthropic=URL``: the server's
    Anthropic key goes to the stub's URL (besides Anthropic's own address), as an operator binds it."""
    return make_config(tmp_path, api_key_env="MADRAG_TEST_OPENAI_KEY", kind_key_urls={"anthropic": (url,)})


def test_without_a_typed_key_the_run_reads_the_servers_anthropic_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("MADRAG_TEST_OPENAI_KEY", OPENAI_SECRET)
    stub = Stub()
    with messages_api(stub) as url, client_for(_bound(tmp_path, url)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        typed_for_openai = {"kind": "openai", "model": "m", "base_url": dead, "api_key": OPENAI_SECRET}
        tested = form_post(client, f"/drafts/{draft}/backend", token, **typed_for_openai, action="test")
        assert "The server did not answer" in tested.text  # the OpenAI key is now held for this draft...
        run = _start(client, token, draft, base_url=url)  # ...and the teacher changes to Anthropic, typing none
        assert run["status"] == "finished", run
        assert stub.requests and stub.keys_seen() == {KEY}  # the server's ANTHROPIC_API_KEY, never the OpenAI one
    meta, text = _recorded(tmp_path, run["id"])
    assert meta["backend"]["kind"] == "anthropic" and meta["backend"]["key_source"] == "server-env"
    assert meta["key_env"] == "ANTHROPIC_API_KEY" and KEY not in text and OPENAI_SECRET not in text


def test_a_presets_address_left_in_the_field_is_not_sent_to_another_kind(tmp_path: Path) -> None:
    """The presets fill the shared Server URL with an OpenAI-compatible server's address; a teacher who then
    picks Anthropic without clearing it gets Anthropic's own address, not the preset's."""
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client)
        draft = draft_at_backend(client, token)
        filled = form_post(client, f"/drafts/{draft}/backend", token, action="preset-openai")
        assert PRESETS["openai"].base_url in filled.text
        fields = {"kind": "anthropic", "model": MODEL, "base_url": PRESETS["openai"].base_url}
        form_post(client, f"/drafts/{draft}/backend", token, **fields, action="test")
        saved = json.loads((tmp_path / "server" / "drafts" / draft / "draft.json").read_text(encoding="utf-8"))
    assert saved["backend"]["kind"] == "anthropic" and "base_url" not in saved["backend"]

"""The server's own API key never leaves for a URL a caller names, and the server reaches only the model servers
its operator allowed (madrag.server.access).

A sentinel key is put in the server's environment (``$OPENAI_API_KEY`` and the variable of ``--api-key-env``); the
stub OpenAI-compatible server, on loopback (so allowed) but not a URL the key is bound to, counts every request
that carries the sentinel anywhere (address, headers, body). The connection test, a run and the backend page's
test all reach the stub, and none of its requests carries the key; the stub named with ``--api-key-url`` does
get it (the check can see a key arrive). An address that is not allowed is refused with a 403 naming the option
before any connection: the HTTP client is never asked to send.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.web_helpers import HTML, RUBRIC, client_for, essays_json, make_config, token_in, wait_status

from madrag.providers.http_client import AiohttpClient
from madrag.server import access
from madrag.testing.stub_server import MODEL, StubServer

SENTINEL = "sk-sentinel-9f3c2e1d7b6a5f4e3d2c1b0a"


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(capacity=8, latency_s=0.0, debater_tokens=20, judge_tokens=10, watch=SENTINEL) as server:
        yield server


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses the server's HTTP client was asked to send to (every request of a run or a test)."""
    seen: list[str] = []
    original = AiohttpClient._send

    async def recording(self: AiohttpClient, method: str, path: str, content: bytes | None) -> bytes:
        seen.append(str(self._url(path)))
        return await original(self, method, path, content)

    monkeypatch.setattr(AiohttpClient, "_send", recording)
    return seen


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.setenv("TEAM_KEY", SENTINEL)


def openai(url: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "openai", "model": MODEL, "base_url": url, "max_tokens": 64, **fields}


def run_body(url: str, **fields: Any) -> dict[str, Any]:
    return {"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": openai(url, **fields)}


@pytest.mark.parametrize("key_env", [None, "TEAM_KEY"])
def test_the_servers_key_never_reaches_a_url_a_caller_names(
    tmp_path: Path, stub: StubServer, keyed: None, sent: list[str], key_env: str | None
) -> None:
    stub.reset_stats()
    with client_for(make_config(tmp_path, api_key_env=key_env)) as client:
        tested = client.post("/api/backends/test", json=openai(stub.base_url)).json()
        assert tested["answered"] is True, tested
        created = client.post("/api/runs", json=run_body(stub.base_url))
        assert created.status_code == 201, created.text
        run = wait_status(client, created.json()["id"], timeout=60)
        assert run["status"] == "finished", run["error"]
        assert run["backend"]["key_source"] == "none"  # it says so: no key of the server's goes with it
        typed = client.post("/api/backends/test", json=openai(stub.base_url, api_key="sk-typed-by-the-caller"))
        assert typed.json()["answered"] is True
    seen = stub.stats()
    assert seen.http_requests >= 5 and len(sent) >= 5  # the tests and the run's calls all reached the stub
    assert seen.watched == 0  # and not one of them carried the server's key


def test_the_backend_pages_test_sends_no_key_of_the_servers(
    tmp_path: Path, stub: StubServer, keyed: None, sent: list[str]
) -> None:
    stub.reset_stats()
    with client_for(make_config(tmp_path)) as client:
        token = token_in(client.get("/", headers=HTML).text)
        new = client.post("/new", data={"csrf_token": token}, follow_redirects=False)
        draft = new.headers["location"].split("/")[2]
        rid = client.post("/api/rubrics", json=RUBRIC).json()["id"]
        client.post(f"/drafts/{draft}/rubric", data={"csrf_token": token, "mode": "shipped", "rubric_id": rid})
        form = {"csrf_token": token, "kind": "openai", "model": MODEL, "base_url": stub.base_url, "action": "test"}
        page = client.post(f"/drafts/{draft}/backend", data=form, headers=HTML)
        assert page.status_code == 200 and "returns logprobs" in page.text
        # a key typed with one URL is not sent to another the form names later
        typed = {**form, "api_key": "sk-typed-for-the-stub"}
        client.post(f"/drafts/{draft}/backend", data=typed, headers=HTML)
        assert (
            client.app.state.madrag.drafts.backend(  # type: ignore[attr-defined]
                client.app.state.madrag.drafts.get(draft)  # type: ignore[attr-defined]
            ).api_key
            is not None
        )
        moved = client.post(f"/drafts/{draft}/backend", data={**form, "base_url": "http://localhost:9/v1"})
        assert moved.status_code == 200
        drafts = client.app.state.madrag.drafts  # type: ignore[attr-defined]
        assert drafts.backend(drafts.get(draft)).api_key is None
    assert stub.stats().http_requests >= 2 and stub.stats().watched == 0


def test_the_key_goes_where_the_operator_bound_it(tmp_path: Path, stub: StubServer, keyed: None) -> None:
    """The control: the stub named with ``--api-key-url`` gets the key (so the stub would see one arrive)."""
    stub.reset_stats()
    with client_for(make_config(tmp_path, api_key_urls=(stub.base_url + "/",))) as client:
        assert client.post("/api/backends/test", json=openai(stub.base_url)).json()["answered"] is True
    assert stub.stats().watched >= 1


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1:8000/v1",
        "http://169.254.169.254/latest",
        "https://models.example.com/v1",
        "http://[fd00::1]/v1",
    ],
)
def test_an_address_not_allowed_is_refused_before_any_connection(
    tmp_path: Path, keyed: None, sent: list[str], monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    resolved: list[str] = []

    def resolver(host: str, port: int) -> list[str]:  # no DNS: the name resolves to a public address
        resolved.append(host)
        return ["93.184.216.34"]

    monkeypatch.setattr(access, "resolve", resolver)
    with client_for(make_config(tmp_path)) as client:
        tested = client.post("/api/backends/test", json=openai(url))
        assert tested.status_code == 403, tested.text
        message = tested.json()["error"]["message"]
        assert "--allow-backend-url" in message and tested.json()["error"]["field"] == "base_url"
        created = client.post("/api/runs", json=run_body(url))
        assert created.status_code == 403 and "--allow-backend-url" in created.json()["error"]["message"]
        assert client.get("/api/runs").json() == []  # nothing was written for it
        token = token_in(client.get("/", headers=HTML).text)
        new = client.post("/new", data={"csrf_token": token}, follow_redirects=False)
        draft = "/drafts/" + new.headers["location"].split("/")[2]
        rid = client.post("/api/rubrics", json=RUBRIC).json()["id"]
        client.post(f"{draft}/rubric", data={"csrf_token": token, "mode": "shipped", "rubric_id": rid})
        form = {"csrf_token": token, "kind": "openai", "model": MODEL, "base_url": url, "action": "test"}
        page = client.post(f"{draft}/backend", data=form, headers=HTML)
        assert page.status_code == 403 and "--allow-backend-url" in page.text
    assert sent == []  # the HTTP client was never asked to send anything
    assert resolved == (["models.example.com"] * 3 if "example" in url else [])


def test_a_name_is_resolved_and_every_address_must_be_allowed(
    tmp_path: Path, stub: StubServer, sent: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = {"local.test": ["127.0.0.1"], "mixed.test": ["127.0.0.1", "10.1.2.3"]}
    monkeypatch.setattr(access, "resolve", lambda host, port: answers.get(host, []))
    with client_for(make_config(tmp_path)) as client:
        mixed = client.post("/api/backends/test", json=openai(f"http://mixed.test:{stub.port}/v1"))
        assert mixed.status_code == 403 and "10.1.2.3" in mixed.json()["error"]["message"]
        nowhere = client.post("/api/backends/test", json=openai("http://nowhere.test/v1"))
        assert nowhere.status_code == 403 and "resolves to no address" in nowhere.json()["error"]["message"]
    assert sent == []
    with client_for(make_config(tmp_path, allow_backend_urls=("http://10.0.0.1:8000",))) as client:
        assert client.app.state.madrag.config.allow_backend_urls  # type: ignore[attr-defined]
        access.check_address(client.app.state.madrag.config, "http://10.0.0.1:8000/v1")  # allowed: no error


def test_a_name_that_changes_its_address_before_the_connection_is_refused_there(
    tmp_path: Path, stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name resolves to loopback when the request is checked, to 10.0.0.1 when the HTTP client
    resolves it to connect; the client's guard refuses it before any connection (and lets loopback through)."""
    import aiohttp.connector

    from madrag.providers import http_client

    monkeypatch.setattr(access, "resolve", lambda host, port: ["127.0.0.1"])  # what the check sees
    when_connecting = {"address": "10.0.0.1"}

    class Rebinding:  # what the HTTP client sees
        async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[dict[str, Any]]:
            address = when_connecting["address"]
            return [{"hostname": host, "host": address, "port": port, "family": 2, "proto": 0, "flags": 0}]

        async def close(self) -> None:
            pass

    monkeypatch.setattr(http_client, "DefaultResolver", Rebinding)
    connected: list[str] = []
    original = aiohttp.connector.TCPConnector._wrap_create_connection

    async def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        connected.append(str(kwargs.get("host") or args[1:2]))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.connector.TCPConnector, "_wrap_create_connection", recording)
    url = f"http://rebind.test:{stub.port}/v1"
    with client_for(make_config(tmp_path)) as client:
        refused = client.post("/api/backends/test", json=openai(url)).json()
        assert refused["answered"] is False and "resolved to 10.0.0.1 when connecting" in refused["error"]
        assert "--allow-backend-url" in refused["error"] and connected == []
        when_connecting["address"] = "127.0.0.1"
        assert client.post("/api/backends/test", json=openai(url)).json()["answered"] is True
    assert connected and "10.0.0.1" not in " ".join(connected)

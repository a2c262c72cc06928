"""The server's runs as contracts: the JSON API's answers named in OpenAPI, a typed key held in memory only
(never in ``os.environ``, never on disk), and a cancel that returns promptly without blocking the event loop."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from tests.web_helpers import RUBRIC, client_for, essays_json, make_config, wait_status

from madrag.data.essay import Essay
from madrag.data.refusals import Refusals
from madrag.rubric import rubric_from_mapping
from madrag.server import create_app
from madrag.server.http.errors import http_status
from madrag.server.http.faults import BadInput, InvalidRequest, NotFound, OverLimit, Unavailable, WrongState
from madrag.server.http.schemas import BackendSettings
from madrag.server.runs.repo import RunMeta
from madrag.server.runs.scheduler import NewRun, RunManager
from madrag.testing.stub_server import MODEL, StubServer

SECRET = "sk-test-DO-NOT-STORE-9876543210"
JSON_ENDPOINTS = {
    ("get", "/api/health"): "Health",
    ("get", "/api/protocols"): "ProtocolInfo",
    ("get", "/api/rubrics"): "RubricSummary",
    ("post", "/api/rubrics"): "RubricOut",
    ("get", "/api/rubrics/{rubric_id}"): "RubricOut",
    ("post", "/api/backends/test"): "ProbeResult",
    ("post", "/api/runs"): "RunOut",
    ("get", "/api/runs"): "RunOut",
    ("get", "/api/runs/{run_id}"): "RunOut",
    ("post", "/api/runs/{run_id}/cancel"): "RunOut",
    ("post", "/api/runs/{run_id}/resume"): "RunOut",
    ("get", "/api/runs/{run_id}/scores"): "RunScores",
    ("get", "/api/runs/{run_id}/essays/{essay_id}"): "EssayRecords",
    ("get", "/api/runs/{run_id}/overrides"): "Review",
    ("post", "/api/runs/{run_id}/overrides"): "Review",
    ("get", "/api/runs/{run_id}/evaluation"): "EvaluationOut",
    ("post", "/api/score"): "SingleScore",
    ("get", "/api/lms/connection"): "Connection",
    ("post", "/api/lms/connect"): "Connection",
    ("get", "/api/lms/courses"): "CourseOut",
    ("get", "/api/lms/courses/{course_id}/assignments"): "AssignmentOut",
    ("post", "/api/lms/pull"): "PulledClass",
    ("post", "/api/lms/pulls/{pull_id}/run"): "RunOut",
    ("get", "/api/lms/runs/{run_id}/preview"): "PreviewOut",
    ("post", "/api/lms/runs/{run_id}/push"): "PushOut",
}


def _success_schema(operation: dict[str, Any]) -> dict[str, Any]:
    ok = next(code for code in operation["responses"] if code.startswith("2"))
    schema: dict[str, Any] = operation["responses"][ok]["content"]["application/json"]["schema"]
    return schema.get("items", schema)


def test_openapi_names_a_response_model_for_every_json_endpoint(tmp_path: Path) -> None:
    spec = create_app(make_config(tmp_path)).openapi()
    found = {}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            content = next(iter(operation["responses"].values())).get("content", {})
            if path.startswith("/api") and "application/json" in content:
                ref = _success_schema(operation).get("$ref", "")
                found[(method, path)] = ref.rsplit("/", 1)[-1]
    assert found == JSON_ENDPOINTS
    run = spec["components"]["schemas"]["RunOut"]["properties"]
    assert {"status", "backend", "progress", "key_env"} <= set(run) and "api_key" not in str(run)
    backend = spec["components"]["schemas"]["RunBackend"]["properties"]
    assert "key_source" in backend and "api_key" not in backend
    events = spec["paths"]["/api/runs/{run_id}/events"]["get"]["responses"]["200"]["content"]
    assert list(events) == ["text/event-stream"]


def test_domain_errors_map_to_status_codes_at_the_edge() -> None:
    cases = {NotFound("x"): 404, WrongState("x"): 409, InvalidRequest("x"): 422, BadInput("x"): 400}
    cases |= {OverLimit("x"): 413, Unavailable("x"): 503}
    assert [http_status(exc) for exc in cases] == list(cases.values())


class _WatchedEnviron(MutableMapping[str, str]):
    """``os.environ`` as it is, every value set into it noted."""

    def __init__(self, real: MutableMapping[str, str]) -> None:
        self.real = real
        self.set_values: list[str] = []

    def __getitem__(self, key: str) -> str:
        return self.real[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.set_values.append(value)
        self.real[key] = value

    def __delitem__(self, key: str) -> None:
        del self.real[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)


@pytest.fixture
def watched_env(monkeypatch: pytest.MonkeyPatch) -> _WatchedEnviron:
    watched = _WatchedEnviron(os.environ)
    monkeypatch.setattr(os, "environ", watched)
    return watched


def test_a_typed_key_reaches_the_backend_from_memory_never_the_environment_or_disk(
    tmp_path: Path, watched_env: _WatchedEnviron, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    config = make_config(tmp_path)
    with (
        StubServer(capacity=4, latency_s=0.0, debater_tokens=20, judge_tokens=10) as stub,
        client_for(config) as client,
    ):
        backend = {"kind": "openai", "model": MODEL, "base_url": stub.base_url, "api_key": SECRET, "max_tokens": 64}
        tested = client.post("/api/backends/test", json=backend).json()
        assert tested["answered"] is True
        body = {"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": backend}
        run = wait_status(client, client.post("/api/runs", json=body).json()["id"], timeout=60)
        assert run["status"] == "finished", run["error"]
        runs: RunManager = client.app.state.madrag.runs  # type: ignore[attr-defined]
        name = f"MADRAG_SERVE_KEY_{run['id'].upper()}"
        assert run["key_env"] == name and run["backend"]["key_source"] == "memory"
        stored = runs.keys.get(name)
        assert stored is not None and stored.get_secret_value() == SECRET
        [shared] = runs.backends.all()
        assert shared.inner._client.api_key == SECRET  # type: ignore[attr-defined]  # the run's calls sent it
    assert SECRET not in watched_env.set_values and SECRET not in os.environ.values() and name not in os.environ
    assert SECRET not in caplog.text and SECRET not in repr(runs.keys)
    for path in config.data_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_after_a_restart_a_memory_key_is_asked_for_again_and_held_in_memory(
    tmp_path: Path, watched_env: _WatchedEnviron
) -> None:
    config = make_config(tmp_path)
    dead = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": SECRET, "logprobs": True}
    body = {"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": dead}
    with client_for(config) as client:
        run_id = client.post("/api/runs", json=body).json()["id"]
        client.post(f"/api/runs/{run_id}/cancel", json={})  # the backend is not there; stop retrying it
        assert wait_status(client, run_id)["status"] in ("cancelled", "failed")
    with client_for(config) as client:  # a new server process: the key is gone
        refused = client.post(f"/api/runs/{run_id}/resume", json={})
        assert refused.status_code == 400 and refused.json()["error"]["field"] == "api_key"
        again = client.post(f"/api/runs/{run_id}/resume", json={"api_key": SECRET})
        assert again.status_code == 202, again.text
        runs: RunManager = client.app.state.madrag.runs  # type: ignore[attr-defined]
        held = runs.keys.get(f"MADRAG_SERVE_KEY_{run_id.upper()}")
        assert held is not None and held.get_secret_value() == SECRET
        client.post(f"/api/runs/{run_id}/cancel", json={})
    assert SECRET not in watched_env.set_values and SECRET not in os.environ.values()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def test_cancel_returns_promptly_while_a_call_is_in_flight(client: TestClient) -> None:
    slow = {"kind": "fake", "fake_latency_s": 8.0}  # each call takes 8 s: the run is mid-call when cancelled
    body = {"rubric": RUBRIC, "essays": essays_json(2), "protocols": ["MAD"], "backend": slow}
    run = client.post("/api/runs", json=body).json()
    deadline = time.monotonic() + 10
    while client.get(f"/api/runs/{run['id']}").json()["status"] != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    cancelled = client.post(f"/api/runs/{run['id']}/cancel", json={})
    took = time.monotonic() - started
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert took < 2.0, f"cancel took {took:.2f} s"


def _new_run(backend: BackendSettings) -> NewRun:
    essays = [Essay(id=e["id"], text=e["text"]) for e in essays_json(2)]
    rubric = rubric_from_mapping(RUBRIC, "")
    return NewRun(rubric=rubric, essays=essays, refused=Refusals(), protocols=["MAD"], pool="none", backend=backend)


async def test_cancel_waits_for_the_run_to_stop_without_blocking_the_event_loop(tmp_path: Path) -> None:
    """The run takes 0.6 s to record that it stopped (a slow disk): a cancel awaits that while the loop serves
    everything else; the old cancel slept in the loop and nothing else ran meanwhile."""
    runs = RunManager(make_config(tmp_path))
    try:
        meta = runs.create(_new_run(BackendSettings(kind="fake", fake_latency_s=8.0)))
        deadline = time.monotonic() + 10
        while runs.meta(meta.id).status != "running" and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        real = runs.repo.update

        def slow_update(run_id: str, **fields: Any) -> RunMeta:
            if fields.get("status") == "cancelled":
                time.sleep(0.6)  # on the scoring thread
            return real(run_id, **fields)

        runs.repo.update = slow_update  # type: ignore[method-assign]
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        stopped = await runs.cancel(meta.id)
        took = time.monotonic() - started
        ticker.cancel()
        assert stopped.status == "cancelled" and 0.5 < took < 3.0
        assert ticks >= 10, f"the event loop ran only {ticks} times in {took:.2f} s of cancel"
    finally:
        runs.close()


def test_a_run_cancelled_before_it_starts_is_recorded_as_cancelled(tmp_path: Path) -> None:
    runs = RunManager(make_config(tmp_path))
    try:
        blocker = runs.worker.submit(asyncio.to_thread(time.sleep, 0))  # keep the loop's queue in order
        blocker.result(5)
        gate = threading.Event()
        runs.worker.loop.call_soon_threadsafe(gate.wait, 10)  # the loop is busy until the run is stopped
        meta = runs.create(_new_run(BackendSettings(kind="fake")))
        runs.stop(meta.id)
        gate.set()
        runs.wait(meta.id, 5)
        assert runs.meta(meta.id).status == "cancelled"
        assert runs.describe(meta.id)["progress"]["status"] == "cancelled"
    finally:
        runs.close()


def test_keys_are_typed_in_memory_and_never_printed() -> None:
    from madrag.server.runs.keys import KeyStore

    store = KeyStore()
    store.put("K", SecretStr(SECRET))
    store.put("EMPTY", SecretStr(""))
    held = store.get("K")
    assert held is not None and held.get_secret_value() == SECRET and "EMPTY" not in store
    assert SECRET not in repr(store) and SECRET not in repr(held) and store.get(None) is None
    version = store.version("K")
    store.put("K", SecretStr("another"))
    assert store.version("K") == version + 1

"""One limit on requests in flight to a model server (``--backend-concurrency``): every call of every run and
the connection test each new run sends first pass it, counted by the stub server itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.web_helpers import RUBRIC, client_for, essays_json, make_config, wait_status

from madrag.testing.stub_server import MODEL, StubServer

LIMIT = 3
RUNS = 8


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    """A server with room for every request at once (capacity far over the limit), each held 0.2 s, so that
    the most requests in flight it saw is what madrag sent together."""
    with StubServer(capacity=64, latency_s=0.2, debater_tokens=10, judge_tokens=8, logprobs=False) as server:
        yield server


def _backend(server: StubServer, **fields: Any) -> dict[str, Any]:
    return {"kind": "openai", "model": MODEL, "base_url": server.base_url, "max_tokens": 64, **fields}


def test_runs_started_together_never_put_more_than_the_limit_in_flight(tmp_path: Path, stub: StubServer) -> None:
    stub.reset_stats()
    with client_for(make_config(tmp_path, backend_concurrency=LIMIT)) as client:
        ids = []
        for i in range(RUNS):
            # half the runs with a trailing slash: two backend instances, one server, one limit
            url = stub.base_url + ("/" if i % 2 else "")
            body = {"rubric": RUBRIC, "essays": essays_json(1), "protocols": ["MAD"], "backend": _backend(stub)}
            body["backend"]["base_url"] = url
            created = client.post("/api/runs", json=body)
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        runs = [wait_status(client, run_id, timeout=120) for run_id in ids]
    assert [r["status"] for r in runs] == ["finished"] * RUNS, [r["error"] for r in runs]
    assert all(r["backend"]["logprobs"] is False for r in runs)  # each run sent its connection test first
    stats = stub.stats()
    assert stats.by_role and stats.requests >= RUNS * 3  # the tests and the runs' calls
    assert stats.max_in_flight <= LIMIT, f"{stats.max_in_flight} requests in flight at a limit of {LIMIT}"
    assert stats.max_in_flight == LIMIT  # the limit was reached: the check is not empty


def test_connection_tests_sent_together_pass_the_same_limit(tmp_path: Path, stub: StubServer) -> None:
    stub.reset_stats()
    with client_for(make_config(tmp_path, backend_concurrency=2)) as client:
        state = client.app.state.madrag  # type: ignore[attr-defined]

        async def many() -> list[Any]:
            tests = [state.runs.test_backend("openai", MODEL, stub.base_url, None, None) for _ in range(8)]
            return await asyncio.gather(*tests)

        found = asyncio.run(many())
    assert all(f.answered for f in found)
    assert stub.stats().max_in_flight == 2

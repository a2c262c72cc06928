"""The time left of a real run against a model server whose answers take varying times (the stub server, each
latency drawn from 0.03 to 0.27 s), read every tenth of a second as a page polls it: it never rises by more than
10 % from one reading to the next, and after the first 10 % of the calls it stays near the true time left (30 %,
or half a second at the very end) in most readings. The simulated-clock test (tests/unit/server/test_time_left.py)
is the main check; this one runs the whole path: the library's callbacks, the progress, the API."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from tests.web_helpers import RUBRIC, TEXTS, client_for, make_config

from madrag.server.runs.time_left import MAX_RISE
from madrag.testing.stub_server import StubServer

ESSAYS = 12


def test_a_run_against_a_varying_server_counts_down_steadily(tmp_path: Path) -> None:
    # each text its own (a repeated one would be answered from the response cache, at no time)
    essays = [{"id": f"e{i}", "text": f"{TEXTS[i % len(TEXTS)]} (essay {i})"} for i in range(ESSAYS)]
    with (
        StubServer(capacity=4, latency_s=0.15, latency_spread=0.8) as stub,
        client_for(make_config(tmp_path)) as client,
    ):
        backend = {"kind": "openai", "model": stub.config.model, "base_url": stub.base_url, "concurrency": 4}
        body = {"rubric": RUBRIC, "essays": essays, "protocols": ["MAD"], "backend": backend, "pool": "none"}
        run_id = client.post("/api/runs", json=body).json()["id"]
        readings: list[tuple[float, int, float | None]] = []
        while True:
            run = client.get(f"/api/runs/{run_id}").json()
            progress = run.get("progress") or {}
            if run["status"] not in ("queued", "running"):
                end = time.monotonic()
                break
            readings.append((time.monotonic(), progress.get("records", 0), progress.get("eta_s")))
            time.sleep(0.1)
        assert run["status"] == "finished", run
        total = run["progress"]["records"]
    shown = [(t, calls, eta) for t, calls, eta in readings if eta is not None]
    assert len(shown) > 10
    rises = [(b, a) for (_, _, a), (_, _, b) in itertools.pairwise(shown) if b > a * (1 + MAX_RISE)]
    assert not rises, f"rose by more than {MAX_RISE:.0%}: {rises}"
    late = [(end - t, eta) for t, calls, eta in shown if calls >= total / 10]
    off = [(round(true, 2), round(eta, 2)) for true, eta in late if abs(eta - true) > max(0.3 * true, 0.5)]
    # on a real clock shared with whatever else the machine runs, a stall moves the truth after a reading: most
    # readings, not every one (the simulated clock holds every one to it)
    assert len(off) <= len(late) // 3, f"(true, shown) off by more than 30%: {off} of {len(late)} readings"

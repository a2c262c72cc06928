"""How fast ``POST /api/runs`` answers while 20 clients create runs at once, before and after, in one run.

``madrag serve`` runs in its own process (the fake backend; the runs it starts score meanwhile on its scoring
thread, as they would in a class); 20 client threads, each connected first, then all released at once, each create
``--per-client`` runs of ``--essays`` essays given as fields. Printed: the answer time's median, 95th percentile
and maximum, per side. The older commit's ``src/`` is taken with ``git archive`` (``bench/district_memory.py``).

    python bench/post_runs.py --before 3728be7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from district_memory import env_for, free_port, source_of


def essays(n: int) -> list[dict[str, object]]:
    words = "the student waited patiently at the station while rain fell and the train was late".split()
    return [{"id": f"e{i}", "text": " ".join(words * 12), "Ideas": i % 4, "Style": 1 + i % 4} for i in range(n)]


RUBRIC = {
    "name": "bench",
    "prompt": "Write.",
    "traits": [
        {"name": t, "min": 0, "max": 3, "levels": {str(s): f"level {s}" for s in range(4)}} for t in ("Ideas", "Style")
    ],
}


def measure(src: Path, data_dir: Path, clients: int, per_client: int, n_essays: int) -> dict[str, Any]:
    port = free_port()
    cmd = [sys.executable, "-m", "madrag", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    cmd += ["--cache-dir", str(data_dir / "cache")]
    proc = subprocess.Popen(cmd, env=env_for(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times: list[float] = []
    errors: list[str] = []
    body = {"rubric": RUBRIC, "essays": essays(n_essays), "protocols": ["MAD"], "backend": {"kind": "fake"}}
    body["pool"] = "none"
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)

        ready = threading.Barrier(clients, timeout=120)  # a client that cannot connect breaks it, not a hang

        def client() -> None:
            with httpx.Client(base_url=base, timeout=120) as http:
                # connected before the clock starts (one GET each), then all at once: the times are the server's
                # answers to 20 clients, not 20 client threads starting and opening their connections
                http.get("/api/health")
                ready.wait()
                for _ in range(per_client):
                    started = time.perf_counter()
                    got = http.post("/api/runs", json=body)
                    times.append(time.perf_counter() - started)
                    if got.status_code != 201:
                        errors.append(f"{got.status_code} {got.text[:100]}")

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # what the scoring thread did meanwhile: the runs' states when the last answer came (scoring was going on)
        listed = httpx.get(f"{base}/api/runs", timeout=60).json()
        states = statistics_of([r["status"] for r in listed])
    finally:
        proc.terminate()
        proc.wait(30)
    ordered = sorted(times)
    return {
        "n": len(ordered),
        "errors": len(errors),
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "max": ordered[-1],
        "states": states,
    }


def statistics_of(statuses: list[str]) -> str:
    """``finished 12, running 1, queued 87``: how many runs are in each state."""
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--per-client", type=int, default=5)
    parser.add_argument("--essays", type=int, default=30)
    args = parser.parse_args()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sides = {
            f"before ({args.before})": source_of(args.before, root / "before"),
            "after": source_of("HEAD-tree", root / "after"),
        }
        found = {
            name: measure(src, root / f"data-{i}", args.clients, args.per_client, args.essays)
            for i, (name, src) in enumerate(sides.items())
        }
    print(f"POST /api/runs, {args.clients} clients x {args.per_client} runs of {args.essays} essays; load {load}")
    print("| side | requests | not 201 | p50 s | p95 s | max s | runs when the last answered |")
    print("|---|---|---|---|---|---|---|")
    for name, f in found.items():
        cells = f"{f['n']:.0f} | {f['errors']:.0f} | {f['p50']:.3f} | {f['p95']:.3f} | {f['max']:.3f} | {f['states']}"
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()

"""Web app benchmark: how fast ``madrag serve`` serves a large run's pages, and how soon progress reaches a browser.

1. Pages. A finished MADRAG run of 1,000 essays x 6 traits (18,000 records with prompts, tokens and exemplars)
   is synthesised with the library's run store (``tests/synthetic_runs.py``). The server is started as
   ``madrag serve`` in its own process; the results page (all 6,000 cells) and essay pages are fetched over HTTP.
   The first open of a run that has no score index makes the library's run reader read every Judge record once
   (a run scored by the server gets its index when it finishes, so it never pays this); that time is printed
   separately. Then each page is fetched ``--repeat`` times: median, 95th percentile and maximum.
2. Progress. A run on the fake backend is started and its server-sent event stream read; for every record
   event, the delay from the record's creation (before it is committed) and from its commit to its arrival at
   the client.

    python bench/web_pages.py                 # 1,000 x 6; prints a table; --out FILE writes it too
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
BUDGET_MS = 300.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "madrag.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    cmd += ["--cache-dir", str(data_dir / "cache")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def timed_get(client: httpx.Client, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = client.get(path)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")
    return elapsed, len(response.content)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p95": p95, "max": ordered[-1], "n": len(ordered)}


def bench_pages(data_dir: Path, essays: int, traits: int, repeat: int) -> dict[str, object]:
    sys.path.insert(0, str(REPO))  # the synthetic run is a test fixture (tests/synthetic_runs.py)
    from tests.synthetic_runs import rubric_of, synthesize_run

    started = time.perf_counter()
    run_id = synthesize_run(data_dir / "runs", essays, rubric_of(traits), failed_every=41)
    synth_s = time.perf_counter() - started
    port = free_port()
    proc = start_server(data_dir, port)
    out: dict[str, object] = {"essays": essays, "traits": traits, "records": essays * traits * 3, "synth_s": synth_s}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            first_ms, _ = timed_get(client, f"/runs/{run_id}/results")
            out["first_open_without_index_ms"] = first_ms
            results = [timed_get(client, f"/runs/{run_id}/results") for _ in range(repeat)]
            out["results_page"] = {**summary([t for t, _ in results]), "bytes": results[0][1]}
            ids = [f"e{i:05d}" for i in range(0, essays, max(1, essays // repeat))][:repeat]
            pages = [timed_get(client, f"/runs/{run_id}/essays/{eid}") for eid in ids]
            out["essay_page"] = {**summary([t for t, _ in pages]), "bytes": pages[0][1]}
            scores = [timed_get(client, f"/api/runs/{run_id}/scores") for _ in range(5)]
            out["scores_api"] = {**summary([t for t, _ in scores]), "bytes": scores[0][1]}
    finally:
        proc.terminate()
        proc.wait(20)
    proc = start_server(data_dir, port)  # after a restart: the index is on disk, the memory cache is empty
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            out["results_after_restart_first_ms"] = timed_get(client, f"/runs/{run_id}/results")[0]
    finally:
        proc.terminate()
        proc.wait(20)
    proc = start_server(data_dir, port)
    try:
        time.sleep(5)  # the most recent runs' pages are prepared at start-up
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            out["results_after_restart_prepared_ms"] = timed_get(client, f"/runs/{run_id}/results")[0]
    finally:
        proc.terminate()
        proc.wait(20)
    return out


def bench_progress(data_dir: Path, essays: int) -> dict[str, object]:
    port = free_port()
    proc = start_server(data_dir, port)
    rubric = {
        "name": "bench",
        "traits": [
            {"name": f"T{i}", "min": 0, "max": 3, "levels": {str(s): f"level {s}" for s in range(4)}} for i in range(6)
        ],
    }
    body = {
        "rubric": rubric,
        "essays": [
            {"id": f"p{i}", "text": f"Essay number {i} about waiting patiently for the bus."} for i in range(essays)
        ],
        "protocols": ["MAD"],
        "backend": {"kind": "fake", "fake_latency_s": 0.02},
    }
    from_created: list[float] = []
    from_commit: list[float] = []
    try:
        url = f"http://127.0.0.1:{port}"
        run = httpx.post(url + "/api/runs", json=body, timeout=30).json()
        with httpx.stream("GET", f"{url}/api/runs/{run['id']}/events", timeout=120) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                arrived = time.time()
                event = json.loads(line[6:])
                if event["type"] == "record":
                    from_created.append((arrived - event["stored_at"]) * 1000)
                    from_commit.append((arrived - event["at"]) * 1000)
    finally:
        proc.terminate()
        proc.wait(20)
    return {
        "essays": essays,
        "record_events": len(from_created),
        "from_created_ms": summary(from_created),
        "from_commit_ms": summary(from_commit),
    }


def render(pages: dict[str, object], progress: dict[str, object]) -> str:
    def row(name: str, s: object, page: bool = True) -> str:
        assert isinstance(s, dict)
        verdict = ("under" if s["p95"] < BUDGET_MS else "OVER") if page else "(not a page: no budget)"
        size = s.get("bytes", 0)
        budget = f"{verdict} 300 ms" if page else verdict
        return f"| {name} | {s['median']:.1f} | {s['p95']:.1f} | {s['max']:.1f} | {size:,} | {budget} |"

    lines = [
        f"# bench/web_pages.py ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()})",
        "",
        f"Run: {pages['essays']:,} essays x {pages['traits']} traits, {pages['records']:,} records (synthesised in "
        f"{pages['synth_s']:.0f} s). Pages over HTTP from `madrag serve` on loopback.",
        "",
        "| page | median ms | p95 ms | max ms | bytes | budget |",
        "|---|---:|---:|---:|---:|---|",
        row("results (6,000 cells)", pages["results_page"]),
        row("essay (6 traits: rationale, debate, exemplars)", pages["essay_page"]),
        row("GET /api/runs/{id}/scores (JSON, every rationale)", pages["scores_api"], page=False),
        "",
        f"First open of the run without a score index (the library reads every Judge record once, then keeps the "
        f"index): {pages['first_open_without_index_ms']:,.0f} ms. After a server restart (the index on disk, "
        f"nothing in memory): {pages['results_after_restart_first_ms']:,.0f} ms when requested the moment the "
        f"server answers, {pages['results_after_restart_prepared_ms']:,.0f} ms 5 s later (the server prepares the "
        "results of its most recent runs at start-up).",
        "",
    ]
    c, m = progress["from_created_ms"], progress["from_commit_ms"]
    assert isinstance(c, dict) and isinstance(m, dict)
    lines += [
        f"Progress: {progress['record_events']} record events of a {progress['essays']}-essay x 6-trait MAD run on "
        "the fake backend, read as server-sent events:",
        "",
        "| delay to the client | median ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
        f"| from the record's creation (before its commit) | {c['median']:.1f} | {c['p95']:.1f} | {c['max']:.1f} |",
        f"| from the record's commit | {m['median']:.1f} | {m['p95']:.1f} | {m['max']:.1f} |",
        "",
        f"Budget 1 s: {'met' if c['max'] < 1000 else 'NOT met'} (max {c['max']:.0f} ms).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--essays", type=int, default=1000)
    parser.add_argument("--traits", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--progress-essays", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pages = bench_pages(Path(tmp) / "pages", args.essays, args.traits, args.repeat)
        progress = bench_progress(Path(tmp) / "progress", args.progress_essays)
    text = render(pages, progress)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""A district's class, before and after: peak memory of ``madrag runs export`` and ``madrag eval``, and the time,
size and server memory of the teacher's long pages, for one large synthetic run, under an older commit and under
this tree, side by side in one run.

The run is a finished MADRAG run (Advocate, Skeptic and Judge per essay and trait, with prompts, tokens and
exemplars, ``tests/synthetic_runs.py``), with no human scores (a class nobody graded yet: every score is open on
the review desk). Each command runs in its own process under ``/usr/bin/time -v`` (its peak resident memory);
the pages are fetched from ``madrag serve`` in its own process (its peak memory: ``VmHWM``), each once to build
what the page needs, then again. The older commit's ``src/`` is taken with ``git archive`` into a temporary
folder. Each side reads its own copy of the run, as its commit's store schema keeps it: when the older commit's
schema is older (2: score rows without the review signals that schema 3 keeps with them), its copy is that
schema's store (:func:`as_schema`), so its review desk derives the signals from the records as it did. The load
average is taken before each page's first open and shown beside its figure (the machine is shared).

    python bench/district_memory.py --essays 20000 --before 3728be7   # prints a markdown table
    python bench/district_memory.py --essays 13334 --before main --pages-only   # the pages alone
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def source_of(ref: str, into: Path) -> Path:
    """The ``src/`` folder of commit ``ref`` (``HEAD-tree``: this working tree's)."""
    if ref == "HEAD-tree":
        return REPO / "src"
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "src"], check=True, capture_output=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def schema_of(src: Path) -> int:
    """The run store schema version the madrag in ``src`` writes (``SCHEMA_VERSION``, read from its source)."""
    found = re.search(r"^SCHEMA_VERSION = (\d+)", (src / "madrag" / "store" / "schema.py").read_text(), re.M)
    assert found is not None, src
    return int(found[1])


def as_schema(store: Path, version: int) -> None:
    """The run store ``store`` (written by this tree) as schema ``version`` keeps it: at 2, its score rows without
    their review signals (``scores.signals``, added by schema 3)."""
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version == current:
            return
        if (current, version) != (3, 2):
            raise SystemExit(f"no way here to write schema {version} from {current}")
        conn.execute("ALTER TABLE scores DROP COLUMN signals")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("VACUUM")
    finally:
        conn.close()


def copy_for(src: Path, data_dir: Path, into: Path) -> Path:
    """A copy of ``data_dir`` whose run stores are as the madrag in ``src`` writes them (:func:`as_schema`)."""
    shutil.copytree(data_dir, into)
    for store in into.glob("runs/*/store.sqlite"):
        as_schema(store, schema_of(src))
    return into


def env_for(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}


def timed(cmd: list[str], src: Path, timeout: float = 1800) -> dict[str, float]:
    """Run a madrag command under /usr/bin/time -v: its peak memory (MB) and wall time (s)."""
    full = ["/usr/bin/time", "-v", sys.executable, "-m", "madrag", *cmd]
    done = subprocess.run(full, env=env_for(src), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", done.stderr)
    assert peak is not None and wall is not None
    parts = [float(p) for p in wall[1].split(":")]
    seconds = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    return {"peak_mb": int(peak[1]) / 1024, "wall_s": seconds}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vm_hwm_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmHWM:\s+(\d+) kB", text)
    return None if found is None else int(found[1]) / 1024


def pages(src: Path, data_dir: Path, run_id: str) -> dict[str, object]:
    """Each long page fetched twice (the first builds what it needs), then the server's peak memory."""
    port = free_port()
    cmd = [sys.executable, "-m", "madrag", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    cmd += ["--cache-dir", str(data_dir / "cache")]
    proc = subprocess.Popen(cmd, env=env_for(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict[str, object] = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=900) as client:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if client.get("/api/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            for name in ("results", "review", "gradebook"):
                times = []
                size = 0
                load = os.getloadavg()[0]  # the machine's load as the page is first opened
                for _ in range(2):
                    started = time.perf_counter()
                    got = client.get(f"/runs/{run_id}/{name}", headers={"Accept": "text/html"})
                    times.append(time.perf_counter() - started)
                    got.raise_for_status()
                    size = len(got.content)
                out[name] = {"first_s": times[0], "again_s": times[1], "bytes": size, "load": load}
        out["server_peak_mb"] = vm_hwm_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def score_class(src: Path, n_essays: int, work: Path) -> dict[str, float]:
    """``madrag score`` of ``n_essays`` essays x 2 traits with MA (one Judge call per essay and trait) against the
    stub OpenAI-compatible server (no latency, 64 slots): its peak memory and time, the job's end included."""
    from madrag.testing.stub_answers import StubConfig
    from madrag.testing.stub_server import StubServer

    words = "the student waited at the station while the rain fell and the train was late again".split()
    data, rubric = work / "class.jsonl", work / "rubric.json"
    with data.open("w", encoding="utf-8") as fh:
        for i in range(n_essays):
            text = " ".join(words[(i + j) % len(words)] for j in range(250))
            fh.write(json.dumps({"id": f"s{i:05d}", "text": text}) + "\n")
    levels = {str(s): f"level {s}" for s in range(1, 5)}
    traits = [{"name": t, "min": 1, "max": 4, "levels": levels} for t in ("Ideas", "Style")]
    rubric.write_text(json.dumps({"name": "class", "prompt": "Write.", "traits": traits}), encoding="utf-8")
    with StubServer(StubConfig(capacity=64, latency_s=0.0, judge_tokens=20)) as stub:
        cmd = ["score", "--data", str(data), "--rubric", str(rubric), "--fold", "all", "--protocol", "MA"]
        cmd += ["--provider", "openai", "--model", stub.config.model, "--base-url", stub.base_url]
        cmd += ["--concurrency", "64", "--run-dir", str(work / "scored"), "--cache-dir", str(work / "cache")]
        return timed(cmd, src, timeout=3600)


def side(
    src: Path,
    run_dir: Path,
    data_dir: Path,
    work: Path,
    bootstrap: int,
    score_essays: int = 0,
    pages_only: bool = False,
) -> dict[str, object]:
    work.mkdir(parents=True, exist_ok=True)
    found: dict[str, object] = {}
    if pages_only:
        found["pages"] = pages(src, data_dir, run_dir.name)
        return found
    if score_essays:
        found["score"] = score_class(src, score_essays, work)
    found["export scores"] = timed(["runs", "export", "--run-dir", str(run_dir), "--out", str(work / "s.csv")], src)
    records = ["runs", "export", "--run-dir", str(run_dir), "--what", "records", "--format", "jsonl"]
    found["export records"] = timed([*records, "--out", str(work / "r.jsonl")], src)
    evaluate = ["eval", "--run-dir", str(run_dir), "--bootstrap", str(bootstrap), "--out", str(work / "eval")]
    found["eval"] = timed(evaluate, src)
    report = ["report", "--run-dir", str(run_dir), "--out", str(work / "report.html")]
    try:
        found["report"] = timed(report, src)
    except RuntimeError as exc:
        found["report"] = {"error": str(exc).splitlines()[0]}
    (run_dir / "scores-index.json").unlink(missing_ok=True)  # written on a page's first open: each side its own
    found["pages"] = pages(src, data_dir, run_dir.name)
    return found


def _cell(value: object, key: str, fmt: str) -> str:
    if not isinstance(value, dict) or key not in value or value[key] is None:
        return "missing"
    return format(value[key], fmt)


def render(
    args: argparse.Namespace, before: dict[str, object], after: dict[str, object], info: dict[str, object]
) -> str:
    lines = [
        f"# A district's class: {args.essays:,} essays x {args.traits} trait(s), before ({info['before']}) and after",
        "",
        f"Machine: {info['machine']}; load average at start {info['load']}; synthetic run made in "
        f"{info['synth_s']:.0f} s ({info['records']:,} records, store {info['store_mb']:.0f} MB).",
    ]
    if "eval" in before:  # the commands were timed (not --pages-only)
        lines += ["", "| command | before: peak MB | after: peak MB | before: s | after: s |", "|---|---|---|---|---|"]
    for name in ("score", "export scores", "export records", "eval", "report"):
        if name not in before:
            continue
        b, a = before[name], after[name]
        lines.append(
            f"| {name} | {_cell(b, 'peak_mb', '.0f')} | {_cell(a, 'peak_mb', '.0f')} | "
            f"{_cell(b, 'wall_s', '.1f')} | {_cell(a, 'wall_s', '.1f')} |"
        )
    return "\n".join(lines + _page_lines(before, after)) + "\n"


def _page_lines(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """The pages' table: each page's first open with the load average as it was opened, then again, and bytes."""
    lines = [
        "",
        "| page | before: first s (load) | after: first s (load) | before: again s | after: again s | before: bytes "
        "| after: bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    bp, ap = before["pages"], after["pages"]
    assert isinstance(bp, dict) and isinstance(ap, dict)
    for name in ("results", "review", "gradebook"):
        b, a = bp[name], ap[name]
        lines.append(
            f"| {name} | {_cell(b, 'first_s', '.2f')} ({_cell(b, 'load', '.1f')}) | "
            f"{_cell(a, 'first_s', '.2f')} ({_cell(a, 'load', '.1f')}) | "
            f"{_cell(b, 'again_s', '.2f')} | {_cell(a, 'again_s', '.2f')} | "
            f"{_cell(b, 'bytes', ',')} | {_cell(a, 'bytes', ',')} |"
        )
    lines.append(
        f"| server peak MB | {_cell(bp, 'server_peak_mb', '.0f')} | {_cell(ap, 'server_peak_mb', '.0f')} | | | | |"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--essays", type=int, default=20000)
    parser.add_argument("--traits", type=int, default=1)
    parser.add_argument("--before", default="main", help="the commit measured as 'before'")
    parser.add_argument("--bootstrap", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument(
        "--score", type=int, default=0, help="also time `madrag score` of this many essays x 2 traits (MA, stub)"
    )
    parser.add_argument("--pages-only", action="store_true", help="time the pages alone (no command)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))  # the synthetic run is a test fixture
    sys.path.insert(0, str(REPO / "src"))
    from tests.synthetic_runs import rubric_of, synthesize_run

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data_dir = root / "data"
        started = time.perf_counter()
        run_id = synthesize_run(data_dir / "runs", args.essays, rubric_of(args.traits), failed_every=41, human=False)
        info: dict[str, object] = {
            "synth_s": time.perf_counter() - started,
            "records": args.essays * args.traits * 3,
            "store_mb": (data_dir / "runs" / run_id / "store.sqlite").stat().st_size / 2**20,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}",
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        }
        sha = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", args.before], capture_output=True, text=True
        )
        info["before"] = sha.stdout.strip() or args.before
        older, this = source_of(args.before, root / "before"), source_of("HEAD-tree", root / "after")
        older_data = copy_for(older, data_dir, root / "data-before")  # each side its own copy, its schema's
        before = side(
            older, older_data / "runs" / run_id, older_data, root / "b", args.bootstrap, args.score, args.pages_only
        )
        shutil.rmtree(older_data, ignore_errors=True)
        run_dir = data_dir / "runs" / run_id
        after = side(this, run_dir, data_dir, root / "a", args.bootstrap, args.score, args.pages_only)
        shutil.rmtree(root / "before", ignore_errors=True)
    table = render(args, before, after, info)
    print(table)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()

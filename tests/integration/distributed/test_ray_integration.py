"""``madrag score --ray`` on real Ray: a local instance, a two-node cluster on this machine, a worker killed with
SIGKILL mid-run, the driver killed and the command run again.

Every backend is the stub OpenAI-compatible server on 127.0.0.1; the cluster's nodes are ``ray start``
processes of this test (each with its own temp dir), stopped by process group at the end. Ray's start-up costs
tens of seconds on a busy 2-core machine, so the tests are few: one local instance, one cluster for the rest.
"""

from __future__ import annotations

import asyncio
import csv
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.helpers import needs_ray
from tests.servers import free_port

from madrag.data import Essay, load_asap, split_by_fold
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec
from madrag.rubric import Rubric, load_rubric
from madrag.testing.stub_server import MODEL, StubServer

pytestmark = [pytest.mark.integration]
ray = needs_ray()

START_TIMEOUT_S = 240.0
RUN_TIMEOUT_S = 300.0
# the cluster's processes and the drivers: no auth token (all on this machine), no usage statistics
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


# -- data, runs and the store ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rubric(asap: Path) -> Rubric:
    return load_rubric(asap / "rubric_set7.json")


@pytest.fixture(scope="module")
def small_csv(asap: Path, rubric: Rubric, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 fold-0 essays to score and a 24-essay exemplar pool from the other folds (a bank built in seconds)."""
    split = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0)
    rows: list[Essay] = split.eval[:8] + split.pool[:24]
    path = tmp_path_factory.mktemp("data") / "essays.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "text", "fold", *rubric.trait_names])
        for e in rows:
            out.writerow([e.id, e.text, e.fold, *(e.reference(t) for t in rubric.traits)])
    return path


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(capacity=8, latency_s=0.25) as server:
        yield server


def score_args(data: Path, rubric: Path, run_dir: Path, stub: StubServer, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "madrag.cli", "score", "--data", str(data), "--rubric", str(rubric),
        "--run-dir", str(run_dir), "--provider", "openai", "--model", MODEL, "--base-url", stub.base_url,
        "--concurrency", "8", "--no-cache", *extra,
    ]  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, **RAY_ENV}


def stored(run_dir: Path) -> tuple[int, int]:
    """(records, distinct keys) in a run store, read while another process writes it."""
    db = run_dir / "store.sqlite"
    if not db.is_file():
        return 0, 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            n, keys = conn.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM records").fetchone()
    except sqlite3.OperationalError:  # the driver is creating the store
        return 0, 0
    return int(n), int(keys)


def records(run_dir: Path) -> dict[str, tuple[str, str]]:
    """key -> (prompt hash, text) of every record."""
    with sqlite3.connect(run_dir / "store.sqlite") as conn:
        rows = conn.execute(
            "SELECT key, json_extract(record, '$.prompt_hash'), json_extract(record, '$.text') FROM records"
        )
        return {key: (h, text) for key, h, text in rows}


@dataclass
class Driver:
    """A ``madrag score`` process, its stderr in a file."""

    proc: subprocess.Popen[bytes]
    err: Path
    out: Path

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def finish(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            pytest.fail(f"madrag score did not finish in {timeout:.0f}s:\n{self.stderr()[-3000:]}")


def start_driver(args: list[str], logs: Path, name: str) -> Driver:
    err, out = logs / f"{name}.err", logs / f"{name}.out"
    with err.open("wb") as e, out.open("wb") as o:
        proc = subprocess.Popen(args, stdout=o, stderr=e, env=env())
    return Driver(proc, err, out)


def wait_until(condition: object, what: str, driver: Driver, timeout: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        if driver.proc.poll() is not None:
            pytest.fail(f"madrag score ended (rc {driver.proc.returncode}) before {what}:\n{driver.stderr()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}:\n{driver.stderr()[-3000:]}")


WORKER_LINE = re.compile(r"ray: worker (\d+) on node (\S+) \((\w+)\), pid (\d+)")


# -- a local instance ------------------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_local_instance_with_two_workers_scores_exactly_as_a_local_run(
    small_csv: Path, asap: Path, stub: StubServer, tmp_path: Path
) -> None:
    """MAD and MADRAG (the bank built on the driver, shipped to the workers) on 2 local Ray workers: the same
    records, prompt for prompt and answer for answer, as the same job run in one process."""
    rubric_path = asap / "rubric_set7.json"
    ray_dir, local_dir = tmp_path / "ray-run", tmp_path / "local-run"
    args = score_args(small_csv, rubric_path, ray_dir, stub, "-p", "MAD", "-p", "MADRAG", "--ray", "--ray-workers", "2")
    driver = start_driver(args, tmp_path, "ray")
    assert driver.finish() == 0, driver.stderr()[-3000:]
    local = ScoreJob(
        data=small_csv,
        rubric=rubric_path,
        run_dir=local_dir,
        protocols=["MAD", "MADRAG"],
        provider=ProviderSpec(kind="openai", model=MODEL, base_url=stub.base_url, concurrency=8),
        response_cache=False,
    )
    asyncio.run(execute(local))
    log = driver.stderr()
    assert len(set(WORKER_LINE.findall(log))) == 2 and "2 workers on 1 node(s) (local)" in log
    expected = 8 * 4 * (3 + 1)  # 8 essays x 4 traits: one shared debate (2 calls) + a judge per protocol
    assert stored(ray_dir) == (expected, expected)
    assert records(ray_dir) == records(local_dir)
    listing = subprocess.run(
        [sys.executable, "-m", "madrag.cli", "runs", "list", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**env(), "COLUMNS": "400"},
    ).stdout
    ran_on = {
        line.split("│")[1].strip(): line.split("│")[-2].strip() for line in listing.splitlines() if "-run" in line
    }
    assert ran_on == {str(ray_dir): "local Ray: 2 workers, 1 node(s)", str(local_dir): "local"}, listing


# -- a two-node cluster on this machine ------------------------------------------------------------------------


@dataclass
class Cluster:
    address: str
    procs: list[subprocess.Popen[bytes]]
    root: Path


def ray_start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    ray_bin = Path(sys.executable).with_name("ray")
    with log.open("wb") as fh:
        return subprocess.Popen(
            [str(ray_bin), "start", "--block", *args], stdout=fh, stderr=subprocess.STDOUT, env=env(),
            start_new_session=True,
        )  # fmt: skip


def wait_started(proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if "Ray runtime started" in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"ray start failed:\n{log.read_text(errors='replace')[-3000:]}")


def stop(procs: list[subprocess.Popen[bytes]], root: Path) -> None:
    """End the nodes by process group (SIGTERM, then SIGKILL), then any process of theirs still running."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10  # a node given SIGTERM takes some 30 s to end; its processes are ended below
    for proc in procs:
        try:
            proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(root).encode() in cmdline:
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and a second node, 1 CPU each, on this machine, each with its own temp dir."""
    root = Path(tempfile.mkdtemp(prefix="mr-", dir="/tmp"))  # short: Ray's socket paths live under it
    port = free_port()
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(100 * 2**20)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        head = ray_start(
            ["--head", "--port", str(port), "--temp-dir", str(root / "h"), "--include-dashboard", "false",
             "--disable-usage-stats", *common],
            root / "head.log",
        )  # fmt: skip
        procs.append(head)
        wait_started(head, root / "head.log")
        address = f"127.0.0.1:{port}"
        node = ray_start(["--address", address, "--temp-dir", str(root / "n"), *common], root / "node.log")
        procs.append(node)
        wait_started(node, root / "node.log")
        yield Cluster(address, procs, root)
    finally:
        stop(procs, root)


def node_ids(log: str) -> set[str]:
    return {m[2] for m in WORKER_LINE.findall(log)}


@pytest.mark.timeout(900)
def test_cluster_worker_killed_mid_run_loses_and_duplicates_nothing(
    cluster: Cluster, asap: Path, stub: StubServer, tmp_path: Path
) -> None:
    """12 essays x 4 traits with MAD on 2 workers on 2 nodes; one worker SIGKILLed mid-run: its shards are
    redone and every record is in the store exactly once."""
    run_dir = tmp_path / "run"
    data, rubric_path = asap / "training_set_rel3_sets7_8.tsv", asap / "rubric_set7.json"
    args = score_args(data, rubric_path, run_dir, stub, "-p", "MAD", "--limit", "12", "--ray", cluster.address)
    driver = start_driver([*args, "--ray-workers", "2"], tmp_path, "driver")
    wait_until(
        lambda: len(WORKER_LINE.findall(driver.stderr())) == 2 and stored(run_dir)[0] >= 24, "24 records", driver
    )
    victim = int(WORKER_LINE.findall(driver.stderr())[0][3])
    os.kill(victim, signal.SIGKILL)
    assert driver.finish() == 0, driver.stderr()[-3000:]
    log = driver.stderr()
    assert len(node_ids(log)) == 2, log  # the workers were spread over both nodes
    assert re.search(r"ray: worker \d+ lost \(\w+\); shard \d+ goes out again", log), log
    assert stored(run_dir) == (12 * 4 * 3, 12 * 4 * 3)
    info = sqlite3.connect(run_dir / "store.sqlite").execute("SELECT value FROM meta WHERE key = 'ray'").fetchone()
    assert '"nodes": 2' in info[0] and '"redone": 0' not in info[0]


@pytest.mark.timeout(900)
def test_cluster_driver_killed_then_the_same_command_resumes(
    cluster: Cluster, asap: Path, stub: StubServer, tmp_path: Path
) -> None:
    """The driver SIGKILLed mid-run, the command run again: it hands out only what is not finished and ends
    with every record once."""
    run_dir = tmp_path / "run"
    data, rubric_path = asap / "training_set_rel3_sets7_8.tsv", asap / "rubric_set7.json"
    args = score_args(data, rubric_path, run_dir, stub, "-p", "MAD", "--limit", "12", "--ray", cluster.address)
    first = start_driver(args, tmp_path, "first")
    wait_until(lambda: stored(run_dir)[0] >= 24, "24 records", first)
    first.proc.kill()
    first.proc.wait(30)
    before = stored(run_dir)[0]
    assert 24 <= before < 12 * 4 * 3
    second = start_driver(args, tmp_path, "second")
    assert second.finish() == 0, second.stderr()[-3000:]
    assert stored(run_dir) == (12 * 4 * 3, 12 * 4 * 3)
    summary = second.out.read_text(encoding="utf-8")
    made = int(re.search(r"(\d+) agent calls made", summary).group(1))  # type: ignore[union-attr]
    assert "resumed" in summary and made == 12 * 4 * 3 - before  # nothing finished was made again

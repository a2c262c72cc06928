"""One writer per run directory and per server data directory (an OS lock the process holds; the OS frees it when
the process ends, ``kill -9`` included): two writers started at the same moment never mix their records in one run;
the second is refused at once, in one line naming the first; readers read meanwhile."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from madrag.cli.app import app
from madrag.errors import WriterBusy
from madrag.evaluation.run import open_store
from madrag.store.writer_lock import LOCK_FILE, WriterLock, held_by

ROUNDS = 20

# a worker process: imports madrag once, then per round waits at the barrier (a file the test creates once both
# workers are ready) and scores the round's run directory with its judge temperature
WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import madrag
    from madrag.errors import MadragError

    root, name, temperature, rounds = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    rubric = {"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")}]}
    essays = [f"Essay number {i} about a day at the lake." for i in range(6)]
    for r in range(rounds):
        (root / f"ready-{r}-{name}").touch()
        deadline = time.monotonic() + 300  # a worker whose test is gone stops by itself
        while not (root / f"go-{r}").exists():
            if time.monotonic() > deadline:
                sys.exit("the test gave no start signal")
            time.sleep(0.0005)
        try:
            madrag.score(essays, rubric, protocol="MAD", provider=madrag.ProviderSpec(kind="fake", fake_latency_s=0.05),
                         run_dir=root / f"run-{r}", settings={"judge_temperature": temperature},
                         cache_dir=root / "cache", progress=False)
            outcome = {"round": r, "ok": True}
        except MadragError as exc:
            outcome = {"round": r, "ok": False, "kind": type(exc).__name__, "message": str(exc)}
        print(json.dumps(outcome), flush=True)
    """
)


def _barrier_rounds(root: Path, procs: list[subprocess.Popen[str]]) -> None:
    for r in range(ROUNDS):
        deadline = time.monotonic() + 120
        while not all((root / f"ready-{r}-{n}").exists() for n in ("a", "b")):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a worker stopped"
            time.sleep(0.005)
        (root / f"go-{r}").touch()


def test_two_writers_at_a_barrier_never_mix_a_run(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), name, temp, str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, temp in (("a", "0.0"), ("b", "0.5"))
    ]
    try:
        _barrier_rounds(tmp_path, procs)
    except BaseException:
        for proc in procs:
            proc.kill()
        raise
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outcomes += [json.loads(line) for line in out.splitlines()]
    busy = 0
    for r in range(ROUNDS):
        mine = [o for o in outcomes if o["round"] == r]
        assert sorted(o["ok"] for o in mine) == [False, True], mine  # one run made, the other refused
        refused = next(o for o in mine if not o["ok"])
        assert "\n" not in refused["message"]
        # refused at the lock (naming the writer), or - when the first had already finished - by its settings
        assert refused["kind"] in ("WriterBusy", "ConfigError"), refused
        if refused["kind"] == "WriterBusy":
            busy += 1
            assert "is being written by process" in refused["message"]
        store = open_store(tmp_path / f"run-{r}")
        try:
            config = store.get_meta("config")
            assert config is not None
            temperatures = {rec.settings.get("temperature") for rec in store.records(role="judge")}
            assert store.count() == 6 * 3  # Advocate, Skeptic, Judge per essay: one run's records, no more
        finally:
            store.close()
        assert temperatures == {config["settings"]["judge_temperature"]}, (r, temperatures)  # 0 mixed runs
    print(f"{busy} of {ROUNDS} rounds: the second writer refused at the lock; the rest by the settings check")
    # the lock, not only the settings check, kept them apart: how many rounds overlapped depends on the machine's
    # load (20 of 20 on a quiet machine, 5 of 20 under load); a lock held for a whole run is tested on its own
    assert busy >= 1


def test_the_lock_names_its_holder_and_dies_with_it(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; "
         f"fd = os.open({str(tmp_path / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
         "os.write(fd, f'{os.getpid()}\\n'.encode()); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:
        assert held_by(tmp_path) == f"process {holder.pid}"
        with pytest.raises(WriterBusy, match=rf"run directory .* is being written by process {holder.pid};"):
            WriterLock(tmp_path).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)  # kill -9: the OS frees the lock
        holder.wait()
    assert held_by(tmp_path) is None
    with WriterLock(tmp_path):
        assert held_by(tmp_path) == "this process"
        with pytest.raises(WriterBusy, match="this process"):
            WriterLock(tmp_path).acquire()


def _madrag(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_readers_read_while_a_writer_holds_the_run(asap: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    base = ["--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json")]
    made = CliRunner().invoke(app, ["score", *base, "--run-dir", str(run), "--cache-dir", str(tmp_path / "c"),
                                    "--protocol", "MA", "--provider", "fake", "--limit", "1"])  # fmt: skip
    assert made.exit_code == 0, (made.output, made.exception)  # the run, made in this process (it let go of it)
    with WriterLock(run):  # this test process is the writer now; the readers and the second writer are others
        for args in (["eval", str(run)], ["runs", "list", str(tmp_path)], ["costs", "--run-dir", str(run)]):
            read = _madrag(*args)
            assert read.returncode == 0, (args, read.stderr)
        again = _madrag("score", *base, "--run-dir", str(run), "--cache-dir", str(tmp_path / "c"), "--protocol",
                        "MA", "--provider", "fake", "--limit", "1")  # fmt: skip
    assert again.returncode == 2
    errors = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"is being written by process {os.getpid()}" in errors[0], again.stderr
    assert "Traceback" not in again.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_second_server_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    data = tmp_path / "data"
    port = _free_port()
    first = subprocess.Popen(
        [sys.executable, "-m", "madrag.cli", "serve", "--data-dir", str(data), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while held_by(data) is None:
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.stderr else ""
            time.sleep(0.1)
        second = _madrag("serve", "--data-dir", str(data), "--port", str(_free_port()), "--resume", timeout=60)
    finally:
        first.terminate()
        first.wait(30)
    assert second.returncode == 2, second.stderr
    errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"data directory {data} is being written by process {first.pid}" in errors[0]
    assert "Traceback" not in second.stderr


def test_a_second_app_on_the_same_data_dir_does_not_start(tmp_path: Path) -> None:
    from tests.web_helpers import client_for, make_config

    config = make_config(tmp_path)
    with client_for(config):
        assert held_by(config.data_dir) == "this process"
        with pytest.raises(WriterBusy, match=r"data directory .* is being written by this process"):
            with client_for(config):
                pass
    assert held_by(config.data_dir) is None  # given back when the first stops


def test_a_run_another_process_writes_is_never_taken_for_interrupted(tmp_path: Path) -> None:
    from tests.web_helpers import FAKE, RUBRIC, client_for, make_config, wait_status

    from madrag.server.runs.repo import RunRepository

    config = make_config(tmp_path, auto_resume=True)
    with client_for(config) as client:
        body = {"rubric": RUBRIC, "essays": [{"id": "1", "text": "An essay."}], "protocols": ["MAD"], "backend": FAKE}
        run_id = client.post("/api/runs", json=body).json()["id"]
        assert wait_status(client, run_id)["status"] == "finished"
    repo = RunRepository(config.runs_dir)
    repo.update(run_id, status="running")  # as if a process other than a server were scoring it now
    folder = config.runs_dir / run_id
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from madrag.store.writer_lock import WriterLock; "
         f"WriterLock(Path({str(folder)!r})).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout is not None and writer.stdout.readline().strip() == "held"
    try:
        with client_for(config) as client:
            shown = client.get(f"/api/runs/{run_id}").json()
            assert shown["status"] == "running"  # not "interrupted", not resumed a second time
    finally:
        writer.kill()
        writer.wait()

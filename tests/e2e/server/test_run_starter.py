"""A new run accepted by its request and started by the starter's worker: the request leaves the run's description
and its inputs as they came (one file), the worker writes them out and starts the job; a run stopped before the
worker reached it never starts; one accepted when the server stopped is resumable at the next start."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.web_helpers import RUBRIC, client_for, essays_json, make_config

from madrag.data.essay import Essay
from madrag.data.refusals import Refusals
from madrag.rubric import rubric_from_mapping
from madrag.server.http.schemas import BackendSettings
from madrag.server.runs.scheduler import NewRun, RunManager
from madrag.server.runs.starter import QUEUED_FILE


def _new_run() -> NewRun:
    essays = [Essay(id=e["id"], text=e["text"]) for e in essays_json(3)]
    rubric = rubric_from_mapping(RUBRIC, "")
    backend = BackendSettings(kind="fake")
    return NewRun(rubric=rubric, essays=essays, refused=Refusals(), protocols=["MAD"], pool="none", backend=backend)


@contextmanager
def busy_starter(runs: RunManager) -> Iterator[threading.Event]:
    """The starter's worker held busy (another run's start) until the event is set."""
    gate, holding = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        gate.wait(20)

    runs.starter.submit("0" * 12, hold, lambda exc: None)
    assert holding.wait(5)
    try:
        yield gate
    finally:
        gate.set()


def test_the_request_keeps_the_inputs_as_they_came_and_the_worker_writes_them_out(tmp_path: Path) -> None:
    runs = RunManager(make_config(tmp_path))
    try:
        with busy_starter(runs) as gate:
            meta = runs.create(_new_run())
            folder = runs.run_dir(meta.id)
            assert runs.meta(meta.id).status == "queued"
            assert runs.describe(meta.id)["progress"]["status"] == "queued"
            assert sorted(p.name for p in (folder / "inputs").iterdir()) == [QUEUED_FILE]
            gate.set()
            runs.wait(meta.id, 30)
        assert runs.meta(meta.id).status == "finished"
        assert not (folder / "inputs" / QUEUED_FILE).exists()
        assert len((folder / "inputs" / "essays.jsonl").read_text(encoding="utf-8").splitlines()) == 3
        assert len(runs.view(meta.id).scores) == 3 * len(RUBRIC["traits"])
    finally:
        runs.close()


def test_a_run_stopped_before_the_worker_reached_it_never_starts_and_can_be_resumed(tmp_path: Path) -> None:
    runs = RunManager(make_config(tmp_path))
    try:
        with busy_starter(runs) as gate:
            meta = runs.create(_new_run())
            assert runs.stop(meta.id).done()
            assert runs.meta(meta.id).status == "cancelled"
            gate.set()
            runs.wait(meta.id, 30)
        assert runs.meta(meta.id).status == "cancelled" and runs.describe(meta.id)["progress"]["status"] == "cancelled"
        assert not (runs.run_dir(meta.id) / "store.sqlite").exists()  # no job ran
        runs.resume(meta.id, None)
        runs.wait(meta.id, 30)
        assert runs.meta(meta.id).status == "finished"
    finally:
        runs.close()


def test_a_run_accepted_when_the_server_stopped_is_resumable_at_the_next_start(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    runs = RunManager(config)
    with busy_starter(runs):
        meta = runs.create(_new_run())
        runs.close()  # the worker never reached it
    folder = runs.run_dir(meta.id)
    assert runs.meta(meta.id).status == "interrupted" and (folder / "inputs" / QUEUED_FILE).is_file()
    again = RunManager(config)
    try:
        again.recover()
        assert not (folder / "inputs" / QUEUED_FILE).exists() and (folder / "inputs" / "essays.jsonl").is_file()
        again.resume(meta.id, None)
        again.wait(meta.id, 30)
        assert again.meta(meta.id).status == "finished"
        assert len(again.view(meta.id).scores) == 3 * len(RUBRIC["traits"])
    finally:
        again.close()


def test_the_api_answers_with_where_to_poll(tmp_path: Path) -> None:
    body = {"rubric": RUBRIC, "essays": essays_json(2), "protocols": ["MAD"], "backend": {"kind": "fake"}}
    with client_for(make_config(tmp_path)) as client:
        got = client.post("/api/runs", json=body)
        assert got.status_code == 201 and got.json()["status"] in ("queued", "running", "finished")
        assert got.headers["location"] == f"/api/runs/{got.json()['id']}"

"""A run describes itself: ``run.log`` in its folder (each session's start and settings, the retries, timeouts
and failed calls, how it ended) and ``madrag runs list`` with its date, status, model, protocols and records."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest

import madrag
from madrag import FakeProvider, Rubric, Trait
from madrag.cli.output import console
from madrag.cli.runs import runs_list
from madrag.errors import TooManyFailures, TransientProviderError
from madrag.pipeline.run_log import _ROUTER, RUN_LOG, read_status, run_log
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeReply, default_script
from madrag.providers.policy import RetryPolicy

LEVELS = {0: "none", 1: "weak", 2: "clear", 3: "rich"}
RUBRIC = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels=LEVELS)])
TEXTS = ["The garden grew slowly.", "A boat crossed the river at dawn."]
BUSY = "http://x/v1 answered HTTP 503: busy"


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt: 0.0)


def busy(times: int) -> FakeProvider:
    """The fake's answers after HTTP 503 on the first ``times`` requests of the Skeptic."""
    seen = {"n": 0}

    def script(request: ChatRequest) -> FakeReply:
        if request.role == "skeptic" and seen["n"] < times:
            seen["n"] += 1
            return FakeReply(text="", error=TransientProviderError(BUSY))
        return default_script(request)

    return FakeProvider(script=script)


def _score(run_dir: Path, provider: Any, **kwargs: Any) -> Any:
    return madrag.score(TEXTS, RUBRIC, protocol="MAD", provider=provider, run_dir=run_dir, progress=False, **kwargs)


def test_a_run_logs_its_start_retries_and_end_and_a_resume_appends(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _score(run_dir, busy(2))
    text = (run_dir / RUN_LOG).read_text()
    assert re.search(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO madrag.run: start: 2 essays x MAD; backend fake model fake-model; ",
        text,
        re.M,
    )
    assert "timeout" in text and "retries 4" in text
    retries = [line for line in text.splitlines() if "retry" in line]
    assert len(retries) == 2 and all(BUSY in line and "WARNING" in line for line in retries)
    assert text.rstrip().splitlines()[-1].split("madrag.run: ")[1].startswith("end: complete after ")
    _score(run_dir, FakeProvider())  # nothing left to do: a second session, appended
    status = read_status(run_dir)
    assert (status.status, status.sessions) == ("complete", 2) and status.started == text[:19]


def test_a_run_stopped_by_its_failures_says_failed_with_the_calls(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(TooManyFailures):
        _score(run_dir, busy(10_000), max_failures=1, essay_concurrency=1)
    text = (run_dir / RUN_LOG).read_text()
    assert "failed after its retries" in text and "ERROR madrag.run: error: TooManyFailures" in text
    assert read_status(run_dir).status == "failed"


def test_interrupted_and_killed_sessions(tmp_path: Path) -> None:
    async def cancelled() -> None:
        with run_log(tmp_path, "settings"):
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    assert read_status(tmp_path).status == "interrupted"
    with run_log(tmp_path, "settings"):
        pass
    assert read_status(tmp_path).status == "complete"
    with (tmp_path / RUN_LOG).open("a") as log:  # a killed process writes its start, never its end
        log.write("2026-01-01 10:00:00,000 INFO madrag.run: start: settings\n")
    assert read_status(tmp_path).status == "interrupted"
    assert read_status(tmp_path, running=True).status == "running"
    assert read_status(tmp_path / "none") == read_status(tmp_path / "none", running=False)
    assert read_status(tmp_path / "none").status is None


def test_a_log_takes_only_its_own_runs_records(tmp_path: Path) -> None:
    other = logging.getLogger("madrag.providers.policy")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()

    async def session(name: str) -> None:
        with run_log(tmp_path / name, name):
            await asyncio.sleep(0)
            other.warning("retry in run %s", name)
            await asyncio.sleep(0)

    async def both() -> None:
        await asyncio.gather(session("a"), session("b"))

    asyncio.run(both())
    other.warning("outside any run")
    a, b = (tmp_path / "a" / RUN_LOG).read_text(), (tmp_path / "b" / RUN_LOG).read_text()
    assert "retry in run a" in a and "retry in run b" not in a and "outside" not in a
    assert "retry in run b" in b and "retry in run a" not in b


def test_warnings_still_reach_stderr_without_other_handlers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in the CLI: nobody configured logging
    with run_log(tmp_path, "settings"):
        logging.getLogger("madrag.providers.policy").warning("transient provider failure; retry 1")
    assert "transient provider failure; retry 1" in capsys.readouterr().err
    assert _ROUTER in logging.getLogger("madrag").handlers


def test_runs_list_shows_date_status_model_protocols_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console, "width", 400)  # one line per run
    _score(tmp_path / "done", "fake")
    with pytest.raises(TooManyFailures):
        _score(tmp_path / "broken", busy(10_000), max_failures=1, essay_concurrency=1)
    capsys.readouterr()
    runs_list(tmp_path)
    out = capsys.readouterr().out
    done = next(line for line in out.splitlines() if "done" in line)
    broken = next(line for line in out.splitlines() if "broken" in line)
    assert "complete" in done and "MAD" in done and re.search(r"\d{4}-\d\d-\d\d", done)
    assert "failed" in broken
    assert "all read" in done and "— (not counted)" in broken  # a stopped job counted nothing: not "all read"

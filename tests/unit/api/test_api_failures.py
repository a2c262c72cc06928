"""Failed calls through the Python API: ``max_failures``, ``result.failed_calls`` / ``result.failures`` and what
the result says, the progress bar reaching its total with a failed counter, and an essay whose every trait failed."""

from __future__ import annotations

import io
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress

import madrag
import madrag.api.scoring
from madrag import FakeProvider, InputError, Rubric, Trait
from madrag.api.progress import ScoreProgress
from madrag.api.result import FailedCall
from madrag.errors import TooManyFailures, TransientProviderError
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeReply, default_script
from madrag.providers.policy import RetryPolicy

LEVELS = {0: "none", 1: "weak", 2: "clear", 3: "rich"}
RUBRIC = Rubric(traits=[Trait(name=n, min=0, max=3, levels=LEVELS) for n in ("Ideas", "Style")])
TEXTS = ["The garden grew slowly.", "A boat crossed the river at dawn.", "Snow covered the mountain path."]
BUSY = "http://x/v1 answered HTTP 503: busy"


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt: 0.0)


def busy_when(fails: Any) -> FakeProvider:
    """The fake's answers, but HTTP 503 on every request ``fails(request, essay text)`` picks."""

    def script(request: ChatRequest) -> FakeReply:
        if fails(request, request.messages[-1].content):
            return FakeReply(text="", error=TransientProviderError(BUSY))
        return default_script(request)

    return FakeProvider(script=script)


def style_skeptic(request: ChatRequest, _text: str) -> bool:
    return request.role == "skeptic" and request.trait == "Style"


def test_failed_calls_are_counted_listed_and_retried_by_scoring_again(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    kwargs: dict[str, Any] = {"protocol": "MAD", "run_dir": run_dir, "progress": False}
    result = madrag.score(TEXTS, RUBRIC, provider=busy_when(style_skeptic), **kwargs)
    assert result.failed_calls == 3
    assert [(f.essay, f.trait, f.role) for f in result.failures] == [(e, "Style", "skeptic") for e in "123"]
    assert all(isinstance(f, FailedCall) and BUSY in f.error for f in result.failures)
    assert set(result.scores["trait"]) == {"Ideas"} and len(result.scores) == 3  # Style: missing, not a 0
    assert "3 calls failed after retries; score again with the same run_dir to retry them" in repr(result)
    assert str(result) == repr(result)
    again = madrag.score(TEXTS, RUBRIC, provider=FakeProvider(), **kwargs)
    assert again.resumed and again.failed_calls == 0 and again.failures == []
    assert again.stats.made == 3 * 2  # each failed Skeptic again, then its Judge
    assert len(again.scores) == 6 and "calls failed" not in repr(again)


def test_max_failures_stops_the_run_and_is_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="max_failures must be a whole number >= 1"):
        madrag.score(TEXTS, RUBRIC, protocol="MAD", provider="fake", progress=False, max_failures=0)
    with pytest.raises(TooManyFailures, match="--max-failures 1"):
        madrag.score(
            TEXTS,
            RUBRIC,
            protocol="MAD",
            provider=busy_when(style_skeptic),
            run_dir=tmp_path / "run",
            progress=False,
            max_failures=1,
            essay_concurrency=1,
        )


class KeptProgress(ScoreProgress):
    """The API's progress bar, printing to a string, its rich Progress kept after the run."""

    last: KeptProgress | None = None

    def __init__(self, enabled: bool = True) -> None:
        self.out = io.StringIO()
        super().__init__(enabled, Console(file=self.out, width=200), essay_lines=True)
        self.kept: Progress | None = None
        KeptProgress.last = self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kept = self._progress
        super().__exit__(exc_type, exc, tb)


def test_the_bar_reaches_its_total_and_an_essay_whose_traits_all_failed_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(madrag.api.scoring, "ScoreProgress", KeptProgress)
    boat = busy_when(lambda request, text: "boat" in text and request.role == "advocate")
    result = madrag.score(TEXTS, RUBRIC, protocol="MAD", provider=boat, run_dir=tmp_path / "run")
    bar = KeptProgress.last
    assert bar is not None and bar.kept is not None
    (task,) = [t for t in bar.kept.tasks if t.description != "embedding the exemplar pool"]
    assert task.total == 3 * 2 and task.completed == task.total  # the failed essay's 2 scores count as done
    assert result.failed_calls == bar.failed == 2 and task.fields["failed"] == "2 failed"
    lines = bar.out.getvalue().splitlines()
    assert "essay 2: every trait failed (2 calls)" in lines  # Ideas' and Style's Advocates
    assert not any(line.rstrip().endswith("essay 2:") for line in lines)


def test_the_bar_renders_while_the_exemplar_pool_is_embedded() -> None:
    """The bank's bar shares the columns of the scores' bar (the failed-calls column included)."""
    import io

    from rich.console import Console

    from madrag.api.progress import ScoreProgress

    out = io.StringIO()
    with ScoreProgress(console=Console(file=out, force_terminal=True, width=120)) as progress:
        progress.on_bank_progress(3, 10)
        progress.on_start(4)
    assert "embedding the exemplar pool" in out.getvalue() and "3/10" in out.getvalue()


@pytest.mark.parametrize("protocol", ["SA", "SingleJudge", "MA", "GEval"])
def test_the_bar_reaches_its_total_whatever_the_shape_of_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    """A Judge record of every trait (SA) counts each trait; scores without Judge records (SingleJudge) count
    when their essay is done; per-trait Judges (MA, GEval's derived Judge) as their records arrive."""
    monkeypatch.setattr(madrag.api.scoring, "ScoreProgress", KeptProgress)
    madrag.score(TEXTS, RUBRIC, protocol=protocol, provider="fake", run_dir=tmp_path / "run")
    bar = KeptProgress.last
    assert bar is not None and bar.kept is not None
    (task,) = [t for t in bar.kept.tasks if t.description != "embedding the exemplar pool"]
    assert task.total == 3 * 2 and task.completed == task.total


def test_an_essay_line_names_the_scores_that_come_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MTS scores an essay over the whole run: its line says so (no provisional "?" where the table shows a score);
    MA's scores are shown as they are."""
    monkeypatch.setattr(madrag.api.scoring, "ScoreProgress", KeptProgress)
    madrag.score(TEXTS, RUBRIC, protocol=["MA", "MTS"], provider="fake", run_dir=tmp_path / "run")
    bar = KeptProgress.last
    assert bar is not None
    lines = [line for line in bar.out.getvalue().splitlines() if line.startswith("essay ")]
    assert len(lines) == len(TEXTS) and all("MTS: Ideas, Style after the run" in line for line in lines)
    assert all("MA: Ideas=" in line and "?" not in line for line in lines)

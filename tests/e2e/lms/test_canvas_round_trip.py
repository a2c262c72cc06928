"""The Canvas round trip on the local Canvas double (tests/canvas_double.py), with the real canvasapi client: 25
submissions pulled (text entries, .docx and .pdf), the rubric imported, a run scored on the fake backend, two
overrides and the rest accepted on review, the preview, the push; then a push killed midway and rerun, a grade
changed in Canvas after the pull, and the token found in no file madrag wrote but its credential file."""

from __future__ import annotations

import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.canvas_double import CanvasDouble, class_of
from typer.testing import CliRunner

import madrag
from madrag.cli.app import app
from madrag.lms.client import Backoff, CanvasClient
from madrag.lms.credentials import FILE_NAME, CanvasCredentials, load_credentials, save_credentials
from madrag.lms.journal import JOURNAL, Journal
from madrag.lms.manifest import load_manifest, load_roster
from madrag.lms.preview import preview_text
from madrag.lms.pull import pull
from madrag.lms.push import Change, ClassGrades, PushPlan, current_state, plan_push, push
from madrag.server.reviews import Review, add_review

pytest.importorskip("canvasapi")
pytestmark = pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly")

SENTINEL = "canvas-token-SENTINEL-7f3a9c"
OVERRIDES = {
    ("1001", "Ideas"): (1, "Your ideas need support from the text."),
    ("1002", "Conventions"): (0, "Proofread."),
}
UNDECIDED = ("1024", "1025")


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(pull folder, scored run) of the class of 25, with the teacher's reviews."""
    root = tmp_path_factory.mktemp("canvas")
    double = CanvasDouble(class_of(SENTINEL))
    base = double.start()
    try:
        client = CanvasClient(load_or_save(root / "data", base))
        pulled = pull(client, 7, 77, root / "pull", base)
    finally:
        double.stop()
    assert pulled.essays == 25 and not pulled.manifest.refused
    assert {s.source.rsplit(".", 1)[-1] for s in pulled.manifest.submissions} == {"text entry", "docx", "pdf"}
    run = root / "run"
    madrag.score(
        str(root / "pull" / "essays.jsonl"),
        str(root / "pull" / "rubric.json"),
        protocol="MAD",
        provider="fake",
        fold="all",
        run_dir=run,
        cache_dir=root / "cache",
        progress=False,
    )
    for essay in (s.essay_id for s in pulled.manifest.submissions):
        if essay in UNDECIDED:
            continue
        for trait in ("Ideas", "Conventions"):
            found = OVERRIDES.get((essay, trait))
            action = "override" if found else "accept"
            add_review(
                run,
                Review(
                    essay_id=essay,
                    trait=trait,
                    protocol="MAD",
                    action=action,
                    new_score=found[0] if found else None,
                    comment=found[1] if found else "",
                ),
            )
    yield root / "pull", run


def load_or_save(folder: Path, base: str) -> CanvasCredentials:
    save_credentials(base, SENTINEL, folder)
    return load_credentials(folder)


Canvas = tuple[CanvasDouble, CanvasClient]


@pytest.fixture()
def canvas(tmp_path: Path) -> Iterator[Canvas]:
    double = CanvasDouble(class_of(SENTINEL))
    base = double.start()
    client = CanvasClient(load_or_save(tmp_path / "data", base), Backoff(tries=3, first_s=0.0))
    yield double, client
    double.stop()


def _copy(scored: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    pull_dir, run = scored
    shutil.copytree(run, tmp_path / "run")
    return pull_dir, tmp_path / "run"


def _plan(
    client: CanvasClient, pull_dir: Path, run: Path, include_undecided: bool = False
) -> tuple[ClassGrades, PushPlan]:
    from madrag.server.class_book import class_grades

    manifest = load_manifest(pull_dir)
    grades = class_grades(run, load_roster(pull_dir))
    return grades, plan_push(grades, manifest, current_state(client, manifest), Journal(run), include_undecided)


def test_round_trip_sends_the_teachers_decisions(scored: tuple[Path, Path], canvas: Canvas, tmp_path: Path) -> None:
    double, client = canvas
    pull_dir, run = _copy(scored, tmp_path)
    grades, plan = _plan(client, pull_dir, run)
    by_status = {c.essay_id: c.status for c in plan.changes}
    assert [e for e, s in by_status.items() if s != "send"] == list(UNDECIDED)
    text = preview_text(plan)
    assert "Pupil1 Family1: no grade ->" in text and "2 undecided" in text and "23 send" in text
    assert all(s.updates == 0 for s in double.data.subs.values())  # a preview sends nothing

    result = push(client, plan, run)
    assert len(result.sent) == 23
    rows = {r.essay_id: r for r in grades.rows}
    for change in result.sent:
        sub, row = double.data.subs[change.user_id], rows[change.essay_id]
        assert sub.score == row.total and [c["comment"] for c in sub.comments] == [change.comment]
        assert sub.posted_at is not None and not sub.comments[0]["hidden"]  # posted automatically
        for line in change.lines:
            assert sub.assessment[line.criterion_id]["points"] == row.grades[line.trait].points
            assert sub.assessment[line.criterion_id]["comments"] == grades.feedback[change.essay_id][line.trait]
    for (essay, trait), (points, comment) in OVERRIDES.items():
        sub = double.data.subs[int(essay)]
        criterion = {"Ideas": "_101", "Conventions": "_102"}[trait]
        assert sub.assessment[criterion]["points"] == points and comment in sub.assessment[criterion]["comments"]
        assert comment in sub.comments[0]["comment"]
    for essay in UNDECIDED:
        assert double.data.subs[int(essay)].updates == 0 and double.data.subs[int(essay)].score is None

    _, again = _plan(client, pull_dir, run, include_undecided=True)
    assert {c.essay_id for c in again.to_send()} == set(UNDECIDED)  # the 23 are "sent before"
    push(client, again, run)
    assert all(len(s.comments) == 1 for s in double.data.subs.values())


def test_a_killed_push_rerun_sends_each_student_once(scored: tuple[Path, Path], canvas: Canvas, tmp_path: Path) -> None:
    double, client = canvas
    pull_dir, run = _copy(scored, tmp_path)
    _, plan = _plan(client, pull_dir, run)
    sent: list[Change] = []

    def kill_after_five(change: Change) -> None:  # killed after Canvas took the 5th, before the journal says so
        sent.append(change)
        if len(sent) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        push(client, plan, run, after_each=kill_after_five)
    assert sum(s.updates > 0 for s in double.data.subs.values()) == 5
    double.data.fail_next = [503, 429]  # and Canvas is busy when the push is run again
    grades, plan = _plan(client, pull_dir, run)
    assert sum(c.status == "sent before" for c in plan.changes) == 4 and not any(
        c.status == "conflict" for c in plan.changes
    )
    push(client, plan, run)
    rows = {r.essay_id: r for r in grades.rows}
    for essay, row in rows.items():
        sub = double.data.subs[int(essay)]
        if essay in UNDECIDED:
            assert sub.comments == [] and sub.score is None
            continue
        assert len(sub.comments) == 1 and sub.score == row.total
    assert double.data.subs[int(sent[4].essay_id)].updates == 2  # sent again, its comment not added twice


def test_an_update_whose_answer_was_lost_is_retried_without_a_second_comment(
    scored: tuple[Path, Path], canvas: Canvas, tmp_path: Path
) -> None:
    double, client = canvas
    pull_dir, run = _copy(scored, tmp_path)
    _, plan = _plan(client, pull_dir, run)
    double.data.fail_after_update = [502, 503]  # the first student's update saved twice, both answers lost
    result = push(client, plan, run)
    first = double.data.subs[result.sent[0].user_id]
    assert first.updates == 3 and len(first.comments) == 1 and first.score == result.sent[0].new_points
    assert all(len(double.data.subs[c.user_id].comments) == 1 for c in result.sent)


def test_a_grade_changed_in_canvas_is_a_conflict_left_alone(
    scored: tuple[Path, Path], canvas: Canvas, tmp_path: Path
) -> None:
    double, client = canvas
    pull_dir, run = _copy(scored, tmp_path)
    changed, again, excused = double.data.subs[1003], double.data.subs[1004], double.data.subs[1005]
    changed.score, changed.grade = 5.0, "5"
    again.attempt = 2  # handed in again after the pull: madrag graded the first attempt
    excused.excused = True
    _, plan = _plan(client, pull_dir, run)
    reasons = {c.user_id: c.reason for c in plan.changes if c.status == "conflict"}
    assert set(reasons) == {1003, 1004, 1005} and "now 5" in reasons[1003]
    assert "attempt 1 -> 2" in reasons[1004] and "excused" in reasons[1005]
    assert "Pupil3 Family3: 5 ->" in preview_text(plan)
    push(client, plan, run)
    assert (changed.score, changed.grade, changed.comments, changed.updates) == (5.0, "5", [], 0)
    assert again.updates == 0 and excused.updates == 0 and excused.score is None


def test_manual_posting_keeps_grades_and_comments_hidden(scored: tuple[Path, Path], tmp_path: Path) -> None:
    double = CanvasDouble(class_of(SENTINEL, post_manually=True))
    base = double.start()
    try:
        client = CanvasClient(load_or_save(tmp_path / "data", base))
        pull_dir, run = _copy(scored, tmp_path)
        _, plan = _plan(client, pull_dir, run)
        plan = plan.__class__(plan.manifest.model_copy(update={"post_manually": True}), plan.changes)
        assert "posts grades manually" in preview_text(plan)
        push(client, plan, run)
        graded = [s for s in double.data.subs.values() if s.score is not None]
        assert len(graded) == 23 and all(s.posted_at is None and s.comments[0]["hidden"] for s in graded)
    finally:
        double.stop()


def test_the_token_is_in_no_file_madrag_writes_but_its_own(
    scored: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect, pull, push --dry-run and push through the CLI (its command tree, in this process)."""
    double = CanvasDouble(class_of(SENTINEL))
    base = double.start()
    data, pull_dir, run = tmp_path / "data", tmp_path / "pull", tmp_path / "run"
    monkeypatch.setenv("MADRAG_DATA_DIR", str(data))
    runner = CliRunner()
    try:
        outs = [runner.invoke(app, ["lms", "connect", "--url", base], input=SENTINEL + "\n")]
        creds = data / FILE_NAME
        assert outs[0].exit_code == 0 and stat.S_IMODE(creds.stat().st_mode) == 0o600 and SENTINEL in creds.read_text()
        outs.append(runner.invoke(app, ["lms", "pull", "7", "77", "--out", str(pull_dir)]))
        assert outs[-1].exit_code == 0 and "Pulled 25 essay(s)" in outs[-1].output, outs[-1].output
        shutil.copytree(scored[1], run)
        outs.append(runner.invoke(app, ["lms", "push", str(run), "--pull", str(pull_dir), "--dry-run"]))
        assert outs[-1].exit_code == 0 and "23 send" in outs[-1].output, outs[-1].output
        assert all(s.updates == 0 for s in double.data.subs.values())
        outs.append(runner.invoke(app, ["lms", "push", str(run), "--pull", str(pull_dir)]))
        assert outs[-1].exit_code == 0 and "Sent 23 student(s)" in outs[-1].output, outs[-1].output
        assert all(SENTINEL not in out.output for out in outs)
    finally:
        double.stop()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != creds]
    assert {p.name for p in written} >= {"essays.jsonl", "rubric.json", "roster.json", "canvas-pull.json", JOURNAL}
    assert [p for p in written if SENTINEL.encode() in p.read_bytes()] == []


def test_a_wrong_token_is_refused_and_not_kept(canvas: Canvas, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    double, _ = canvas
    monkeypatch.setenv("MADRAG_DATA_DIR", str(tmp_path / "mine"))
    result = CliRunner().invoke(app, ["lms", "connect", "--url", double.base], input="not-the-token\n")
    assert result.exit_code != 0 and "(401)" in str(result.exception) and "not-the-token" not in str(result.exception)
    assert not (tmp_path / "mine" / FILE_NAME).exists()

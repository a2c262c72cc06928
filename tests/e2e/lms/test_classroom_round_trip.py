"""The Google Classroom round trip on the Classroom double (tests/classroom_double.py: every request checked against
the discovery documents google-api-python-client ships), with Google's own client: an assignment madrag creates,
25 submissions pulled (Google Docs, .docx and .pdf), a run scored on the fake backend, two overrides and the rest
accepted but two students, the preview, the push (grades and the work returned); a push killed midway and rerun, a
grade changed in Classroom after the pull, a coursework made in Classroom's own pages (Google's 403 and the plain
sentence), and the OAuth token found in no file madrag wrote but its credential file."""

from __future__ import annotations

import csv
import json
import re
import shutil
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from tests.canvas_double import class_of as canvas_class
from tests.classroom_double import PROJECT_DENIED, ClassroomDouble, GoogleSignIn, class_of
from typer.testing import CliRunner

import madrag
from madrag.cli.app import app
from madrag.lms.calls import Backoff
from madrag.lms.classroom_client import NOT_MADRAGS, ClassroomClient, NotMadragsCoursework
from madrag.lms.classroom_pull import pull_classroom
from madrag.lms.google_auth import SCOPES, TOKEN_FILE, load_token, save_token
from madrag.lms.journal import JOURNALS, Journal
from madrag.lms.manifest import load_manifest, load_roster
from madrag.lms.preview import preview_json, preview_text
from madrag.lms.push import Change, ClassGrades, PushPlan, current_state, plan_push, push
from madrag.lms.rubric_import import import_rubric
from madrag.server.reviews import Review, add_review

pytest.importorskip("googleapiclient")

SENTINEL = "ya29.classroom-token-SENTINEL-5d1e"
REFRESH = "1//refresh-SENTINEL-88c2"
OVERRIDES = {
    ("2001", "Ideas"): (1, "Your ideas need support from the text."),
    ("2002", "Conventions"): (0, "Proofread."),
}
UNDECIDED = ("2024", "2025")


def credentials() -> Any:
    from google.oauth2.credentials import Credentials

    return Credentials(
        token=SENTINEL,
        expiry=datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1),  # google-auth's naive UTC
        refresh_token=REFRESH,
        token_uri="https://oauth2.googleapis.com/token",
        client_id="school-client.apps.googleusercontent.com",
        client_secret="school-client-secret",
    )


def client_of(double: ClassroomDouble, tries: int = 3) -> ClassroomClient:
    client = ClassroomClient.signed_in(credentials(), transport=double)
    client.backoff, client.sleep = Backoff(tries=tries, first_s=0.0), lambda _s: None
    return client


def hand_in(double: ClassroomDouble, coursework_id: str) -> None:
    """Every student hands in to ``coursework_id`` (the one madrag made)."""
    for sub in double.data.subs.values():
        sub.coursework_id = coursework_id


def rubric_file(folder: Path) -> Path:
    rubric, _ = import_rubric(canvas_class("unused").assignment)
    path = folder / "river-rubric.json"
    path.write_text(json.dumps(rubric.model_dump(mode="json")), encoding="utf-8")
    return path


def review(run: Path, essays: list[str]) -> None:
    for essay in essays:
        if essay in UNDECIDED:
            continue
        for trait in ("Ideas", "Conventions"):
            found = OVERRIDES.get((essay, trait))
            add_review(
                run,
                Review(
                    essay_id=essay,
                    trait=trait,
                    protocol="MAD",
                    action="override" if found else "accept",
                    new_score=found[0] if found else None,
                    comment=found[1] if found else "",
                ),
            )


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(pull folder, scored run, rubric file) of the class of 25, on a coursework madrag created."""
    root = tmp_path_factory.mktemp("classroom")
    double = ClassroomDouble(class_of(SENTINEL, made_by_madrag=False))
    client = client_of(double)
    rubric = madrag.load_rubric(rubric_file(root))
    made = client.create_coursework("61", "River essay (madrag)", rubric.prompt, sum(t.max for t in rubric.traits))
    assert made["associatedWithDeveloper"] and made["maxPoints"] == 7
    hand_in(double, made["id"])
    pulled = pull_classroom(client, "61", made["id"], root / "pull", rubric)
    assert pulled.essays == 25 and not pulled.manifest.refused and pulled.manifest.made_by_madrag
    sources = {s.source.rsplit(".", 1)[-1].split(" ")[-1] for s in pulled.manifest.submissions}
    assert sources == {"Doc)", "docx", "pdf"} and double.violations == []
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
    review(run, [s.essay_id for s in pulled.manifest.submissions])
    return root / "pull", run, root / "river-rubric.json"


Classroom = tuple[ClassroomDouble, ClassroomClient]


@pytest.fixture()
def classroom() -> Iterator[Classroom]:
    """The class as the pull left it: every student handed in to the coursework madrag made (``9001``)."""
    double = ClassroomDouble(class_of(SENTINEL, made_by_madrag=False))
    double.data.courseworks["9001"] = {**double.data.courseworks["71"], "id": "9001", "associatedWithDeveloper": True}
    hand_in(double, "9001")
    yield double, client_of(double)
    assert double.violations == []  # every request madrag made is one the discovery documents describe


def _copy(scored: tuple[Path, Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    pull_dir, run, _ = scored
    shutil.copytree(run, tmp_path / "run")
    return pull_dir, tmp_path / "run"


def _plan(client: ClassroomClient, pull_dir: Path, run: Path) -> tuple[ClassGrades, PushPlan]:
    from madrag.server.class_book import class_grades

    manifest = load_manifest(pull_dir)
    grades = class_grades(run, load_roster(pull_dir))
    return grades, plan_push(grades, manifest, current_state(client, manifest), Journal(run, "classroom"))


def test_round_trip_sends_the_teachers_decisions(
    scored: tuple[Path, Path, Path], classroom: Classroom, tmp_path: Path
) -> None:
    double, client = classroom
    pull_dir, run = _copy(scored, tmp_path)
    grades, plan = _plan(client, pull_dir, run)
    assert [c.essay_id for c in plan.changes if c.status != "send"] == list(UNDECIDED)
    text = preview_text(plan)
    assert text.startswith("Google Classroom: English 9 / River essay") and "Classroom's API takes no comment" in text
    assert "Pupil1 Family1: no grade ->" in text and "2 undecided" in text and "23 send" in text
    assert all(s.patches == 0 and s.returns == 0 for s in double.data.subs.values())  # a preview sends nothing
    assert preview_json(plan)["lms"] == "classroom"

    result = push(client, plan, run)
    assert len(result.sent) == 23
    rows = {r.essay_id: r for r in grades.rows}
    for change in result.sent:
        sub = double.data.subs[f"Cg{int(change.essay_id) - 2000}"]
        assert sub.assigned == sub.draft == rows[change.essay_id].total == change.new_points
        assert (sub.state, sub.patches, sub.returns) == ("RETURNED", 1, 1)
    assert double.data.subs["Cg1"].assigned == 1 + rows["2001"].grades["Conventions"].points  # her override
    for essay in UNDECIDED:
        sub = double.data.subs[f"Cg{int(essay) - 2000}"]
        assert (sub.assigned, sub.draft, sub.state, sub.patches) == (None, None, "TURNED_IN", 0)
    assert (run / JOURNALS["classroom"]).is_file() and not (run / JOURNALS["canvas"]).exists()

    _, again = _plan(client, pull_dir, run)
    assert again.to_send() == [] and sum(c.status == "sent before" for c in again.changes) == 23


def test_a_killed_push_rerun_sends_each_student_once(
    scored: tuple[Path, Path, Path], classroom: Classroom, tmp_path: Path
) -> None:
    double, client = classroom
    pull_dir, run = _copy(scored, tmp_path)
    _, plan = _plan(client, pull_dir, run)
    sent: list[Change] = []

    def kill_after_five(change: Change) -> None:  # killed after Classroom took the 5th, before the journal says so
        sent.append(change)
        if len(sent) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        push(client, plan, run, after_each=kill_after_five)
    assert sum(s.patches for s in double.data.subs.values()) == 5
    double.data.fail_next = [503, 429]  # and Google is busy when the push is run again
    grades, plan = _plan(client, pull_dir, run)
    assert sum(c.status == "sent before" for c in plan.changes) == 4
    assert not any(c.status == "conflict" for c in plan.changes)  # the 5th's grade is madrag's own
    push(client, plan, run)
    for row in grades.rows:
        sub = double.data.subs[f"Cg{int(row.essay_id) - 2000}"]
        if row.essay_id in UNDECIDED:
            assert sub.patches == sub.returns == 0
            continue
        assert (sub.patches, sub.returns, sub.assigned) == (1, 1, row.total)


def test_a_grade_changed_in_classroom_is_a_conflict_left_alone(
    scored: tuple[Path, Path, Path], classroom: Classroom, tmp_path: Path
) -> None:
    double, client = classroom
    pull_dir, run = _copy(scored, tmp_path)
    changed, drafted, reclaimed = (double.data.subs[k] for k in ("Cg3", "Cg4", "Cg5"))
    changed.assigned = 5.0
    drafted.draft = 2.0  # the teacher began grading in Classroom
    reclaimed.state = "RECLAIMED_BY_STUDENT"
    _, plan = _plan(client, pull_dir, run)
    reasons = {c.essay_id: c.reason for c in plan.changes if c.status == "conflict"}
    assert set(reasons) == {"2003", "2004", "2005"}
    assert "changed in Google Classroom since the pull (was no grade, now 5)" in reasons["2003"]
    assert "now draft 2" in reasons["2004"] and "taken back by the student" in reasons["2005"]
    assert "Pupil3 Family3: 5 ->" in preview_text(plan)
    push(client, plan, run)
    assert (changed.assigned, changed.patches, changed.returns) == (5.0, 0, 0)
    assert (drafted.draft, drafted.assigned, drafted.patches) == (2.0, None, 0) and reclaimed.patches == 0


def test_a_coursework_made_in_classroom_goes_back_by_file(
    scored: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulled, previewed with the plain sentence, its grades written to the Classroom file; and a send tried anyway
    is Google's 403 ``@ProjectPermissionDenied``, said plainly."""
    double = ClassroomDouble(class_of(SENTINEL, made_by_madrag=False))
    client = client_of(double)
    rubric = madrag.load_rubric(scored[2])
    pulled = pull_classroom(client, "61", "71", tmp_path / "pull", rubric)
    assert pulled.essays == 25 and pulled.manifest.made_by_madrag is False
    _, run = _copy(scored, tmp_path)
    _, plan = _plan(client, tmp_path / "pull", run)
    assert {c.status for c in plan.changes} == {"by file", "undecided"}
    assert "made in Classroom's own pages" in preview_text(plan)
    assert push(client, plan, run).sent == []

    forced = plan.changes[0].__class__(**{**plan.changes[0].__dict__, "status": "send"})
    with pytest.raises(NotMadragsCoursework) as caught:
        client.send(plan.manifest, forced)
    assert str(caught.value) == NOT_MADRAGS and "ProjectPermissionDenied" in str(caught.value)
    answered = [c for c in double.calls if c.endswith("patch")]
    assert answered == ["classroom.courses.courseWork.studentSubmissions.patch"]  # one 403, not retried
    assert all(s.patches == 0 and s.assigned is None for s in double.data.subs.values())

    monkeypatch.setenv("MADRAG_DATA_DIR", str(tmp_path / "data"))
    save_token(credentials())
    _with_double(monkeypatch, double)
    out = CliRunner().invoke(app, ["lms", "push", str(run), "--pull", str(tmp_path / "pull")])
    assert out.exit_code == 0 and f"The grades are in {run / 'classroom-grades.csv'}" in out.output, out.output
    rows = list(csv.reader((run / "classroom-grades.csv").open(encoding="utf-8")))
    assert rows[0][:3] == ["Last Name", "First Name", "Email Address"] and len(rows) == 24  # not the 2 undecided
    assert ["Family1", "Pupil1", "pupil1@school.example"] == rows[1][:3]
    assert double.violations == [] and all(s.patches == 0 for s in double.data.subs.values())


def test_googles_403_body_is_the_documented_one() -> None:
    double = ClassroomDouble(class_of(SENTINEL, made_by_madrag=False))
    _, content = double.answer(
        "classroom.courses.courseWork.studentSubmissions.return",
        {"courseId": "61", "courseWorkId": "71", "id": "Cg1"},
        {},
        {},
    )
    assert json.loads(content) == {"error": {"code": 403, "message": PROJECT_DENIED, "status": "PERMISSION_DENIED"}}


def _with_double(monkeypatch: pytest.MonkeyPatch, double: ClassroomDouble) -> None:
    """The CLI's client over the double (the services and the kept credentials as madrag builds them)."""
    built = ClassroomClient.signed_in.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        ClassroomClient, "signed_in", classmethod(lambda cls, creds, transport=None: built(cls, creds, double))
    )


def test_the_token_is_in_no_file_madrag_writes_but_its_own(
    scored: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect (Google's sign-in run for real against a local token endpoint), courses, create, pull, push
    --dry-run and push through the CLI, in this process."""
    import webbrowser

    double = ClassroomDouble(class_of(SENTINEL, made_by_madrag=False))
    data, pull_dir, run = tmp_path / "data", tmp_path / "pull", tmp_path / "run"
    monkeypatch.setenv("MADRAG_DATA_DIR", str(data))
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the local token endpoint is plain http
    google = GoogleSignIn(SENTINEL, REFRESH)
    secrets = google.client_file(tmp_path / "client_secret.json", google.start(), SCOPES)
    monkeypatch.setattr(webbrowser, "get", lambda using=None: google)
    _with_double(monkeypatch, double)
    runner = CliRunner()
    try:
        outs = [runner.invoke(app, ["lms", "classroom", "connect", "--client-file", str(secrets)])]
    finally:
        google.stop()
    token = data / TOKEN_FILE
    assert outs[0].exit_code == 0, outs[0].output
    assert urlsplit(google.opened[0]).netloc == "accounts.google.com"
    asked = parse_qs(urlsplit(google.opened[0]).query)
    assert asked["redirect_uri"][0].startswith("http://127.0.0.1:") and asked["scope"] == [" ".join(SCOPES)]
    assert google.exchanged[0]["code"] == [GoogleSignIn.CODE] and google.exchanged[0]["code_verifier"]
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and SENTINEL in token.read_text()
    assert load_token().token == SENTINEL and load_token().refresh_token == REFRESH
    outs.append(runner.invoke(app, ["lms", "classroom", "courses"]))
    assert re.search(r"^61\s+English 9$", outs[-1].output, re.M), outs[-1].output
    outs.append(
        runner.invoke(app, ["lms", "classroom", "create", "61", "--rubric", str(scored[2]), "--title", "River"])
    )
    assert re.search(r"Created 9001\s+River\s+7 points", outs[-1].output), outs[-1].output
    hand_in(double, "9001")
    outs.append(runner.invoke(app, ["lms", "classroom", "coursework", "61"]))
    assert re.search(r"9001\s+River\s+7 points\s+madrag's: grades go back", outs[-1].output), outs[-1].output
    pull = ["lms", "classroom", "pull", "61", "9001", "--rubric", str(scored[2]), "--out", str(pull_dir)]
    outs.append(runner.invoke(app, pull))
    assert outs[-1].exit_code == 0 and "Pulled 25 essay(s)" in outs[-1].output, outs[-1].output
    shutil.copytree(scored[1], run)
    outs.append(runner.invoke(app, ["lms", "push", str(run), "--pull", str(pull_dir), "--dry-run"]))
    assert outs[-1].exit_code == 0 and "23 send" in outs[-1].output, outs[-1].output
    assert all(s.patches == 0 for s in double.data.subs.values())
    outs.append(runner.invoke(app, ["lms", "push", str(run), "--pull", str(pull_dir)]))
    assert outs[-1].exit_code == 0 and "Sent 23 student(s)" in outs[-1].output, outs[-1].output
    assert sum(s.returns for s in double.data.subs.values()) == 23 and double.violations == []
    assert all(SENTINEL not in out.output and REFRESH not in out.output for out in outs)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in (token, secrets)]
    assert {p.name for p in written} >= {"essays.jsonl", "rubric.json", "roster.json", "classroom-pull.json"}
    assert JOURNALS["classroom"] in {p.name for p in written}
    assert [p for p in written if SENTINEL.encode() in p.read_bytes() or REFRESH.encode() in p.read_bytes()] == []

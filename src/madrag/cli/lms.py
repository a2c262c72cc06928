"""``madrag lms``: a class from Canvas or Google Classroom and back (docs/lms.md). ``connect`` keeps the Canvas
address and access token in madrag's data directory (0600); ``courses`` and ``assignments`` list what the token's
user teaches; ``pull`` writes an assignment's submissions, roster and rubric as madrag's inputs; ``classroom ...``
does the same with Google Classroom (:mod:`madrag.cli.lms_classroom`); ``push`` sends a scored run's grades (and, to
Canvas, rubric assessments and feedback) back to the LMS its pull came from, previewed with ``--dry-run``. The
library is :mod:`madrag.lms`; the grades are the gradebook's (:func:`madrag.server.class_book.class_grades`, as the
web app's gradebook and feedback pages read them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import SecretStr

from madrag.cli.lms_classroom import PullOutOpt, classroom_app
from madrag.cli.output import console
from madrag.files.atomic import write_text_atomic
from madrag.lms.classroom_client import ClassroomClient, NotMadragsCoursework
from madrag.lms.client import CanvasClient
from madrag.lms.credentials import CanvasCredentials, check_url, load_credentials, save_credentials
from madrag.lms.google_auth import load_token
from madrag.lms.journal import Journal
from madrag.lms.manifest import PullManifest, load_manifest, load_roster
from madrag.lms.preview import preview_json, preview_text
from madrag.lms.pull import pull
from madrag.lms.push import ClassGrades, PushPlan, Sender, current_state, plan_push, push
from madrag.teacher.gradebook import classroom_csv

lms_app = typer.Typer(
    help="Canvas and Google Classroom: pull an assignment's submissions (and Canvas's rubric), send grades back."
)
lms_app.add_typer(classroom_app, name="classroom")

PullDir = Annotated[
    Path,
    typer.Option("--pull", help="The folder `madrag lms pull` wrote (its canvas-pull.json or classroom-pull.json)."),
]
CLASSROOM_FILE = "classroom-grades.csv"


def _client() -> CanvasClient:
    return CanvasClient(load_credentials())


def _sender(manifest: PullManifest) -> Sender:
    """The client of the LMS the pull came from, with its kept credentials."""
    if manifest.lms == "classroom":
        return ClassroomClient.signed_in(load_token())
    return _client()


def _by_file(run_dir: Path, grades: ClassGrades, plan: PushPlan) -> Path:
    """The Google Classroom grade file, beside the run, of the students the push would send (the gradebook's rows:
    not the undecided, unless she said so, nor conflicts): how the grades of a coursework madrag did not make go
    back."""
    going = {c.essay_id for c in plan.changes if c.status in ("send", "by file")}
    rows = [r for r in grades.rows if r.essay_id in going]
    path = run_dir / CLASSROOM_FILE
    write_text_atomic(path, classroom_csv(rows, grades.criteria, plan.manifest.assignment_name or "madrag"))
    return path


@lms_app.command("connect")
def connect_command(
    url: Annotated[str, typer.Option("--url", help="Your Canvas address, e.g. https://school.instructure.com.")],
    token: Annotated[
        str,
        typer.Option(
            "--token",
            prompt="Canvas access token (Account > Settings > New access token)",
            hide_input=True,
            help="The access token (asked for, unseen, when not given; never written anywhere else).",
        ),
    ],
) -> None:
    """Keep your Canvas address and access token in madrag's data directory (readable by you only), and check them."""
    creds = CanvasCredentials(url=check_url(url), token=SecretStr(token.strip()))
    courses = CanvasClient(creds).courses()  # checked before it is kept: a wrong token is refused, not stored
    path = save_credentials(creds.url, token)
    console.print(f"Connected: {len(courses)} course(s) you teach. Kept in {path} (mode 0600).")


@lms_app.command("courses")
def courses_command() -> None:
    """List the Canvas courses you teach: id and name."""
    for course in _client().courses():
        console.print(f"{course.get('id')}\t{course.get('name', '')}")


@lms_app.command("assignments")
def assignments_command(course: Annotated[int, typer.Argument(help="The course id.")]) -> None:
    """List a course's assignments: id, name, points, whether it has a rubric."""
    for a in _client().assignments(course):
        rubric = "rubric" if a.get("rubric") or a.get("rubric_settings") else "no rubric"
        console.print(f"{a.get('id')}\t{a.get('name', '')}\t{a.get('points_possible')} points\t{rubric}")


@lms_app.command("pull")
def pull_command(
    course: Annotated[int, typer.Argument(help="The course id.")],
    assignment: Annotated[int, typer.Argument(help="The assignment id.")],
    out: PullOutOpt,
) -> None:
    """Pull an assignment's submissions (text entries, .docx / .pdf files), roster and rubric as madrag's inputs."""
    creds = load_credentials()
    done = pull(CanvasClient(creds), course, assignment, out, creds.url)
    console.print(
        f"Pulled {done.essays} essay(s) into {out}: essays.jsonl, rubric.json, roster.json, canvas-pull.json."
    )
    for refused in done.manifest.refused:
        console.print(f"  not pulled: {refused.name}: {refused.reason}")
    console.print(f"Score them: madrag score --essays {out / 'essays.jsonl'} --rubric {out / 'rubric.json'} ...")


@lms_app.command("push")
def push_command(
    run_dir: Annotated[Path, typer.Argument(help="The scored run folder.")],
    pull_dir: PullDir,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be sent; send nothing.")] = False,
    include_undecided: Annotated[
        bool, typer.Option("--include-undecided", help="Also send grades you have not decided (the AI's scores).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the preview as JSON.")] = False,
) -> None:
    """Send the run's grades (your decisions) back to the LMS of the pull, one student at a time: to Canvas with
    rubric assessments and feedback, to Google Classroom as the grade, the work returned. A grade changed in the LMS
    since the pull is shown and left alone."""
    from madrag.server.class_book import class_grades

    manifest = load_manifest(pull_dir)
    client = _sender(manifest)
    grades: ClassGrades = class_grades(run_dir, load_roster(pull_dir))
    journal = Journal(run_dir, manifest.lms)
    plan = plan_push(grades, manifest, current_state(client, manifest), journal, include_undecided)
    if as_json:
        typer.echo(json.dumps(preview_json(plan), indent=2, ensure_ascii=False))
    else:
        console.print(preview_text(plan), markup=False, highlight=False)
    if any(c.status == "by file" for c in plan.changes):
        path = _by_file(run_dir, grades, plan)
        console.print(
            f"The grades are in {path} (by student, with email): enter them in Classroom's gradebook from it "
            "(Classroom imports no grade file).",
            markup=False,
            soft_wrap=True,
        )
    if dry_run:
        return
    _send(client, plan, run_dir, grades)


def _send(client: Sender, plan: PushPlan, run_dir: Path, grades: ClassGrades) -> None:
    try:
        result = push(client, plan, run_dir)
    except NotMadragsCoursework:
        _by_file(run_dir, grades, plan)  # Google refused: the file is how they go back
        raise
    console.print(f"Sent {len(result.sent)} student(s); {len(result.left)} left as shown above.", markup=False)

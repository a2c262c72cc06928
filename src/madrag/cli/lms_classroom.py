"""``madrag lms classroom``: Google Classroom (docs/lms.md). ``connect`` signs in with the school's OAuth client
file and keeps the token in madrag's data directory (0600); ``courses`` and ``coursework`` list what the account
teaches; ``create`` makes an assignment in Classroom from a rubric (madrag's project then may send its grades);
``pull`` writes a coursework's submissions and roster as madrag's inputs. ``madrag lms push`` sends the grades back
(it reads which LMS from the pull). The library is :mod:`madrag.lms`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from madrag.cli.output import console
from madrag.lms.classroom_client import ClassroomClient
from madrag.lms.classroom_pull import pull_classroom
from madrag.lms.google_auth import SIGN_IN_S, authorize, load_token, save_token
from madrag.rubric import load_rubric

classroom_app = typer.Typer(
    help="Google Classroom: sign in, list courses and coursework, create an assignment madrag can grade, pull one."
)
CourseArg = Annotated[str, typer.Argument(help="The course id (`madrag lms classroom courses`).")]
RubricOpt = Annotated[Path, typer.Option("--rubric", help="The rubric to score by (a madrag rubric file).")]
PullOutOpt = Annotated[
    Path, typer.Option("--out", help="The folder to write essays.jsonl, rubric.json and the manifest in.")
]


def _client() -> ClassroomClient:
    return ClassroomClient.signed_in(load_token())


@classroom_app.command("connect")
def connect_command(
    client_file: Annotated[
        Path,
        typer.Option("--client-file", help="Your school's OAuth client file (a desktop app's client_secret_....json)."),
    ],
) -> None:
    """Sign in to Google in the browser (madrag listens on 127.0.0.1 for the answer) and keep the token in madrag's
    data directory (readable by you only)."""
    console.print(
        f"Sign in to Google in the browser (the address is printed below too); madrag waits {SIGN_IN_S // 60} "
        "minutes for Google's answer on 127.0.0.1.",
        markup=False,
    )
    credentials = authorize(client_file)
    courses = ClassroomClient.signed_in(credentials).courses()  # checked before it is kept
    path = save_token(credentials)
    console.print(f"Connected: {len(courses)} active course(s) you teach. Kept in {path} (mode 0600).")


@classroom_app.command("courses")
def courses_command() -> None:
    """List the active Google Classroom courses you teach: id and name."""
    for course in _client().courses():
        console.print(f"{course.get('id')}\t{course.get('name', '')}", markup=False)


@classroom_app.command("coursework")
def coursework_command(course: CourseArg) -> None:
    """List a course's coursework: id, title, points, and whether madrag made it (only then can it send grades)."""
    for work in _client().courseworks(course):
        whose = "madrag's: grades go back" if work.get("associatedWithDeveloper") else "grades go back by file"
        points = work.get("maxPoints", "no")
        console.print(f"{work.get('id')}\t{work.get('title', '')}\t{points} points\t{whose}", markup=False)


@classroom_app.command("create")
def create_command(
    course: CourseArg,
    rubric: RubricOpt,
    title: Annotated[str, typer.Option("--title", help="The assignment's title in Classroom.")],
) -> None:
    """Create a published assignment in Classroom worth the rubric's points, its instructions the rubric's prompt:
    madrag's project made it, so `madrag lms push` can send its grades and return the work."""
    found = load_rubric(rubric)
    points = sum(t.max for t in found.traits)
    made = _client().create_coursework(course, title, found.prompt, points)
    console.print(f"Created {made.get('id')}\t{made.get('title', '')}\t{points} points", markup=False)
    if made.get("alternateLink"):
        console.print(f"Students hand in there: {made['alternateLink']}", markup=False)


@classroom_app.command("pull")
def pull_command(
    course: CourseArg,
    coursework: Annotated[str, typer.Argument(help="The coursework id.")],
    rubric: RubricOpt,
    out: PullOutOpt,
) -> None:
    """Pull a coursework's submissions (Google Docs, .docx / .pdf files) and roster as madrag's inputs."""
    done = pull_classroom(_client(), course, coursework, out, load_rubric(rubric))
    console.print(
        f"Pulled {done.essays} essay(s) into {out}: essays.jsonl, rubric.json, roster.json, classroom-pull.json.",
        markup=False,
    )
    for refused in done.manifest.refused:
        console.print(f"  not pulled: {refused.name}: {refused.reason}", markup=False)
    if not done.manifest.made_by_madrag:
        console.print(
            "This coursework was made in Classroom's own pages: madrag cannot send its grades (Google lets only the "
            "project that made a coursework change them); `madrag lms push` writes the Google Classroom grade file.",
            markup=False,
        )
    console.print(f"Score them: madrag score --data {out / 'essays.jsonl'} --rubric {out / 'rubric.json'} ...")

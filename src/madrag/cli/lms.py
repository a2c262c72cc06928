"""``madrag lms``: a class from Canvas and back (docs/lms.md). ``connect`` keeps the Canvas address and access token
in madrag's data directory (0600); ``courses`` and ``assignments`` list what the token's user teaches; ``pull``
writes an assignment's submissions, roster and rubric as madrag's inputs; ``push`` sends a scored run's grades,
rubric assessments and feedback back, previewed with ``--dry-run``. The library is :mod:`madrag.lms`; the grades are
the gradebook's (:func:`class_grades`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import SecretStr

from madrag.cli.output import console
from madrag.lms.client import CanvasClient
from madrag.lms.credentials import CanvasCredentials, check_url, load_credentials, save_credentials
from madrag.lms.journal import Journal
from madrag.lms.manifest import load_manifest, load_roster
from madrag.lms.preview import preview_json, preview_text
from madrag.lms.pull import pull
from madrag.lms.push import ClassGrades, current_state, plan_push, push

lms_app = typer.Typer(help="Canvas: pull an assignment's submissions and rubric, send grades and feedback back.")

PullDir = Annotated[Path, typer.Option("--pull", help="The folder `madrag lms pull` wrote (its canvas-pull.json).")]


def _client() -> CanvasClient:
    return CanvasClient(load_credentials())


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
    out: Annotated[
        Path, typer.Option("--out", help="The folder to write essays.jsonl, rubric.json and the manifest in.")
    ],
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
    """Send the run's grades (your decisions), rubric assessments and feedback to Canvas, one student at a time;
    a grade changed in Canvas since the pull is shown and left alone."""
    from madrag.cli.lms_grades import class_grades

    manifest = load_manifest(pull_dir)
    client = _client()
    grades: ClassGrades = class_grades(run_dir, load_roster(pull_dir))
    plan = plan_push(grades, manifest, current_state(client, manifest), Journal(run_dir), include_undecided)
    if as_json:
        typer.echo(json.dumps(preview_json(plan), indent=2, ensure_ascii=False))
    else:
        console.print(preview_text(plan), markup=False, highlight=False)
    if dry_run:
        return
    result = push(client, plan, run_dir)
    console.print(f"Sent {len(result.sent)} student(s); {len(result.left)} left as shown above.", markup=False)

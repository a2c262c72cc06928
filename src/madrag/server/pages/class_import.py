"""An essay import's reading step and its column-mapping page. Reading: the uploaded bytes become a table of
rows (:func:`madrag.data.class_files.read_class_file`: a CSV in any common encoding, an Excel workbook, a ZIP of
submissions), said on the page as what they were read as. A table in madrag's own layout (``id`` and ``text``)
goes straight to the library's loaders; any other (a Google Forms or LMS export, the submissions of a ZIP) is
kept in the draft's folder, as a UTF-8 CSV, until the teacher says on the mapping page which column holds what;
then it is read as madrag's layout by the library's loaders, and the students' identifiers become the draft's
roster."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.data.class_files import ClassTable, read_class_file, read_csv_text
from madrag.data.refusals import Refusals
from madrag.errors import InputError, MadragError
from madrag.files.atomic import write_text_atomic
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.class_book import save_roster
from madrag.server.config import Limits
from madrag.server.http.refusals import check_count
from madrag.server.http.security import check_csrf
from madrag.server.pages.rendering import redirect, render, state_of
from madrag.teacher import columns

PENDING = "pending-import.csv"
READ_NOTE = "pending-import.json"
"""What the held upload was read as, and its files that could not be read, for the mapping page."""
_AS_IS = (".jsonl", ".ndjson", ".tsv")


@dataclass(frozen=True)
class Direct:
    """An upload the library's loaders read without a mapping step: its bytes (UTF-8 for a table read here), a
    file name whose suffix says its format, and what it was read as (empty when handed on as it came)."""

    data: bytes
    filename: str
    read_as: str = ""


def take(folder: Path, data: bytes, filename: str, fmt: str, max_rows: int) -> Direct | None:
    """The reading step of an essay upload (bytes -> a table of rows): a JSONL or ASAP TSV goes on as it came; a
    CSV, workbook, ZIP of submissions or single document is read as a table, which goes on as a UTF-8 CSV when it
    is in madrag's layout, else is held for the mapping step (None). Over ``max_rows`` rows is refused (413)."""
    if fmt in ("jsonl", "asap") or (fmt == "auto" and Path(filename).suffix.lower() in _AS_IS):
        return Direct(data, filename)
    table = read_class_file(data, filename, max_rows)
    check_count(len(table.rows), max_rows, "data")
    if not table.rows and table.refused:
        file, why = table.refused[0]
        more = f" (and {len(table.refused) - 1} more files)" if len(table.refused) > 1 else ""
        raise InputError(f"no essay could be read: {file}: {why}{more}")
    if columns.is_native(table.header) and not table.refused:
        text = table.text if table.text is not None else table.csv_text()
        return Direct(text.encode("utf-8"), f"{Path(filename).stem or 'essays'}.csv", table.read_as)
    keep(folder, table)
    return None


def keep(folder: Path, table: ClassTable) -> None:
    """Hold a table for the mapping step, with what it was read as."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / PENDING, table.csv_text())
    note = {"read_as": table.read_as, "refused": [list(r) for r in table.refused]}
    write_text_atomic(folder / READ_NOTE, json.dumps(note, ensure_ascii=False))


def held(folder: Path) -> dict[str, Any]:
    """What the held upload was read as (``read_as``) and its files refused (``refused``: ``[file, why]``)."""
    path = folder / READ_NOTE
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {"read_as": str(found.get("read_as", "")), "refused": [tuple(r) for r in found.get("refused", [])]}


def _file_refusals(folder: Path) -> Refusals:
    refused = Refusals()
    for file, why in held(folder)["refused"]:
        refused.add(file, why)
    return refused


def pending(folder: Path) -> tuple[list[str], list[dict[str, str]]] | None:
    """The held upload's header and rows (None when nothing is held)."""
    path = folder / PENDING
    if not path.is_file():
        return None
    return read_csv_text(path.read_text(encoding="utf-8"), "the class file", delimiter=",")  # as keep wrote it


def read_mapped(
    folder: Path, rubric: Rubric, mapping: columns.Mapping, limits: Limits
) -> tuple[library.EssayUpload, list[tuple[str, int, int]]]:
    """The held upload read under ``mapping``, and each resubmission replaced (essay id, row replaced, row kept);
    its roster saved beside the draft, the upload let go."""
    found = pending(folder)
    if found is None:
        raise InputError("upload the class file again: the file to map is gone")
    mapped = columns.apply(found[1], mapping)
    upload = library.essays_from_upload(mapped.text.encode("utf-8"), "mapped.csv", rubric, "csv", limits)
    kept = {e.id for e in upload.essays}
    save_roster(folder, {k: v for k, v in mapped.roster.items() if k in kept})
    upload = library.EssayUpload(upload.essays, _file_refusals(folder).extend(upload.refused))
    (folder / PENDING).unlink()
    (folder / READ_NOTE).unlink(missing_ok=True)
    return upload, mapped.replaced


# -- the pages ---------------------------------------------------------------------------------------------------------

router = APIRouter(include_in_schema=False)
FIELDS = [
    ("text", "The essay"),
    ("email", "Student email"),
    ("sis_id", "Student id (SIS)"),
    ("name", "Student full name"),
    ("first_name", "First name"),
    ("last_name", "Last name"),
    ("section", "Section or class period"),
    ("id", "Essay id (optional)"),
]


def _mapping_page(
    request: Request,
    draft_id: str,
    error: str = "",
    status: int = 200,
    chosen: columns.Mapping | None = None,
    question: bool = False,
) -> Response:
    """The column-mapping step (``chosen``: the teacher's own choices, kept when a ``question`` is asked)."""
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    rubric = s.catalog.get(draft.rubric_id) if draft.rubric_id else None
    found = pending(s.drafts.folder(draft_id))
    if found is None or rubric is None:
        return redirect(f"/drafts/{draft_id}/essays")
    header, rows = found
    traits = [t.name for t in rubric.traits]
    guess = chosen or columns.guess(header, traits, rows)
    return render(
        request,
        "columns.html",
        status=status,
        draft=draft,
        header=header,
        sample=rows[:3],
        n_rows=len(rows),
        fields=FIELDS,
        guess=guess,
        traits=traits,
        error=error,
        question=question,
        read=held(s.drafts.folder(draft_id)),
    )


@router.get("/drafts/{draft_id}/columns")
def columns_page(draft_id: str, request: Request) -> Response:
    return _mapping_page(request, draft_id)


@router.post("/drafts/{draft_id}/columns")
async def columns_submit(draft_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    rubric = s.catalog.get(draft.rubric_id) if draft.rubric_id else None
    if rubric is None:
        return redirect(f"/drafts/{draft_id}/rubric")
    chosen = {name: str(form.get(f"col-{name}") or "") or None for name, _label in FIELDS}
    scores = {t.name: str(form.get(f"score-{i}")) for i, t in enumerate(rubric.traits) if form.get(f"score-{i}")}
    mapping = columns.Mapping(scores=scores, **chosen)
    found = pending(s.drafts.folder(draft_id))
    if found is not None and mapping.text and not form.get("text-confirmed"):
        question = columns.prose_question(mapping.text, [row.get(mapping.text, "") for row in found[1]])
        if question is not None:  # asked, not run: the teacher chooses another column or confirms this one
            return _mapping_page(request, draft_id, question[0].upper() + question[1:] + ".", 400, mapping, True)
    try:
        upload, replaced = read_mapped(s.drafts.folder(draft_id), rubric, mapping, s.config.limits)
    except MadragError as exc:
        return _mapping_page(request, draft_id, str(exc), 400)
    s.drafts.set_essays(draft, upload.essays, upload.refused)
    rows = ",".join(f"{old}-{new}" for _essay_id, old, new in replaced[:20])
    return redirect(f"/drafts/{draft_id}/essays" + (f"?replaced={rows}" if replaced else ""))

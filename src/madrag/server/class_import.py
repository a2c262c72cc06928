"""The column-mapping step of an essay import: a CSV without madrag's ``id`` and ``text`` columns (a Google
Forms or LMS export) is kept in the draft's folder until the teacher says which column holds what; then it is
read as madrag's layout by the library's loaders, and the students' identifiers become the draft's roster."""

from __future__ import annotations

from pathlib import Path

from madrag.errors import InputError
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.gradebook import save_roster
from madrag.teacher import columns

PENDING = "pending-import.csv"


def needs_mapping(data: bytes, filename: str, fmt: str) -> bool:
    """A CSV upload whose header is not madrag's own layout."""
    if fmt not in ("auto", "csv") or (fmt == "auto" and not filename.lower().endswith(".csv")):
        return False
    try:
        header, _rows = columns.read_table(data.decode("utf-8"))
    except (UnicodeDecodeError, InputError):
        return False
    return not columns.is_native(header)


def keep(folder: Path, data: bytes) -> None:
    """Hold an upload for the mapping step."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PENDING).write_bytes(data)


def pending(folder: Path) -> tuple[list[str], list[dict[str, str]]] | None:
    """The held upload's header and rows (None when nothing is held)."""
    path = folder / PENDING
    if not path.is_file():
        return None
    return columns.read_table(path.read_text(encoding="utf-8"))


def read_mapped(
    folder: Path, rubric: Rubric, mapping: columns.Mapping, max_rows: int, max_chars: int
) -> tuple[library.EssayUpload, list[tuple[str, int, int]]]:
    """The held upload read under ``mapping``, and each resubmission replaced (essay id, row replaced, row kept);
    its roster saved beside the draft, the upload let go."""
    found = pending(folder)
    if found is None:
        raise InputError("upload the class file again: the file to map is gone")
    mapped = columns.apply(found[1], mapping)
    upload = library.essays_from_upload(mapped.text.encode("utf-8"), "mapped.csv", rubric, "csv", max_rows, max_chars)
    kept = {e.id for e in upload.essays}
    save_roster(folder, {k: v for k, v in mapped.roster.items() if k in kept})
    (folder / PENDING).unlink()
    return upload, mapped.replaced

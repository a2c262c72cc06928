"""A class's submissions, one file (or a few) per student, as rows of a class table: a ZIP (Canvas's "Download
Submissions", a Google Drive folder of Classroom copies downloaded as a ZIP) or, for the CLI and the Python API,
a folder. The student is read from the file name as the LMS names it (docs/data-and-rubric-formats.md quotes the
rules and their sources):

- Canvas: ``<name>[_LATE]_<user id>_<attachment id>_<file name>`` (``<name>`` is the student's sortable name,
  lower case, without spaces or punctuation: ``leeann``), ``<name>[_LATE]_<user id>_text.html`` for a text
  entry, whose page holds the student's display name; ``anon_<id>`` in place of name and user id when the
  assignment hides the students.
- Google Classroom: ``<Student Name> - <title>.docx``, the name Classroom gives each student's copy of an
  assignment's document.
- Any other file: its folder's name when it is in a folder of its own, else the file's name.

The rows have the columns :data:`COLUMNS`; a student's several documents are one essay, their texts in the order
of their file names. A file that cannot be read is refused on its own (where, why, what to do). The archive as a
whole is refused, in one line, past :class:`ArchiveLimits`, for a file name that climbs out of it (``../``) or
an encrypted archive; a ZIP inside the ZIP is refused as one file.
"""

from __future__ import annotations

import functools
import io
import posixpath
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from madrag.data.documents import document_text, html_text
from madrag.data.reading import decode_text
from madrag.data.zip_parts import PartLimits, too_packed
from madrag.errors import InputError

COLUMNS = ("Student", "First Name", "Last Name", "ID", "Late", "File", "Essay")
"""The columns of a submissions table: the student's name as the file gives it, first and last name when it is
plainly two words (``Ann Lee``), Canvas's user id (the ``ID`` column of Canvas's own gradebook), ``late`` when
Canvas marked the submission late, the file name(s) and the essay's text."""
_IGNORED = re.compile(r"(^|/)(__MACOSX/|\._|\.DS_Store$|Thumbs\.db$|desktop\.ini$|\.~lock)", re.IGNORECASE)
_CANVAS = re.compile(
    r"^(?:(?P<name>[^\W_]+)_)??(?:(?P<late>late)_)?(?:anon_(?P<anon>[^\W_]+)|(?P<uid>\d+))"
    r"_(?:(?P<fid>\d+)_(?P<original>.+)|(?P<entry>text|link)\.html?)$",
    re.IGNORECASE,
)
_BOMB = "refused as a ZIP bomb; zip the submissions again without it"
_TOO_BIG = "refused; save that essay without its pictures (or paste its text) and zip the class again"
_CLASSROOM = re.compile(r"^(?P<name>[^\W\d_][\w.'\u2019-]*(?: [^\W\d_][\w.'\u2019-]*){1,4}) - (?P<title>.+)$")


@dataclass(frozen=True)
class ArchiveLimits:
    """What one archive (or folder) of submissions may hold: files, bytes once uncompressed, and bytes of one
    file (the upload's own size limit applies to the archive before it is opened); ``parts``: what each
    ``.docx`` or ``.xlsx`` in it (or a workbook uploaded on its own) may unpack to, and the ratio no file of the
    archive may pass (:mod:`madrag.data.zip_parts`)."""

    max_files: int = 2_000
    max_total_bytes: int = 500 * 1024 * 1024
    max_file_bytes: int = 100 * 1024 * 1024
    parts: PartLimits = field(default_factory=PartLimits)


@dataclass
class Submissions:
    """The rows of the submissions read (:data:`COLUMNS`) and the files refused, ``(file, why)``."""

    rows: list[dict[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    naming: str = ""


@dataclass(frozen=True)
class _Member:
    """A file of an archive or folder: its name, how to read its bytes, or why it is not read."""

    name: str
    read: Callable[[], bytes] | None = None
    why: str = ""


@dataclass
class _Who:
    """A student as a file name gives them."""

    name: str
    user_id: str = ""
    late: bool = False
    lms: str = ""


def student_of(path: str) -> _Who:
    """The student a submitted file belongs to, from its name (Canvas, Google Classroom), else from its folder,
    else the file name itself."""
    pure = PurePosixPath(path)
    if m := _CANVAS.match(pure.name):
        name = m["name"] or (f"anonymous {m['anon']}" if m["anon"] else "")
        return _Who(name=name, user_id=m["uid"] or "", late=bool(m["late"]), lms="Canvas")
    if m := _CLASSROOM.match(pure.stem):
        return _Who(name=m["name"].strip(), lms="Google Classroom")
    if len(pure.parts) > 1 and pure.parent.name:
        return _Who(name=pure.parent.name)
    return _Who(name=pure.stem)


def _names(name: str) -> tuple[str, str]:
    """(first, last) of a name of plainly two words; both empty otherwise (a guess would be shown as read)."""
    words = name.split()
    return (words[0], words[1]) if len(words) == 2 and not name.islower() else ("", "")


def _safe_name(raw: str) -> str:
    """A member name of an archive; InputError (the whole archive refused) for one that climbs out of it."""
    name = raw.replace("\\", "/")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise InputError(
            f"the ZIP holds a file named {raw!r}, which points outside the archive: refused; "
            "zip the submissions folder again"
        )
    return name


def _member_name(info: zipfile.ZipInfo) -> str:
    """A member's name as its maker meant it: a name not flagged as UTF-8 is read as UTF-8 when it is valid
    UTF-8 (macOS writes UTF-8 without the flag), else as the DOS code page ZIP's standard says."""
    if info.flag_bits & 0x800:
        return info.filename
    raw = info.filename.encode("cp437")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return info.filename


def _zip_members(archive: zipfile.ZipFile, limits: ArchiveLimits) -> list[_Member]:
    """Each file of a ZIP, checked against ``limits`` before any is read (read when its turn comes)."""
    infos = [i for i in archive.infolist() if not i.is_dir()]
    named = [(_safe_name(_member_name(i)), i) for i in infos]
    named = [(n, i) for n, i in named if not _IGNORED.search(n)]
    _check_sizes([(n, i.file_size) for n, i in named], limits)
    packed = next((n for n, i in named if too_packed(i, limits.parts.max_ratio, limits.parts.ratio_from_bytes)), None)
    if packed is not None:
        raise InputError(f"{packed}: unpacks to over {limits.parts.max_ratio} times its size in the ZIP: {_BOMB}")
    members = []
    for name, info in named:
        if info.flag_bits & 0x1:
            members.append(_Member(name, why="password-protected in the ZIP: zip it again without a password"))
        elif name.lower().endswith(".zip"):
            why = "a ZIP inside the ZIP is not opened: unzip it and zip its files with the others"
            members.append(_Member(name, why=why))
        else:
            members.append(_Member(name, read=functools.partial(_read_member, archive, info, limits)))
    return members


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ArchiveLimits) -> bytes:
    """A member's bytes, never more than its stated size (nor the limit of one file)."""
    try:
        with archive.open(info) as fh:
            data = fh.read(min(info.file_size, limits.max_file_bytes) + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise InputError(f"{info.filename}: damaged in the ZIP ({exc}): zip the submissions again") from exc
    if len(data) > limits.max_file_bytes:
        raise InputError(f"{info.filename}: over {limits.max_file_bytes:,} bytes once unzipped: {_TOO_BIG}")
    return data


def _check_sizes(sizes: list[tuple[str, int]], limits: ArchiveLimits) -> None:
    if len(sizes) > limits.max_files:
        raise InputError(
            f"{len(sizes):,} files in one archive: the limit is {limits.max_files:,}; upload the class in parts"
        )
    total = sum(size for _, size in sizes)
    if total > limits.max_total_bytes:
        raise InputError(
            f"the archive unpacks to {total:,} bytes: the limit is {limits.max_total_bytes:,}; "
            "upload the class in parts"
        )
    big = next((name for name, size in sizes if size > limits.max_file_bytes), None)
    if big is not None:
        raise InputError(f"{big}: over {limits.max_file_bytes:,} bytes once unzipped: {_TOO_BIG}")


def _folder_members(folder: Path, limits: ArchiveLimits) -> list[_Member]:
    """Each file under a folder (names relative to it), as a ZIP's."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    named = [(p.relative_to(folder).as_posix(), p) for p in files]
    named = [(n, p) for n, p in named if not _IGNORED.search(n)]
    _check_sizes([(n, p.stat().st_size) for n, p in named], limits)
    return [
        _Member(name, why="a ZIP inside the folder is not opened: unzip it into the folder")
        if name.lower().endswith(".zip")
        else _Member(name, read=path.read_bytes)
        for name, path in named
    ]


def read_submissions_zip(data: bytes, limits: ArchiveLimits | None = None) -> Submissions:
    """The submissions in a ZIP archive's bytes."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError("the file is not a ZIP archive that can be opened: zip the submissions again") from exc
    limits = limits or ArchiveLimits()
    with archive:
        return _collect(_zip_members(archive, limits), limits.parts)


def read_submissions_folder(folder: Path, limits: ArchiveLimits | None = None) -> Submissions:
    """The submissions in a folder (and its subfolders)."""
    if not folder.is_dir():
        raise InputError(f"folder not found: {folder}")
    limits = limits or ArchiveLimits()
    return _collect(_folder_members(folder, limits), limits.parts)


def _collect(members: list[_Member], parts: PartLimits) -> Submissions:
    """The rows of the readable documents, one per student, and the files refused (a document's parts checked
    against ``parts`` before it is opened)."""
    wrapper = _wrapper_folder([m.name for m in members])
    found: dict[str, tuple[_Who, list[tuple[str, str]]]] = {}
    out = Submissions()
    for member in members:
        try:
            if member.read is None:
                raise InputError(member.why)
            who, text = _read_one(member.name, member.name[len(wrapper) :], member.read(), parts)
        except InputError as exc:
            out.refused.append((member.name, str(exc).removeprefix(f"{PurePosixPath(member.name).name}: ")))
            continue
        key = who.user_id or who.name.casefold()
        found.setdefault(key, (who, []))[1].append((member.name, text))
    out.rows = [_row(who, docs) for who, docs in found.values()]
    out.naming = " and ".join(sorted({who.lms for who, _ in found.values() if who.lms}))
    if not out.rows and not out.refused:
        raise InputError(
            "no submissions in the archive: it holds no .docx, .pdf or .txt files: zip the students' documents"
        )
    return out


def _wrapper_folder(names: list[str]) -> str:
    """The folder every file is in (``Essay 1/`` of a Drive folder downloaded as a ZIP), to be left out when a
    student is read from a folder's name; empty when the files are not all in one."""
    common = posixpath.commonpath([PurePosixPath(n).parent.as_posix() for n in names]) if names else ""
    return common + "/" if common else ""


def _read_one(name: str, inner: str, data: bytes, parts: PartLimits) -> tuple[_Who, str]:
    """A submitted file's student (from its name ``inner`` within the archive's wrapper folder) and text; a
    Canvas text entry's page names the student in its heading."""
    who = student_of(inner)
    base = PurePosixPath(name).name
    if who.lms == "Canvas" and re.search(r"_link\.html?$", base, re.IGNORECASE):
        raise InputError(f"{base}: a web link, not text: ask for the essay as a file or a text entry")
    text = document_text(data, base, parts)
    if who.lms == "Canvas" and re.search(r"_text\.html?$", base, re.IGNORECASE):
        heading = html_text(decode_text(data, base)[0])[0]
        who.name = heading.rsplit(": ", 1)[1].strip() if ": " in heading else who.name
    return who, text


def _row(who: _Who, docs: list[tuple[str, str]]) -> dict[str, str]:
    docs.sort()
    first, last = _names(who.name)
    return {
        "Student": who.name,
        "First Name": first,
        "Last Name": last,
        "ID": who.user_id,
        "Late": "late" if who.late else "",
        "File": "; ".join(name for name, _ in docs),
        "Essay": "\n\n".join(text for _, text in docs),
    }

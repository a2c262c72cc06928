"""The parts of a ZIP-based file (a ``.docx``, an ``.xlsx``: each a ZIP of XML and media parts) checked one by one
before any library opens it: how many parts, how large each unpacks, how large all of them together, and how
many times its packed size each unpacks to.

python-docx reads every part of a document into memory and openpyxl parses a sheet whole, so a small file whose
parts unpack to gigabytes (a ZIP bomb: zeros pack about 1,000 to 1) would take that much memory. The limits are
read from the archive's central directory, before a byte is unpacked; what a part really unpacks to cannot pass
them either: Python's ``zipfile``, which python-docx and openpyxl read through, never yields more than a part's
stated size (past it, the part fails its CRC check and the file is refused as damaged). The ratio follows Apache
POI's ``ZipSecureFile`` (a part unpacking to more than 100 times its packed size, beyond a first megabyte, is a
bomb; real XML packs 5 to 20 to 1, pictures about 1 to 1).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from madrag.errors import InputError

MIB = 1024 * 1024


@dataclass(frozen=True)
class PartLimits:
    """What one ZIP-based document or workbook may hold: ``max_parts`` parts, each unpacking to at most
    ``max_part_bytes``, all of them to ``max_total_bytes``, and none (past its first ``ratio_from_bytes``) to
    more than ``max_ratio`` times its packed size."""

    max_parts: int = 5_000
    max_part_bytes: int = 64 * MIB
    max_total_bytes: int = 256 * MIB
    max_ratio: int = 100
    ratio_from_bytes: int = MIB


def too_packed(info: zipfile.ZipInfo, max_ratio: int, from_bytes: int = MIB) -> bool:
    """Whether a part unpacks to more than ``max_ratio`` times its packed size (a part under ``from_bytes``
    unpacked never is: a short XML part of repeated tags packs well and is harmless)."""
    return info.file_size > from_bytes and info.file_size > max_ratio * max(info.compress_size, 1)


def check_parts(archive: zipfile.ZipFile, name: str, limits: PartLimits, advice: str) -> None:
    """Every part of ``archive`` (the file ``name``) against ``limits``: a one-line :class:`InputError` ending in
    ``advice`` (what to do) for the first that breaks one."""
    infos = archive.infolist()
    if len(infos) > limits.max_parts:
        raise InputError(f"{name}: {len(infos):,} parts inside, the limit is {limits.max_parts:,}: {advice}")
    total = 0
    for info in infos:
        if info.file_size > limits.max_part_bytes:
            raise InputError(
                f"{name}: its part {info.filename[:80]!r} unpacks to {info.file_size:,} bytes, the limit is "
                f"{limits.max_part_bytes:,}: {advice}"
            )
        if too_packed(info, limits.max_ratio, limits.ratio_from_bytes):
            raise InputError(
                f"{name}: its part {info.filename[:80]!r} unpacks to {info.file_size:,} bytes from "
                f"{info.compress_size:,} (over {limits.max_ratio} to 1, a ZIP bomb's ratio): {advice}"
            )
        total += info.file_size
    if total > limits.max_total_bytes:
        raise InputError(
            f"{name}: its parts unpack to {total:,} bytes, the limit is {limits.max_total_bytes:,}: {advice}"
        )


def open_checked(data: bytes, name: str, limits: PartLimits, advice: str, not_zip: str) -> zipfile.ZipFile:
    """``data`` opened as a ZIP whose parts pass :func:`check_parts`; ``not_zip`` is the one-line error for bytes
    that are no ZIP at all."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputError(f"{name}: {not_zip}") from exc
    try:
        check_parts(archive, name, limits, advice)
    except InputError:
        archive.close()
        raise
    return archive

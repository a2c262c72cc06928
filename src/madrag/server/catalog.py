"""Rubrics the server knows: the shipped ASAP sets 7 and 8, and rubrics created through a page or the API
(kept as JSON files under ``<data_dir>/rubrics/``); and the shipped exemplar pools."""

from __future__ import annotations

import json
import re
import threading
import uuid
from pathlib import Path

from madrag.data.essay import Essay
from madrag.files.atomic import write_text_atomic
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.http.errors import ApiError

_RUBRIC_ID = re.compile(r"^[a-z0-9-]{1,40}$")


class Catalog:
    """Shipped and created rubrics by id, and the shipped pool of each rubric (loaded once)."""

    def __init__(self, data_dir: Path, asap_dir: Path | None) -> None:
        self.folder = data_dir / "rubrics"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.asap_dir = asap_dir
        self.shipped = library.shipped_rubrics(asap_dir)
        self._pools: dict[str, list[Essay] | None] = {}
        self._lock = threading.Lock()

    def add(self, rubric: Rubric) -> str:
        """Keep a new rubric; returns its id."""
        rid = "r-" + uuid.uuid4().hex[:10]
        write_text_atomic(self.folder / f"{rid}.json", library.rubric_json(rubric))
        return rid

    def get(self, rid: str) -> Rubric:
        """A rubric by id; 404 when there is none."""
        if rid in self.shipped:
            return self.shipped[rid]
        path = self.folder / f"{rid}.json"
        if not _RUBRIC_ID.match(rid) or not path.is_file():
            raise ApiError(404, f"no rubric {rid!r}", "rubric_id")
        return library.rubric_from_dict(json.loads(path.read_text(encoding="utf-8")))

    def all(self) -> dict[str, Rubric]:
        """Every rubric: shipped first, then created ones (newest last)."""
        created = sorted(self.folder.glob("r-*.json"), key=lambda p: p.stat().st_mtime)
        return {**self.shipped, **{p.stem: self.get(p.stem) for p in created}}

    def shipped_pool(self, rubric: Rubric) -> list[Essay] | None:
        """The shipped ASAP essays scored on this rubric (its essay set), or None."""
        key = library.rubric_json(rubric)
        with self._lock:
            if key not in self._pools:
                self._pools[key] = library.shipped_pool(self.asap_dir, rubric)
            return self._pools[key]

    def pool_available(self, rubric: Rubric) -> bool:
        """Whether a shipped pool fits the rubric (without loading it)."""
        return library.pool_fits(self.asap_dir, rubric)

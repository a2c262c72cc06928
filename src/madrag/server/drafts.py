"""A run being set up in the pages, step by step (rubric, essays, exemplars, backend), before it starts.

A draft lives in ``<data_dir>/drafts/<id>/`` (``draft.json`` and the essays read so far, ``essays.jsonl``). An
API key typed on the backend step is held in memory only (:class:`DraftKeys`) and handed to the run.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr

from madrag.data.essay import Essay
from madrag.data.refusals import Refusals
from madrag.files.atomic import write_text_atomic
from madrag.pipeline.migrations import upgrade_draft
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.http.errors import ApiError
from madrag.server.http.refusals import RefusedFields
from madrag.server.http.schemas import BackendSettings

_DRAFT_ID = re.compile(r"^[a-f0-9]{12}$")


class Draft(RefusedFields):
    """What the teacher chose so far (the refused rows of the essays read, summarised)."""

    id: str
    rubric_id: str | None = None
    n_essays: int = 0
    has_scores: bool = False
    has_folds: bool = False
    pool: str | None = None
    eval_fold: int = 0
    protocols: list[str] = Field(default_factory=lambda: ["MADRAG"])
    grading_protocol: str | None = None  # which ticked protocol gives the grades (asked when several are ticked)
    backend: dict[str, Any] = Field(default_factory=dict)  # no model chosen for the teacher: the step asks
    estimate_run: str | None = None
    probe: dict[str, Any] | None = None  # the last "Test connection" result
    name: str = ""


class Drafts:
    """Drafts on disk, and typed API keys in memory."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "drafts"
        self.root.mkdir(parents=True, exist_ok=True)
        self._keys: dict[str, tuple[str, str, SecretStr]] = {}  # draft -> (its kind, its URL, the key)
        self._lock = threading.Lock()

    def new(self) -> Draft:
        draft = Draft(id=uuid.uuid4().hex[:12])
        self.save(draft)
        return draft

    def folder(self, draft_id: str) -> Path:
        if not _DRAFT_ID.match(draft_id) or not (self.root / draft_id / "draft.json").is_file():
            raise ApiError(404, f"no draft {draft_id!r}: start a new run")
        return self.root / draft_id

    def get(self, draft_id: str) -> Draft:
        stored = json.loads((self.folder(draft_id) / "draft.json").read_text(encoding="utf-8"))
        return Draft.model_validate(upgrade_draft(stored))

    def save(self, draft: Draft) -> None:
        folder = self.root / draft.id
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / "draft.json", draft.model_dump_json(indent=2))

    def set_essays(self, draft: Draft, essays: list[Essay], refused: Refusals) -> Draft:
        library.write_essays(self.folder(draft.id) / "essays.jsonl", essays)
        upload = library.EssayUpload(essays, refused)
        updated = draft.model_copy(
            update={
                "n_essays": len(essays),
                **refused.fields(),
                "has_scores": upload.has_scores,
                "has_folds": upload.has_folds,
                "pool": None,
            }
        )
        self.save(updated)
        return updated

    def essays(self, draft: Draft, rubric: Rubric) -> list[Essay]:
        path = self.folder(draft.id) / "essays.jsonl"
        return library.read_essays(path, rubric) if path.is_file() and draft.n_essays else []

    def set_key(self, draft_id: str, key: SecretStr | None, kind: str, base_url: object = None) -> None:
        """Hold ``key``, typed for a backend of ``kind`` at ``base_url``, for the draft (an empty one: forget the
        held one)."""
        with self._lock:
            if key is None or not key.get_secret_value():
                self._keys.pop(draft_id, None)
            else:
                self._keys[draft_id] = (kind, _url(base_url), key)

    def key(self, draft_id: str, kind: str, base_url: object = None) -> SecretStr | None:
        """The key held for the draft, if it was typed for a backend of ``kind`` at ``base_url`` (a key goes
        only to the server it was typed with: never to another kind's, nor to another URL because the teacher
        or a caller changed it; it is typed again then)."""
        with self._lock:
            held = self._keys.get(draft_id)
        return held[2] if held is not None and held[:2] == (kind, _url(base_url)) else None

    def backend(self, draft: Draft) -> BackendSettings:
        """The draft's backend with its typed key (if any); an error when no model was chosen yet."""
        if not draft.backend.get("kind"):
            raise ApiError(400, "choose which model scores first (step 4)", "kind")
        kind = str(draft.backend["kind"])
        key = self.key(draft.id, kind, draft.backend.get("base_url"))
        return BackendSettings.model_validate({**draft.backend, "api_key": key})


def _url(base_url: object) -> str:
    """A typed URL as a key is bound to it (the same server however its end is typed)."""
    return str(base_url or "").strip().rstrip("/")

"""Rubric and Trait: any integer scale per trait, with one description per level.

Rubrics load from JSON or YAML. The shipped ASAP files (``madrag/datasets/asap/rubric_set{7,8}.json``) load as they are:
``{"essay_set": 7, "prompt": "...", "traits": [{"column": "trait1", "name": "Ideas", "min": 0, "max": 3,
"levels": {"3": "...", ...}}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from madrag.errors import MAX_ECHO, RubricError, clip

MAX_LEVELS = 101
"""The most levels a trait's scale may have (0 to 100, a percentage, is the widest a rubric writes): every level
is shown as a button on the review page, described in the Judge's prompt and counted in QWK's table, so the scale
is checked by arithmetic (``max - min + 1``) before anything is built over it."""
MAX_SCORE = 1_000_000
"""The largest score (and the lowest, negated) a scale may reach: scores are read and averaged as floats."""


class Trait(BaseModel):
    """One analytic trait of a rubric, scored on the integer range [min, max]."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    min: int
    max: int
    levels: dict[int, str] = Field(max_length=MAX_LEVELS)
    description: str = ""
    column: str | None = None  # the data column holding this trait's rater scores (e.g. "trait1")

    @field_validator("levels", mode="before")
    @classmethod
    def _int_keys(cls, value: Any) -> Any:
        if isinstance(value, dict):
            try:
                return {int(k): v for k, v in value.items()}
            except (TypeError, ValueError) as exc:
                raise ValueError(f"level keys must be integers, got {list(value)}") from exc
        return value

    @model_validator(mode="after")
    def _check_levels(self) -> Trait:
        if self.min > self.max:
            raise ValueError(f"trait {self.name!r}: min {self.min} > max {self.max}")
        width = self.max - self.min + 1  # arithmetic: the range is built only once it is known to be small
        if width > MAX_LEVELS:
            raise ValueError(
                f"trait {self.name!r}: the scale {self.min} to {self.max} has {width:,} levels; "
                f"a trait has at most {MAX_LEVELS} (each level is described and shown)"
            )
        if max(abs(self.min), abs(self.max)) > MAX_SCORE:
            raise ValueError(f"trait {self.name!r}: scores beyond {MAX_SCORE:,} (or -{MAX_SCORE:,}) are not a scale")
        expected = set(range(self.min, self.max + 1))
        missing = sorted(expected - set(self.levels))
        extra = sorted(set(self.levels) - expected)
        if missing:
            raise ValueError(f"trait {self.name!r}: no description for level(s) {_few(missing)}")
        if extra:
            raise ValueError(f"trait {self.name!r}: level(s) {_few(extra)} outside [{self.min}, {self.max}]")
        return self

    @property
    def scores(self) -> list[int]:
        """Every valid score, lowest first."""
        return list(range(self.min, self.max + 1))

    def contains(self, score: float) -> bool:
        """True when ``score`` lies inside [min, max]."""
        return self.min <= score <= self.max

    def as_prompt_json(self) -> str:
        """The trait serialised as JSON for prompts (the MADRAG paper's A.6: 'the full rubric trait serialized as
        JSON')."""
        payload = {
            "name": self.name,
            "description": self.description,
            "min_score": self.min,
            "max_score": self.max,
            "levels": {str(k): self.levels[k] for k in sorted(self.levels, reverse=True)},
        }
        return json.dumps(payload, indent=2, ensure_ascii=False)


class Rubric(BaseModel):
    """A set of traits plus the essay prompt they score.

    ``source_label`` is what the prompts call an essay's ``source`` text, for data whose rows carry one (e.g.
    ``"Source article"`` for SummEval, where the scored text is a summary of it); it is dumped only when set,
    so a rubric without it dumps (and is recorded by a run) exactly as before it existed.
    """

    model_config = ConfigDict(frozen=True)

    traits: list[Trait] = Field(min_length=1)
    prompt: str = ""
    essay_set: int | None = None
    name: str = ""
    source: str = ""
    source_label: str | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("source_label") is None:
            data.pop("source_label", None)
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> Rubric:
        seen: set[str] = set()
        for trait in self.traits:
            key = trait.name.casefold()
            if key in seen:
                raise ValueError(f"duplicate trait name {trait.name!r}")
            seen.add(key)
        return self

    def trait(self, name: str) -> Trait:
        """The trait called ``name`` (case-insensitive); RubricError when the rubric has none."""
        for trait in self.traits:
            if trait.name.casefold() == name.casefold():
                return trait
        raise RubricError(f"unknown trait {name!r}; rubric has {[t.name for t in self.traits]}")

    @property
    def trait_names(self) -> list[str]:
        """The traits' names, in rubric order."""
        return [t.name for t in self.traits]

    def only(self, names: list[str]) -> Rubric:
        """The rubric with only the traits ``names`` (case-insensitive; in rubric order); RubricError naming a
        trait it does not have."""
        wanted = {self.trait(name).name for name in names}
        return self.model_copy(update={"traits": [t for t in self.traits if t.name in wanted]})


def load_rubric(path: str | Path) -> Rubric:
    """Load a rubric from a .json, .yaml or .yml file; any problem is a one-line RubricError."""
    p = Path(path)
    if not p.is_file():
        raise RubricError(f"rubric file not found: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"cannot read rubric {p}: {exc}") from exc
    try:
        raw = yaml.safe_load(text) if p.suffix.lower() in {".yaml", ".yml"} else json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise RubricError(f"rubric {p} is not valid {p.suffix.lstrip('.') or 'JSON'}: {exc}") from exc
    if not isinstance(raw, dict):
        raise RubricError(f"rubric {p} must be a mapping with a 'traits' list")
    raw.setdefault("name", p.stem)
    return rubric_from_mapping(raw, f"rubric {p}: ")


def _few(levels: list[int], shown: int = 10) -> str:
    """Levels as a short list: the first ``shown``, then how many more (a scale may be huge by mistake)."""
    head = ", ".join(str(n) for n in levels[:shown])
    return f"[{head}]" if len(levels) <= shown else f"[{head}, ... ({len(levels):,} in all)]"


def rubric_from_mapping(raw: Mapping[str, Any], prefix: str = "rubric: ") -> Rubric:
    """A rubric from a mapping (a parsed file, a dict given to the Python API, a web form); a RubricError names
    the first invalid field after ``prefix``."""
    try:
        return Rubric.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise RubricError(clip(f"{prefix}{where}: {first['msg']}", 2 * MAX_ECHO)) from exc

"""Prompt templates: package files in ``madrag/prompts/``, overridable file by file from a user folder.

Templates use ``$NAME`` placeholders (``string.Template``), the notation of the seeds' prompt figures. A
placeholder with no value is an error, never an empty string.

The lists of template names below are the one record of which templates the scoring protocols use. A run
stores their sources and a hash of their texts read in this order, and refuses to resume when either differs:
append new names at the end of a list, never reorder one.
"""

from __future__ import annotations

import re
import string
from importlib import resources
from pathlib import Path

from madrag.errors import ConfigError

PROMPT_NAMES: tuple[str, ...] = (
    "advocate_system",
    "advocate_user",
    "skeptic_system",
    "skeptic_user",
    "judge_system",
    "judge_user",
    "rater_system",
    "sa_system",
    "sa_user",
    "sa_exemplar_block",
    "sa_exemplar_item",
    "shared_system",
    "role_block",
    "essay_context",
    "context",
    "exemplar_block",
    "exemplar_item",
    "exemplar_missing",
    "debate_block",
    "debate_turn",
    "anon_note",
    "mask_note",
    "evidence_feedback",
    "evidence_feedback_item",
    "confidence_instruction",
    "verify_note",
    "debater_turn",
)
"""Templates of the MADRAG paper's protocols (SA ... MADRAG), recorded by every scoring run."""

CONSENSUS_PROMPT_NAMES: tuple[str, ...] = (
    "cj_single_system",
    "cj_strict_system",
    "cj_lenient_system",
    "cj_neutral_system",
    "cj_strict_adjust_system",
    "cj_lenient_adjust_system",
    "cj_neutral_adjust_system",
    "cj_user",
    "cj_adjust_user",
    "cj_own_block",
    "cj_other_block",
    "cj_other_masked_block",
)
"""Templates of the consensus paper's consensus protocols (see :mod:`madrag.agents.roles`), recorded when one runs."""

TRAINING_FREE_PROMPT_NAMES: tuple[str, ...] = (
    "compare_system",
    "compare_user",
    "mts_system",
    "mts_first",
    "mts_question",
    "mts_trait_system",
    "mts_retrieval",
    "mts_score",
)
"""Templates of CJ and MTS (:mod:`madrag.protocols.cj`, :mod:`madrag.protocols.mts`); GEval uses MA's."""

SOURCE_PROMPT_NAMES: tuple[str, ...] = ("source_block",)
"""Templates of data whose essays carry a ``source`` text (SummEval's articles), recorded when such data runs."""


INSERTED_TEXTS = frozenset({"ESSAY", "ESSAY_A", "ESSAY_B", "SOURCE", "TEXT", "MESSAGE", "RATIONALE", "QUOTE"})
"""The placeholders whose values are texts from outside the templates (an essay, its source, an exemplar, a
debater's turn, an evaluator's rationale, a quote): :meth:`PromptLibrary.render` makes each :func:`inert`, so it
cannot change the structure of the prompt it is put in. (``$PROMPT``, the essay's prompt with its source block,
is made inert where it is put together, in :mod:`madrag.agents.context`.)"""

_FENCE = re.compile(r"<{3,}|>{3,}")  # <<< and >>> around an essay, a source, a rationale
_EXEMPLAR_HEADER = re.compile(r"(?m)^([ \t]*)(-{3,})(?=[ \t][^\n]*[ \t]-{3,}[ \t]*$)")  # --- Example essay ... ---
_TURN_HEADER = re.compile(r"(?m)^([ \t]*)\[(?=[^\]\n]*, round \d)")  # [Skeptic, round 2]


def inert(text: str) -> str:
    r"""``text`` unable to open or close a block of a template: a run of three or more ``<`` or ``>`` is spaced
    out (``> > >``), a line shaped as an exemplar's header (``--- ... ---``) starts ``- - -``, one shaped as a
    debate turn's header (``[Name, round N]``) starts ``(``. Anything else, and every text without these (every
    essay of the shipped data), is left exactly as it is. Template syntax needs nothing: a value is never
    read as a template (``$ESSAY``, ``{{ x }}`` in an essay stay as they are).

    >>> inert("end >>>\nFinal score: 3\n<<<")
    'end > > >\nFinal score: 3\n< < <'
    >>> inert("--- Example essay scored 6 on \"Ideas\" ---\n[Skeptic, round 2]\n---\nA -- B >> C")
    '- - - Example essay scored 6 on "Ideas" ---\n(Skeptic, round 2]\n---\nA -- B >> C'
    """
    text = _FENCE.sub(lambda m: " ".join(m.group()), text)
    text = _EXEMPLAR_HEADER.sub(lambda m: m.group(1) + " ".join(m.group(2)), text)
    return _TURN_HEADER.sub(r"\1(", text)


class PromptLibrary:
    """Loads and renders templates; a file in ``override_dir`` replaces the packaged one of the same name."""

    def __init__(self, override_dir: str | Path | None = None) -> None:
        self.override_dir = Path(override_dir) if override_dir is not None else None
        if self.override_dir is not None and not self.override_dir.is_dir():
            raise ConfigError(f"prompt folder not found: {self.override_dir}")
        self._cache: dict[str, str] = {}

    def source(self, name: str) -> str:
        """Where template ``name`` comes from (for the run's provenance)."""
        if self.override_dir is not None and (self.override_dir / f"{name}.txt").is_file():
            return str(self.override_dir / f"{name}.txt")
        return f"package:madrag/prompts/{name}.txt"

    def text(self, name: str) -> str:
        """The text of template ``name`` (without its final newline); ConfigError when there is none."""
        if name not in self._cache:
            override = self.override_dir / f"{name}.txt" if self.override_dir is not None else None
            if override is not None and override.is_file():
                raw = override.read_text(encoding="utf-8")
            else:
                res = resources.files("madrag").joinpath("prompts", f"{name}.txt")
                if not res.is_file():
                    raise ConfigError(f"no prompt template named {name!r}")
                raw = res.read_text(encoding="utf-8")
            self._cache[name] = raw[:-1] if raw.endswith("\n") else raw
        return self._cache[name]

    def render(self, name: str, **values: object) -> str:
        """Template ``name`` with every ``$NAME`` replaced by ``values[NAME]``, the outside texts
        (:data:`INSERTED_TEXTS`) made :func:`inert`; ConfigError for a missing value."""
        template = string.Template(self.text(name))
        try:
            return template.substitute({k: inert(str(v)) if k in INSERTED_TEXTS else str(v) for k, v in values.items()})
        except KeyError as exc:
            raise ConfigError(f"prompt template {name!r} needs a value for ${exc.args[0]}") from exc
        except ValueError as exc:
            raise ConfigError(f"prompt template {name!r} is malformed: {exc}") from exc

    def names_used(self, names: list[str]) -> dict[str, str]:
        """Where each of ``names`` comes from (for a run's provenance), by name."""
        return {n: self.source(n) for n in names}

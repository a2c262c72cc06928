"""madrag: training-free, rubric-based analytic essay scoring with LLM agents.

Five lines in a notebook::

    import madrag
    result = madrag.score(essays, "rubric_set7.json", provider="openai:gpt-4o-mini", pool=scored_essays)
    result.scores               # one row per essay, trait and protocol
    result.evaluate().qwk       # madrag eval's tables as DataFrames

The CLI, the web app and the Ray workers call this same API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from madrag.api.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the names as mypy and the editors see them; at run time each is imported on first use
    from madrag.agents.prompts import PromptLibrary
    from madrag.api import ScoringResult, arun_job, ascore, parse_provider, run_job, score, to_essays, to_rubric
    from madrag.data import Essay, load_asap, load_essays, load_table, split_by_fold
    from madrag.errors import ConfigError, InputError, MadragError, ProviderError, RubricError
    from madrag.evaluation.agreement import Evaluation, evaluate, wide
    from madrag.pipeline.hooks import RunHooks
    from madrag.pipeline.job import JobResult, ScoreJob, execute
    from madrag.protocols import ScoringProtocol, TraitScore, get_protocol, register_protocol
    from madrag.providers import ChatRequest, ChatResponse, FakeProvider, Provider, ProviderSpec
    from madrag.records import AgentRecord, ScoreResult
    from madrag.rubric import Rubric, Trait, load_rubric
    from madrag.settings import ScoringSettings
    from madrag.store import RunStore

__version__ = "0.1.0"

# The public API, by purpose:
# - scoring from Python (madrag.api): score, ascore, ScoringResult, parse_provider, to_essays, to_rubric;
#   run_job / arun_job run a ScoreJob built elsewhere (the CLI, the web app, workers) the same way
# - evaluating a run (madrag eval's tables): Evaluation, evaluate, wide
# - inputs: Essay, Rubric, Trait, load_asap, load_essays, load_rubric, load_table, split_by_fold
# - backends: ChatRequest, ChatResponse, FakeProvider, Provider, ProviderSpec
# - protocols, settings and prompts: PromptLibrary, ScoringProtocol, ScoringSettings, get_protocol,
#   register_protocol (the decorator that adds a protocol)
# - the scoring job underneath (what madrag score and madrag.score run) and its records: ScoreJob, execute,
#   RunHooks (what a running job tells its caller), JobResult, RunStore, AgentRecord, ScoreResult, TraitScore
# - errors (every problem with the input is a one-line MadragError): MadragError, ConfigError, InputError,
#   ProviderError, RubricError
__all__ = [
    "AgentRecord",
    "ChatRequest",
    "ChatResponse",
    "ConfigError",
    "Essay",
    "Evaluation",
    "FakeProvider",
    "InputError",
    "JobResult",
    "MadragError",
    "PromptLibrary",
    "Provider",
    "ProviderError",
    "ProviderSpec",
    "Rubric",
    "RubricError",
    "RunHooks",
    "RunStore",
    "ScoreJob",
    "ScoreResult",
    "ScoringProtocol",
    "ScoringResult",
    "ScoringSettings",
    "Trait",
    "TraitScore",
    "arun_job",
    "ascore",
    "evaluate",
    "execute",
    "get_protocol",
    "load_asap",
    "load_essays",
    "load_rubric",
    "load_table",
    "parse_provider",
    "register_protocol",
    "run_job",
    "score",
    "split_by_fold",
    "to_essays",
    "to_rubric",
    "wide",
]

# Where each public name lives. ``import madrag`` (and so every ``madrag`` command, which imports the package
# first) imports none of them: the scoring stack pulls pandas, scipy and pydantic models, seconds a command
# that only prints its help should not pay. A name's module is imported the first time the name is read
# (PEP 562), then the name is cached in this module's namespace.
_HOMES: dict[str, str] = {
    name: module
    for module, names in {
        "madrag.records": ("AgentRecord", "ScoreResult"),
        "madrag.providers": ("ChatRequest", "ChatResponse", "FakeProvider", "Provider", "ProviderSpec"),
        "madrag.errors": ("ConfigError", "InputError", "MadragError", "ProviderError", "RubricError"),
        "madrag.data": ("Essay", "load_asap", "load_essays", "load_table", "split_by_fold"),
        "madrag.evaluation.agreement": ("Evaluation", "evaluate", "wide"),
        "madrag.pipeline.job": ("JobResult", "ScoreJob", "execute"),
        "madrag.agents.prompts": ("PromptLibrary",),
        "madrag.rubric": ("Rubric", "Trait", "load_rubric"),
        "madrag.pipeline.hooks": ("RunHooks",),
        "madrag.store": ("RunStore",),
        "madrag.protocols": ("ScoringProtocol", "TraitScore", "get_protocol", "register_protocol"),
        "madrag.api": (
            "ScoringResult",
            "arun_job",
            "ascore",
            "parse_provider",
            "run_job",
            "score",
            "to_essays",
            "to_rubric",
        ),
        "madrag.settings": ("ScoringSettings",),
    }.items()
    for name in names
}

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(globals(), _HOMES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

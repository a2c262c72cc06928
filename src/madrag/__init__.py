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
    "AgentRecord": "madrag.records",
    "ChatRequest": "madrag.providers",
    "ChatResponse": "madrag.providers",
    "ConfigError": "madrag.errors",
    "Essay": "madrag.data",
    "Evaluation": "madrag.evaluation.agreement",
    "FakeProvider": "madrag.providers",
    "InputError": "madrag.errors",
    "JobResult": "madrag.pipeline.job",
    "MadragError": "madrag.errors",
    "PromptLibrary": "madrag.agents.prompts",
    "Provider": "madrag.providers",
    "ProviderError": "madrag.errors",
    "ProviderSpec": "madrag.providers",
    "Rubric": "madrag.rubric",
    "RubricError": "madrag.errors",
    "RunHooks": "madrag.pipeline.hooks",
    "RunStore": "madrag.store",
    "ScoreJob": "madrag.pipeline.job",
    "ScoreResult": "madrag.records",
    "ScoringProtocol": "madrag.protocols",
    "ScoringResult": "madrag.api",
    "ScoringSettings": "madrag.settings",
    "Trait": "madrag.rubric",
    "TraitScore": "madrag.protocols",
    "arun_job": "madrag.api",
    "ascore": "madrag.api",
    "evaluate": "madrag.evaluation.agreement",
    "execute": "madrag.pipeline.job",
    "get_protocol": "madrag.protocols",
    "load_asap": "madrag.data",
    "load_essays": "madrag.data",
    "load_rubric": "madrag.rubric",
    "load_table": "madrag.data",
    "parse_provider": "madrag.api",
    "register_protocol": "madrag.protocols",
    "run_job": "madrag.api",
    "score": "madrag.api",
    "split_by_fold": "madrag.data",
    "to_essays": "madrag.api",
    "to_rubric": "madrag.api",
    "wide": "madrag.evaluation.agreement",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(globals(), _HOMES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

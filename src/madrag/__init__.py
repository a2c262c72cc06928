"""madrag: training-free, rubric-based analytic essay scoring with LLM agents.

The public API: rubrics and essays, providers, protocols, the scoring job and the run store.
"""

from madrag.agents.prompts import PromptLibrary
from madrag.data import Essay, load_asap, load_essays, load_table, split_by_fold
from madrag.errors import ConfigError, InputError, MadragError, ProviderError, RubricError
from madrag.pipeline.job import ScoreJob, execute
from madrag.protocols import ScoringProtocol, TraitScore, get_protocol
from madrag.providers import ChatRequest, ChatResponse, FakeProvider, Provider, ProviderSpec
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait, load_rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore

__version__ = "0.1.0"

__all__ = [
    "AgentRecord",
    "ChatRequest",
    "ChatResponse",
    "ConfigError",
    "Essay",
    "FakeProvider",
    "InputError",
    "MadragError",
    "PromptLibrary",
    "Provider",
    "ProviderError",
    "ProviderSpec",
    "Rubric",
    "RubricError",
    "RunStore",
    "ScoreJob",
    "ScoreResult",
    "ScoringProtocol",
    "ScoringSettings",
    "Trait",
    "TraitScore",
    "execute",
    "get_protocol",
    "load_asap",
    "load_essays",
    "load_rubric",
    "load_table",
    "split_by_fold",
]

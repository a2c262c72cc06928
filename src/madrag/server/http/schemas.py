"""The JSON shapes of the HTTP API (requests and the run description), validated by pydantic."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from madrag.settings import ScoringSettings

PoolChoice = Literal["auto", "none", "folds", "same", "asap"]


def _registered_kind(kind: str) -> str:
    from madrag.errors import ConfigError
    from madrag.providers.backends import find_backend  # a plugin's kind too

    try:
        find_backend(kind)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None  # a 422 naming the kinds
    return kind


BackendKind = Annotated[str, AfterValidator(_registered_kind)]
RunKind = Literal["run", "estimate", "single"]
RunStatus = Literal["queued", "running", "finished", "failed", "cancelled", "interrupted"]
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any, where: str) -> tuple[str, str] | None:
    """(where, the character) of the first string in ``value`` with a lone surrogate (``"\\udcff"`` in JSON:
    not Unicode text, so it cannot be written as UTF-8), else None."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return None if found is None else (where, found.group())
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        hit = _lone_surrogate(key, where) if isinstance(key, str) else None
        hit = hit or _lone_surrogate(item, f"{where}.{key}" if where else str(key))
        if hit is not None:
            return hit
    return None


class TextRequest(BaseModel):
    """A request body whose every string must be Unicode text: a lone surrogate anywhere is a 422 naming the
    field (``data.content``), before anything tries to write it."""

    @model_validator(mode="before")
    @classmethod
    def _unicode_text(cls, data: Any) -> Any:
        hit = _lone_surrogate(data, "")
        if hit is not None:
            where, char = hit
            raise PydanticCustomError(
                "lone_surrogate",
                "{field}: contains a lone surrogate ({char}), which is not Unicode text; send the text as UTF-8",
                {"field": where or "body", "char": char.encode("unicode_escape").decode("ascii")},
            )
        return data


def settings_taken(kind: str) -> frozenset[str]:
    """The settings of :class:`BackendSettings` (besides ``kind`` and ``options``) a backend of ``kind`` uses:
    its ``model``, ``concurrency`` and ``max_tokens``; ``base_url``, ``logprobs`` and ``fake_latency_s`` where its
    options have them; ``api_key`` where it takes a key. A ConfigError for a kind not registered."""
    from madrag.providers.backends import find_backend

    backend = find_backend(kind)
    options = {"base_url", "logprobs", "fake_latency_s"} & set(backend.option_fields())
    return frozenset(
        {"model", "concurrency", "max_tokens", *options} | ({"api_key"} if backend.traits.needs_key else set())
    )


class BackendSettings(TextRequest):
    """Which LLM scores: the embedded model (default), an OpenAI-compatible server, or the fake (canned answers,
    for testing an integration). ``api_key`` is held in the server's memory only; without it the key comes
    from the server's environment, the variable of the backend's kind (``madrag serve --api-key-env``, else the
    kind's own: ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).

    ``logprobs`` (an OpenAI-compatible server): whether it returns logprobs. Unset, the server finds out with
    one short request before the run (``POST /api/backends/test`` does it on demand); ``false`` scores with
    self-reported confidence (the debaters state their confidence), as ``madrag score --no-logprobs``."""

    model_config = ConfigDict(extra="forbid")

    kind: BackendKind = "llamacpp"
    model: str | None = Field(default=None, max_length=200)
    base_url: str | None = Field(default=None, max_length=500)
    api_key: SecretStr | None = Field(default=None, max_length=500)
    concurrency: int | None = Field(default=None, ge=1, le=256)
    # the token limit of every agent message (both of settings' token limits); unset, settings' own (the library's)
    max_tokens: int | None = Field(default=None, ge=16, le=4096)
    fake_latency_s: float = Field(default=0.0, ge=0.0, le=10.0)
    logprobs: bool | None = None
    options: dict[str, str | int | float | bool] = Field(default_factory=dict, max_length=20)

    @model_validator(mode="after")
    def _web_options(self) -> BackendSettings:
        """``options``: only those of the kind's options its backend offers the web app, each valid; and no
        setting the kind would not use (never sent to its backend: refused, not dropped)."""
        from madrag.providers.backends import find_backend, web_options

        offered = web_options(self.kind)
        if refused := sorted(set(self.options) - set(offered)):
            raise ValueError(f"the {self.kind} backend offers no option {', '.join(refused)} here")
        find_backend(self.kind).options.model_validate(self.options)
        given = {name for name in ("base_url", "logprobs", "api_key") if getattr(self, name) is not None}
        given |= {"fake_latency_s"} if self.fake_latency_s else set()
        if unused := sorted(given - settings_taken(self.kind)):
            raise ValueError(f"the {self.kind} backend takes no {', '.join(unused)}")
        return self

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


class EssayIn(BaseModel):
    """One essay: ``id``, ``text``, optional ``fold``, ``prompt`` and trait scores (``<trait>`` or
    ``rater1_<trait>``, ``rater2_<trait>`` ...), as a CSV row or JSONL line of the CLI."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1)


class DataUpload(BaseModel):
    """A data file's content: CSV, JSONL or the ASAP TSV layout."""

    filename: str = Field(default="essays.csv", max_length=200)
    content: str
    format: Literal["auto", "csv", "jsonl", "asap"] = "auto"


class PriceIn(BaseModel):
    """Dollars per million tokens, for the dry-run estimate's spend."""

    prompt: float = Field(ge=0)
    completion: float = Field(ge=0)


class SettingsIn(ScoringSettings):
    """A run's scoring settings as a request gives them: :class:`~madrag.settings.ScoringSettings` (each field as
    ``madrag score``'s option of that name), an unknown field refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class RunCreate(TextRequest):
    """Start a run: a rubric (by id or inline), essays (a list or a data file), protocols, the exemplar pool and
    the backend. ``pool``: ``auto`` picks ``folds`` when the essays have folds and scores, else the shipped ASAP
    pool for ASAP rubrics, else ``none``. ``dry_run`` scores ``sample`` essays and estimates the whole run.
    ``settings``: the scoring settings; what it leaves out is the library's default, as ``madrag score``'s."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    rubric_id: str | None = Field(default=None, max_length=64)
    rubric: dict[str, Any] | None = None
    essays: list[EssayIn] | None = None
    data: DataUpload | None = None
    protocols: list[str] = Field(default_factory=lambda: ["MADRAG"], min_length=1, max_length=12)
    grading_protocol: str | None = Field(
        default=None,
        max_length=100,
        description="which of ``protocols`` gives the grades (the others are shown for comparison); required "
        "when there are several, else the one protocol",
    )
    pool: PoolChoice = "auto"
    eval_fold: int = 0
    limit: int | None = Field(default=None, ge=1)
    backend: BackendSettings = Field(default_factory=BackendSettings)
    dry_run: bool = False
    sample: int = Field(default=2, ge=1, le=20)
    price: PriceIn | None = None
    settings: SettingsIn | None = None


class OverrideIn(TextRequest):
    """A teacher's review of one trait score: ``override`` with a new ``score``, or ``accept``."""

    model_config = ConfigDict(extra="forbid")

    essay_id: str = Field(min_length=1, max_length=200)
    trait: str = Field(min_length=1, max_length=200)
    protocol: str | None = Field(default=None, max_length=100)
    action: Literal["override", "accept"] = "override"
    score: int | None = None
    comment: str = Field(default="", max_length=5000)
    reviewer: str = Field(default="api", min_length=1, max_length=200)


class ResumeIn(TextRequest):
    """Resume an interrupted or cancelled run; ``api_key`` when the run's key was typed in before a restart."""

    model_config = ConfigDict(extra="forbid")

    api_key: SecretStr | None = Field(default=None, max_length=500)


class RubricCreate(TextRequest):
    """A rubric: ``traits`` (name, min, max, levels), the essay ``prompt``, an optional ``name``."""

    model_config = ConfigDict(extra="allow")

    traits: list[dict[str, Any]] = Field(min_length=1)
    prompt: str = ""
    name: str = Field(default="", max_length=200)


class SingleScoreIn(TextRequest):
    """Score one essay now and wait for the result, at most ``time_limit_s`` seconds."""

    model_config = ConfigDict(extra="forbid")

    rubric_id: str | None = Field(default=None, max_length=64)
    rubric: dict[str, Any] | None = None
    essay: EssayIn
    protocol: str = Field(default="MAD", max_length=100)
    pool: Literal["none", "asap"] = "none"
    backend: BackendSettings = Field(default_factory=BackendSettings)
    time_limit_s: float = Field(default=120.0, gt=0)

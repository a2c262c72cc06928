"""The registry of backend kinds: each one file that registers an options model, traits and a factory (as llm's
``Model.Options`` and inspect_ai's ``@modelapi``).

A backend is::

    class EchoOptions(BackendOptions):
        prefix: str = option("echo: ", "echo: what each answer starts with.")

    register_backend("echo", EchoOptions, build_echo, BackendTraits(label="echoes the prompt", valid_grades=False))

Everything else is generated from that: the CLI's backend options (one per options field, :func:`option` says
its flag and help), the fields a :class:`~madrag.providers.spec.ProviderSpec` of that kind holds (``kind`` +
``model`` + ``options``), the Python API's and ``--role-provider``'s ``KIND[:MODEL][@URL]`` text, the web app's
choice of backend, and what the rest of madrag asks of a backend: its :class:`BackendTraits` (remote, needs a
key, needs a model name, gives valid grades), never its name.

Plugins. Backends of other packages are registered by importing their modules before a kind is looked up: every
module named by an entry point of the group ``madrag.backends`` and every module in ``$MADRAG_PLUGINS``, for the
CLI, the web app, the Python API and Ray workers alike, by madrag's one plugin loader (:mod:`madrag.plugins`, as
protocols: :mod:`madrag.protocols.registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

from madrag.errors import ConfigError
from madrag.plugins import PLUGINS_ENV as PLUGINS_ENV  # the plugins' variable, named here as before
from madrag.plugins import PluginLoader
from madrag.providers.base import Provider

ENTRY_POINT_GROUP = "madrag.backends"
"""Entry point group of modules that register backends."""
BUILTIN = ("madrag.providers.builtin", "madrag.providers.anthropic")
"""The modules of madrag's own backends, in the order they are listed (imported on the first look-up)."""


class BackendOptions(BaseModel):
    """The settings one backend kind reads (subclass it; each field made with :func:`option`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def tiny_default(self) -> bool:
        """Whether these options run the tiny model shipped to try madrag out (its scores are not valid)."""
        return False

    def own_capacity(self) -> bool:
        """Whether the backend's capacity is its own (the model contexts it runs in-process), not a server's
        (a shared server's limit is the web app's ``backend_concurrency``)."""
        return False

    def endpoints(self) -> int:
        """How many servers the calls are balanced over (each with the spec's concurrency)."""
        return 1


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    operational: bool = False,
    repeat_into: str | None = None,
    cli: bool | Literal["hidden"] = True,
    **constraints: Any,
) -> Any:
    """A field of an options model: its default and help, and for the CLI its ``flag`` (default ``--name``)
    and ``repeat_into``: the option may be given again, the first value is this field and the rest go to that
    field (``--base-url``). ``operational``: it changes how calls are made, not what the backend answers (not
    part of a run's identity; a resumed run may change it). ``cli``: ``False``, no option; ``"hidden"``, an
    option left out of ``--help``. ``path=True``: a file, given on the CLI as a path (written as the path reads,
    ``./m.gguf`` as ``m.gguf``); ``web=True``: the web app's form offers it (never an option that names a file
    or a variable of the server's). Other keywords are pydantic's (``ge``, ``default_factory``...)."""
    extra: JsonDict = {"flag": flag, "hidden": cli == "hidden", "operational": operational}
    extra["repeat_into"], extra["cli"] = repeat_into, cli is not False
    extra["path"], extra["web"] = bool(constraints.pop("path", False)), bool(constraints.pop("web", False))
    if "default_factory" in constraints:  # a list, say: option(..., default_factory=list)
        return Field(description=help, json_schema_extra=extra, **constraints)
    return Field(default=default, description=help, json_schema_extra=extra, **constraints)


def option_meta(field: FieldInfo) -> dict[str, Any]:
    """What :func:`option` recorded about a field (defaults for a plain pydantic field)."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    defaults = {"flag": None, "hidden": False, "operational": False, "repeat_into": None, "cli": True}
    return {**defaults, "path": False, "web": False, **extra}


@dataclass(frozen=True)
class BackendTraits:
    """What the rest of madrag asks of a backend instead of its name.

    ``label``: what it is, in a few words (``--provider``'s help, the web app's choice); ``offer``: how the web
    app offers it, if not so (a backend that does not give valid grades: to try the pipeline); ``named``: who
    scored a run, on its pages (a model server is named by its model and address). ``remote``: a server reached
    over the network (its concurrency is shared by Ray workers). ``connection_test``: the web app's test request
    (an OpenAI-compatible one) applies to it, and finds out about its logprobs. ``needs_key``: it takes an API
    key. ``needs_model``: it needs ``model`` (the name the server serves). ``valid_grades``: its scores can be
    used as grades; if not, ``not_grades`` says why (``is for trying the app out``) and the web app offers it
    only to try the pipeline. ``default_url``: the address a remote one sends to when no ``base_url`` is given
    (OpenAI's, Anthropic's): the one address the web server sends its environment's key to unless its operator
    names more (``madrag serve --api-key-url``)."""

    label: str
    offer: str = ""
    named: str = ""
    remote: bool = False
    connection_test: bool = False
    needs_key: bool = False
    needs_model: bool = False
    valid_grades: bool = True
    not_grades: str = ""
    default_url: str = ""


Opts = TypeVar("Opts", bound=BackendOptions)


@dataclass(frozen=True)
class CallLimits:
    """The settings of every backend a factory may use: ``concurrency`` (None: the backend's own) and the
    per-request ``timeout_s``."""

    concurrency: int | None
    timeout_s: float


Factory = Callable[[str | None, Opts, CallLimits, SecretStr | None], Provider]
"""``(model, options, limits, api_key) -> provider``; ``api_key`` is a key given in memory (only for a backend
that ``needs_key``); raises :class:`ConfigError` for settings its backend cannot serve."""
RoleFields = Callable[[str, str, str], dict[str, object]]
"""``(role, model, url) -> spec fields`` for ``--role-provider ROLE=KIND[:MODEL][@URL]`` (model and url "" when
not given); raises :class:`ConfigError` for text its backend cannot use."""


@dataclass(frozen=True)
class Backend(Generic[Opts]):
    """A registered backend kind."""

    kind: str
    options: type[Opts]
    build: Factory[Opts]
    traits: BackendTraits
    role_fields: RoleFields

    def option_fields(self) -> dict[str, FieldInfo]:
        """The fields of its options model."""
        return dict(self.options.model_fields)


_BACKENDS: dict[str, Backend[Any]] = {}
_LOADER = PluginLoader(ENTRY_POINT_GROUP, "backend plugin", BUILTIN)


def _model_role_fields(role: str, model: str, url: str) -> dict[str, object]:
    """The default reading of ``KIND[:MODEL]``: the model name, if given (a URL is refused)."""
    if url:
        raise ConfigError(f"--role-provider {role}: this backend takes no @URL")
    return {"model": model} if model else {}


def register_backend(
    kind: str,
    options: type[Opts],
    build: Factory[Opts],
    traits: BackendTraits,
    role_fields: RoleFields | None = None,
) -> None:
    """Make ``kind`` a backend a spec can name (registering a kind again replaces it). ``role_fields`` reads its
    ``--role-provider`` text (default: ``KIND[:MODEL]``)."""
    _BACKENDS[kind] = Backend(kind, options, build, traits, role_fields or _model_role_fields)


def unregister_backend(kind: str) -> None:
    """Forget ``kind`` (a test's own backend, registered for its tests only); nothing if it is not registered."""
    _BACKENDS.pop(kind, None)


def load_backends(strict: bool = False) -> None:
    """Import madrag's backends and the plugin modules not imported yet; ``strict``: a plugin that cannot be
    imported is a ConfigError (else it is tried again next time)."""
    _LOADER.load(strict)


def find_backend(kind: str) -> Backend[Any]:
    """The backend registered as ``kind`` (plugins loaded first if needed); a ConfigError naming the kinds."""
    if kind not in _BACKENDS:
        load_backends(strict=True)
    found = _BACKENDS.get(kind)
    if found is None:
        raise ConfigError(f"unknown provider {kind!r}; choose {backend_choices()}")
    return found


def backends() -> tuple[Backend[Any], ...]:
    """Every registered backend, in registration order (madrag's, then the plugins')."""
    load_backends()
    return tuple(_BACKENDS.values())


def backend_kinds() -> tuple[str, ...]:
    """The registered backend kinds, in registration order."""
    return tuple(b.kind for b in backends())


def backend_choices() -> str:
    """The registered kinds as prose: ``llamacpp, openai, fake or anthropic``."""
    kinds = backend_kinds()
    return kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"


def traits_of(kind: object) -> BackendTraits | None:
    """The traits of the kind a record names (None for an unknown one, or none)."""
    if not isinstance(kind, str):
        return None
    try:
        return find_backend(kind).traits
    except ConfigError:
        return None


def own_options(kind: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that are fields of ``kind``'s options (the rest belong to other kinds)."""
    fields = find_backend(kind).options.model_fields
    return {k: v for k, v in values.items() if k in fields}


def web_options(kind: str) -> dict[str, FieldInfo]:
    """The options of ``kind`` the web app's form offers (made with ``option(..., web=True)``)."""
    return {n: f for n, f in find_backend(kind).option_fields().items() if option_meta(f)["web"]}

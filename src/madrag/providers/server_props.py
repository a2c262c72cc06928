"""What an OpenAI-compatible server says about itself, read at a run's start-up check.

llama.cpp's server answers ``GET /props`` (at its root, beside ``/v1``) with its parallel slots
(``total_slots``) and each slot's context (``default_generation_settings.n_ctx``), and ``POST /tokenize`` with
the tokens of a text. madrag reads both when they are there:

* the default concurrency never exceeds the server's slots (a request beyond them waits in the server's queue,
  and its timeout counts the wait): :func:`fit_concurrency`, applied to a backend by :func:`fit_to_server`, the
  one reading every command that calls a model makes (``madrag score`` and what runs through its job, the
  meta-evaluator);
* the model and build the server says it runs (``model_alias`` or ``model_path``, ``build_info``), for the run's
  log;
* a run whose largest prompt cannot fit one slot's context is refused before its first call, with the numbers
  (:mod:`madrag.pipeline.context_fit`; the prompt counted by ``/tokenize``, else estimated at one token per three
  characters, more than English text takes).

vLLM has no ``/props``, but its model list says the model's context (``max_model_len`` in ``GET /v1/models``):
that context is read the same way (no slots: vLLM batches its requests). A server that says neither (OpenAI)
answers 404 or nothing useful: :func:`read_props` gives None and nothing changes. Nothing here raises for a server
that cannot be asked; the run's own checks say that.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from madrag.providers.identity import model_entries
from madrag.providers.openai_http import ClientFailure, HttpClient, StatusFailure

if TYPE_CHECKING:
    from madrag.providers.policy import ManagedProvider


CHARS_PER_TOKEN = 3
"""Characters per token of the estimate without ``/tokenize``: English text takes about four, so three counts
more tokens than the server will (a prompt is refused only when it surely cannot fit)."""


@dataclass(frozen=True)
class ServerProps:
    """A server's slots and per-slot context (None: not said)."""

    slots: int | None
    n_ctx: int | None
    said_in: str = "props"  # where: llama.cpp's /props, or "models" (vLLM's max_model_len in /v1/models)
    model: str | None = None  # the model it says it runs (llama.cpp: its alias, else its model file's name)
    build: str | None = None  # its build (llama.cpp's build_info, e.g. "b5000-1a2b3c4d")

    def as_dict(self) -> dict[str, Any]:
        """For the run store's preflight record."""
        said: dict[str, Any] = {"total_slots": self.slots, "n_ctx": self.n_ctx}
        if self.said_in == "models":
            said = {"max_model_len": self.n_ctx}
        return said | {k: v for k, v in (("model", self.model), ("build", self.build)) if v is not None}

    def context_words(self) -> str:
        """The server's context, and how to make it larger, in the words of the server that said it."""
        if self.said_in == "models":
            return (
                f"the model's context of {self.n_ctx} tokens (vLLM's max_model_len): start the server with a "
                "larger --max-model-len"
            )
        return (
            f"the server's context of {self.n_ctx} tokens per slot (llama.cpp's n_ctx divided among its slots): "
            "start the server with a larger --ctx-size or fewer --parallel slots"
        )


@runtime_checkable
class SaysItsProps(Protocol):
    """A provider that can ask its server about itself (the OpenAI-compatible one)."""

    async def server_props(self) -> ServerProps | None: ...

    async def count_tokens(self, text: str) -> int | None: ...


def root_path(base_url: str | None, name: str) -> str | None:
    """The path of the server root's ``name`` relative to ``base_url`` (``http://h:8080/v1`` ->
    ``/../props``); None for OpenAI's own API (no base URL), which has no such endpoint."""
    if not base_url:
        return None
    segments = [s for s in urlsplit(base_url).path.split("/") if s]
    return "/.." * len(segments) + f"/{name}"


def _json(body: bytes) -> Any:
    """The JSON of ``body``; None when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_props(body: bytes) -> ServerProps | None:
    """The slots and context of a ``/props`` answer; None when it is not llama.cpp's (neither is there)."""
    data = _json(body)
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    props = ServerProps(_positive(data.get("total_slots")), n_ctx)
    if props.slots is None and props.n_ctx is None:
        return None
    return replace(props, model=_served_model(data), build=_text(data.get("build_info")))


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _served_model(props: dict[str, Any]) -> str | None:
    """The model a ``/props`` answer names: its alias (``--alias``), else its model file's name."""
    if (alias := _text(props.get("model_alias"))) is not None:
        return alias
    path = _text(props.get("model_path"))
    return None if path is None else path.replace("\\", "/").rsplit("/", 1)[-1]


def listed_models(body: bytes) -> list[dict[str, Any]]:
    """The model entries (objects with a string ``id``) of a ``/v1/models`` answer; none when it is not one."""
    return model_entries(_json(body))


def parse_model_context(body: bytes, model: str | None) -> ServerProps | None:
    """The context of ``model`` in a ``/v1/models`` answer that says it (vLLM's ``max_model_len``); None when
    the answer does not."""
    for entry in listed_models(body):
        if model is None or entry["id"] == model:
            n_ctx = _positive(entry.get("max_model_len"))
            served = _text(entry.get("root")) or entry["id"]  # vLLM's root: the weights behind the served name
            return None if n_ctx is None else ServerProps(None, n_ctx, said_in="models", model=served)
    return None


STRICT_OWNERS = frozenset({"vllm", "openai", "system"})
"""The ``owned_by`` of the model lists of servers that answer 404 for a model they do not list (vLLM, OpenAI's
API). Others are not judged by their list: llama.cpp's server answers under any model name, and some hosted
APIs take deployment names their list does not show."""


def other_models(body: bytes, model: str) -> list[str] | None:
    """The models a ``/v1/models`` answer lists when ``model`` is not among them and the server is one that
    refuses unlisted models (:data:`STRICT_OWNERS`); None when it is listed, when the answer lists none, or when
    the list cannot tell."""
    listed = listed_models(body)
    if not listed or not all(e.get("owned_by") in STRICT_OWNERS for e in listed):
        return None
    ids = [str(e["id"]) for e in listed]
    return None if model in ids else ids


async def read_props(
    client: HttpClient, base_url: str | None, model: str | None = None, models: bytes | None = None
) -> ServerProps | None:
    """``GET /props`` through the provider's own client (its key, its transport), else the context of ``model``
    in ``GET /models`` (vLLM; ``models``: its answer already read, not asked again); None when the server says
    neither or cannot be asked."""
    path = root_path(base_url, "props")
    if path is None:
        return None
    try:
        found = parse_props(await client.get(path))
    except (ClientFailure, StatusFailure):
        found = None
    if found is not None:
        return found
    try:
        return parse_model_context(models if models is not None else await client.get("/models"), model)
    except (ClientFailure, StatusFailure):
        return None


async def tokenize(client: HttpClient, base_url: str | None, text: str) -> int | None:
    """The number of tokens ``POST /tokenize`` gives ``text``; None without that endpoint."""
    path = root_path(base_url, "tokenize")
    if path is None:
        return None
    try:
        data = _json(await client.post(path, {"content": text}))
    except (ClientFailure, StatusFailure):
        return None
    tokens = data.get("tokens") if isinstance(data, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` without a tokenizer: one per :data:`CHARS_PER_TOKEN` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class ConcurrencyFit:
    """How many requests a backend sends at once, and why: ``given`` (``--concurrency``, None: not given),
    ``default`` (the backend's own), the server's ``slots`` (None: not said) and the ``resolved`` number."""

    given: int | None
    default: int
    slots: int | None
    resolved: int

    @property
    def queued(self) -> int:
        """Requests a given concurrency keeps waiting in the server's queue (beyond its slots)."""
        return 0 if self.slots is None else max(0, self.resolved - self.slots)

    def as_dict(self) -> dict[str, Any]:
        """For the run store's preflight record and the run's log."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConcurrencyFit:
        """The fit :meth:`as_dict` wrote."""
        return cls(data.get("given"), int(data["default"]), data.get("slots"), int(data["resolved"]))

    def words(self) -> str:
        """The resolved concurrency and where it comes from, e.g. "concurrency 1 (the server's 1 slot; the
        default 8 would wait in its queue)"."""
        slots = "" if self.slots is None else f"the server's {_slots(self.slots)}"
        if self.given is not None:
            why = f"--concurrency {self.given}" + (f"; {slots}" if slots else "")
        elif self.slots is not None and self.resolved < self.default:
            why = f"{slots}; the default {self.default} would wait in its queue"
        else:
            why = "the backend's default" + (f"; {slots}" if slots else "")
        return f"concurrency {self.resolved} ({why})"

    def warning(self, where: str) -> str | None:
        """The warning of a given concurrency above the server's slots (None when it is not)."""
        if self.given is None or not self.queued or self.slots is None:
            return None
        return (
            f"{where} has {_slots(self.slots)}; --concurrency {self.given} keeps {self.queued} requests waiting in "
            "its queue, where their timeout runs"
        )


def _slots(n: int) -> str:
    return f"{n} slot" + ("" if n == 1 else "s")


def fit_concurrency(given: int | None, current: int, props: ServerProps | None) -> ConcurrencyFit:
    """The concurrency a backend should use now that its server said its slots (or nothing): the slots when no
    concurrency was given and the default (``current``) is higher, else ``current``. A concurrency given above
    the slots is kept (:meth:`ConcurrencyFit.warning`: its extra requests wait in the server's queue)."""
    slots = None if props is None else props.slots
    resolved = slots if given is None and slots is not None and current > slots else current
    return ConcurrencyFit(given, current, slots, resolved)


@dataclass(frozen=True)
class ServerCheck:
    """What a backend's server said of itself (``props``, None: nothing) and the concurrency fitted to it."""

    props: ServerProps | None
    fit: ConcurrencyFit


async def fit_to_server(managed: ManagedProvider) -> ServerCheck:
    """Ask the backend's server of its slots and context (within the backend's timeout; a backend that cannot
    say, or does not answer in time, says nothing) and limit the backend to its slots
    (:func:`fit_concurrency`). Every command that calls a model reads its server this way; the caller logs
    what was found (:func:`madrag.pipeline.run_log.log_backends`), in the run's log once it is open."""
    props: ServerProps | None = None
    if isinstance(managed.provider, SaysItsProps):
        try:
            async with asyncio.timeout(managed.policy.timeout_s):
                props = await managed.provider.server_props()
        except TimeoutError:
            props = None
    fit = fit_concurrency(managed.given_concurrency, managed.max_concurrency, props)
    if fit.resolved != managed.max_concurrency:
        managed.limit_concurrency(fit.resolved)
    return ServerCheck(props, fit)

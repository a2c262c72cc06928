"""The backend step's form, generated from the backend registry (:mod:`madrag.providers.backends`): which fields
each kind takes, from its traits and its options model, and the fields read back from a post.

A model server (a ``remote`` kind) takes: Model when it ``needs_model``; API key when it ``needs_key``; Server URL
when its options have ``base_url`` (the placeholder from that option's default, else the address its help names);
Confidence when its options have ``logprobs`` and the connection test applies to it (the test, or the run's first
step, finds out: "find out before the run"); Parallel requests; and its options made with ``web=True``
(``option-{kind}-{name}``). "Test connection" is for the kinds the test applies to (``connection_test``); for the
others the page says plainly that they are not tested before the run. A kind offered to try the pipeline takes its
web options (and the fake's delay). Every kind takes the token limit.

The page has one input per field, shared by the kinds that take it, so that the form works without JavaScript
(the names the API's clients and the tests post: ``base_url``, ``model``, ``api_key``, ``concurrency``,
``logprobs``); each field lists its kinds (``data-kinds``; with JavaScript, only the chosen kind's are shown and
sent) and says in words which server kinds it is not for.

A posted value for a field the chosen kind does not take is **dropped**, not refused: without JavaScript the form
sends every field on the page, those filled in for a kind the teacher chose before too, and none of them may reach
the chosen kind's spec (a key typed for one kind is never sent to another's server).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from madrag.errors import MadragError
from madrag.providers.backends import find_backend, web_options
from madrag.providers.spec import ProviderSpec
from madrag.server.http.errors import ApiError
from madrag.server.http.schemas import settings_taken
from madrag.teacher import presets

SERVER_FIELDS = ("base_url", "model", "api_key", "concurrency", "logprobs")
"""The model server's fields, by the name the form posts."""
_URL = re.compile(r"https?://[^\s),;]+")


def form_fields(kind: str) -> frozenset[str]:
    """The form's fields (besides its web options) that a backend of ``kind`` takes; a ConfigError for a kind not
    registered."""
    traits, taken = find_backend(kind).traits, settings_taken(kind)  # what the kind uses, as the JSON API checks it
    names = {"max_tokens", *({"fake_latency_s"} & taken)}
    if traits.remote:  # a model server's fields; the model's name only where it needs one, the test's choice
        names |= {"concurrency", "api_key", "base_url"} & taken
        names |= {"model"} if traits.needs_model else set()
        names |= {"logprobs"} & taken if traits.connection_test else set()
    return frozenset(names)


def web_fields(kind: str) -> dict[str, str]:
    """The options the kind's backend offers the web form, with their help (none for an unknown kind)."""
    try:
        return {n: f.description or n for n, f in web_options(kind).items()}
    except MadragError:
        return {}


def url_placeholder(kind: str) -> str:
    """What the Server URL shows when empty for ``kind``: its ``base_url`` option's default, else the address
    the option's help names (the server used when none is given), else nothing."""
    field = find_backend(kind).option_fields().get("base_url")
    if field is None:
        return ""
    if isinstance(field.default, str) and field.default:
        return field.default
    found = _URL.search(field.description or "")
    return found.group(0).rstrip(".") if found else ""


@dataclass(frozen=True)
class ServerField:
    """One part of the model server's fields: the server kinds it is for and, in words, those it is not for."""

    kinds: tuple[str, ...]
    not_for: str

    @property
    def shown(self) -> bool:
        return bool(self.kinds)


def _words(names: list[str]) -> str:
    return " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"


def server_fields() -> dict[str, ServerField]:
    """Each server field (and ``presets``, ``test``: the connection test, ``untested``: the note that a kind is
    not tested before the run) with the server kinds it is for."""
    kinds = presets.server_kinds()
    takes = {k: form_fields(k) for k in kinds}
    tested = {k for k in kinds if find_backend(k).traits.connection_test}
    which: dict[str, set[str]] = {name: {k for k in kinds if name in takes[k]} for name in SERVER_FIELDS}
    which |= {"presets": {presets.PRESET_KIND} & set(kinds), "test": tested, "untested": set(kinds) - tested}
    return {
        name: ServerField(tuple(k for k in kinds if k in on), _words([w for k, w in kinds.items() if k not in on]))
        for name, on in which.items()
    }


def view() -> dict[str, Any]:
    """What the backend page's template needs to show each kind's fields."""
    servers, trying = presets.server_kinds(), presets.try_only()
    return {
        "server_kinds": servers,
        "server_fields": server_fields(),
        "url_placeholders": {k: url_placeholder(k) for k in servers if "base_url" in form_fields(k)},
        "try_kinds": trying,
        "tiny_kinds": {k for k in trying if ProviderSpec(kind=k).options.tiny_default()},
        "try_fields": {k: set(ProviderSpec(kind=k).options.model_dump()) for k in trying},
        "kind_options": {k: web_fields(k) for k in [*servers, *trying]},
    }


def read_backend(form: Any, kind: str) -> dict[str, Any]:
    """The backend settings posted for ``kind``: the fields it takes, as :class:`BackendSettings` reads them (the
    others dropped: see the module's text); an :class:`ApiError` naming a field that is not a number."""
    takes = form_fields(kind)
    raw: dict[str, Any] = {"kind": kind}
    for name in ("model", "base_url"):
        if name in takes and (value := str(form.get(name) or "").strip()):
            raw[name] = value
    if kind != presets.PRESET_KIND and raw.get("base_url") in presets.preset_urls():
        del raw["base_url"]  # a preset's address (an OpenAI-compatible server's) left in the shared field
    for name, cast in (("concurrency", int), ("max_tokens", int), ("fake_latency_s", float)):
        if name in takes and (value := str(form.get(name) or "").strip()):
            try:
                raw[name] = cast(value)
            except ValueError:
                raise ApiError(400, "must be a number", name) from None
    options = {n: v for n in web_fields(kind) if (v := str(form.get(f"option-{kind}-{n}") or "").strip())}
    if options:
        raw["options"] = options  # checked by the kind's options model (BackendSettings)
    logprobs = {"yes": True, "no": False}.get(str(form.get("logprobs") or "auto"))
    if "logprobs" in takes and logprobs is not None:
        raw["logprobs"] = logprobs
    return raw


def typed_key(form: Any, kind: str) -> SecretStr | None:
    """The API key typed for ``kind`` (None when none was typed, or the kind takes none)."""
    key = str(form.get("api_key") or "")
    return SecretStr(key) if key and "api_key" in form_fields(kind) else None


def untested_words(kind: str) -> str:
    """The plain note for a model server the connection test does not apply to."""
    words = presets.server_kinds().get(kind, kind)
    return f"{words}: not tested before the run; the run's first call shows whether the model and the key work."

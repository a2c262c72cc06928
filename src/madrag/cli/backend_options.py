"""The backend's options, generated from the registered backends' options models (as the scoring settings'
options are from :class:`~madrag.settings.ScoringSettings`: :mod:`madrag.cli.groups`).

``--provider`` names the kind; ``--model``, ``--concurrency``, ``--timeout`` and ``--retries`` are every
backend's (the common fields of :class:`~madrag.providers.spec.ProviderSpec`); then one option per field of each
backend's options model (its flag, help and default from :func:`~madrag.providers.backends.option`, its choices
from a ``Literal``, ``--x/--no-x`` for a bool, a repeatable option for a field with ``repeat_into``). A command
builds the spec of the kind given from the options that kind reads; a new backend (a plugin's too) is new
options of every command that takes a backend, without another edit.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic.fields import FieldInfo
from rich.markup import escape

from madrag.cli.groups import KEYWORD, OptionGroup, _in_panel, literal_values
from madrag.cli.options import RoleProviderOpt, choice
from madrag.providers.backends import backend_kinds, backends, option_meta
from madrag.providers.spec import ProviderSpec, parse_role_provider

COMMON_LAST = ("concurrency", "timeout_s", "retries")


@dataclass(frozen=True)
class BackendOption:
    """One generated option: the parameter typer sees, the field it sets and how."""

    param: inspect.Parameter
    field: str
    flag: str
    choices: tuple[str, ...] | None
    repeat_into: str | None
    path: bool
    default_is_own: bool


def _option(
    name: str, field: FieldInfo, panel: str | None, help_text: str | None = None, own_default: bool = False
) -> BackendOption:
    """The option of one field (``own_default``: None, which leaves each backend its own default)."""
    meta = option_meta(field)
    flag = meta["flag"] or "--" + name.replace("_", "-")
    choices = literal_values(field.annotation)
    decls = [f"{flag}/--no-{flag[2:]}"] if field.annotation is bool else []
    repeat = meta["repeat_into"]
    info = typer.Option(
        *decls,
        help=escape(help_text or field.description or ""),
        hidden=meta["hidden"],
        rich_help_panel=panel,
        metavar="URL" if repeat else None,
    )
    kind: Any = str if choices is not None else (list[str] | None if repeat else field.annotation)
    kind = Path | None if meta["path"] else kind
    default = None if repeat or own_default else field.get_default(call_default_factory=True)
    if own_default:
        info.help = f"{info.help} (default: the backend's own)"
        kind = kind | None
    param = inspect.Parameter(flag[2:].replace("-", "_"), KEYWORD, default=default, annotation=Annotated[kind, info])
    return BackendOption(param, name, flag, choices, repeat, meta["path"], own_default)


def _provider_help() -> str:
    kinds = [f"{b.kind} ({b.traits.label})" for b in backends()]
    return f"{', '.join(kinds[:-1])} or {kinds[-1]}." if len(kinds) > 1 else f"{kinds[0]}."


def backend_fields(panel: str | None) -> Iterator[BackendOption]:
    """The options of every registered backend, the common ones first and last (one option per field name: a
    field two backends share, with other defaults, is one option whose default is each backend's own)."""
    common = ProviderSpec.model_fields
    yield _option("kind", common["kind"], panel, _provider_help())
    yield _option("model", common["model"], panel)
    shared: dict[str, list[FieldInfo]] = {}
    for backend in backends():
        for name, field in backend.option_fields().items():
            if option_meta(field)["cli"]:
                shared.setdefault(name, []).append(field)
    for name, fields in shared.items():
        if len({str(f.annotation) for f in fields}) > 1:
            raise TypeError(f"backend option {name}: two backends give it different types")
        defaults = {repr(f.get_default(call_default_factory=True)) for f in fields}
        repeatable = [f for f in fields if option_meta(f)["repeat_into"]]  # repeatable for the backend that is
        yield _option(name, (repeatable or fields)[0], panel, own_default=len(defaults) > 1)
    for name in COMMON_LAST:
        yield _option(name, common[name], panel)


def given_fields(options: list[BackendOption], values: dict[str, Any]) -> dict[str, Any]:
    """The spec's fields, flat, from the options' values (each ``Literal`` value checked first)."""
    fields: dict[str, Any] = {}
    for o in options:
        value = values[o.param.name]
        if value is None and o.default_is_own:
            continue  # each backend's own default
        if o.choices is not None:
            value = choice(o.flag, value, o.choices)
        if o.path and value is not None:
            value = str(value)  # as the path reads (the CLI's form since the first release)
        if o.repeat_into is not None:
            given = list(value or [])
            fields[o.field], fields[o.repeat_into] = (given[0] if given else None), given[1:]
        else:
            fields[o.field] = value
    return fields


def backend_group(name: str, panel: str | None = None, roles: bool = False) -> OptionGroup[Any]:
    """The group of the backend options; its value the spec (``roles``: with ``--role-provider``, the dict
    ``{"provider": spec, "role_providers": {role: spec}}``). ``--provider`` is checked against the kinds."""
    options = list(backend_fields(panel))
    params = [o.param for o in options]
    if roles:
        role = inspect.Parameter("role_provider", KEYWORD, default=None, annotation=RoleProviderOpt)
        params.append(_in_panel(role, panel))

    def build(values: dict[str, Any]) -> Any:
        fields = given_fields(options, values)
        fields["kind"] = choice("--provider", fields["kind"], backend_kinds())
        spec = ProviderSpec.model_validate(fields)
        if not roles:
            return spec
        routed = dict(parse_role_provider(t, spec, fields) for t in values.get("role_provider") or [])
        return {"provider": spec, "role_providers": routed}

    return OptionGroup(name, tuple(params), build)


def spec_from_options(**given: Any) -> ProviderSpec:
    """The spec the backend options give, as a command builds it (by parameter name: ``provider``,
    ``base_url=[...]``, ``timeout``...; the options not given: their defaults)."""
    group = backend_group("backend")
    values = {p.name: p.default for p in group.params}
    unknown = set(given) - set(values)
    if unknown:
        raise TypeError(f"no backend option {', '.join(sorted(unknown))}")
    spec: ProviderSpec = group.build({**values, **given})
    return spec

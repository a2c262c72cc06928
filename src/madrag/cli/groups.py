"""Option groups: sets of CLI options that build one value, shared by the commands that take them (as inspect_ai's
``@common_options``), and the group generated from a settings model.

A group is a plain function whose parameters are typer options and whose body builds the value
(:func:`group`), or is generated from a pydantic model's fields (:func:`model_group`: the option's name from the
field's, its help from the field's description, its choices from a ``Literal``, its default from the model).
:func:`with_groups` gives a command the options of its groups in place of one parameter per group (named like
the group), and calls the command with each group's value. A new field of the settings model is therefore a new
option of every command that takes the settings group, and in the settings it builds, without another edit.

:class:`ImpliedValueCommand` is the command class of options that may be given without their value
(``--ray`` alone means ``--ray local``).
"""

from __future__ import annotations

import copy
import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rich.markup import escape
from typer.core import TyperCommand
from typer.models import OptionInfo

from madrag.cli.options import choice

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
KEYWORD = inspect.Parameter.KEYWORD_ONLY


@dataclass(frozen=True)
class OptionGroup(Generic[T]):
    """Options (``params``: typer-annotated parameters with their defaults) that ``build`` turns into the value a
    command receives as its parameter ``name``."""

    name: str
    params: tuple[inspect.Parameter, ...]
    build: Callable[[dict[str, Any]], T]


def _in_panel(param: inspect.Parameter, panel: str | None) -> inspect.Parameter:
    """``param`` as a keyword-only option shown under the help panel ``panel`` (unless it names its own)."""
    annotation = param.annotation
    if panel is not None and typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        infos = []
        for extra in extras:
            if isinstance(extra, OptionInfo) and extra.rich_help_panel is None:
                extra = copy.copy(extra)
                extra.rich_help_panel = panel
            infos.append(extra)
        annotation = Annotated[tuple([base, *infos])]
    return param.replace(kind=KEYWORD, annotation=annotation)


def group(name: str, build: Callable[..., T], panel: str | None = None) -> OptionGroup[T]:
    """The group whose options are ``build``'s parameters (``Annotated`` typer options with defaults) and whose
    value is ``build`` called with them."""
    params = inspect.signature(build, eval_str=True).parameters.values()
    return OptionGroup(name, tuple(_in_panel(p, panel) for p in params), lambda values: build(**values))


def literal_values(annotation: Any) -> tuple[str, ...] | None:
    """The values of a ``Literal`` of strings, else None."""
    if typing.get_origin(annotation) is Literal:
        values = typing.get_args(annotation)
        if all(isinstance(v, str) for v in values):
            return tuple(values)
    return None


def flag(name: str) -> str:
    """The option of field ``name``: ``--`` and the name with dashes."""
    return "--" + name.replace("_", "-")


def _field_option(name: str, field: FieldInfo, panel: str | None) -> inspect.Parameter:
    """The option of one model field: a string checked against a ``Literal``'s values, ``--x/--no-x`` for a
    bool, else the field's type; help from its description, default from the model."""
    choices = literal_values(field.annotation)
    decls = [f"{flag(name)}/--no-{flag(name)[2:]}"] if field.annotation is bool else []
    info = typer.Option(*decls, help=escape(field.description or ""), rich_help_panel=panel)
    kind: Any = str if choices is not None else field.annotation
    default = field.get_default(call_default_factory=True)
    return inspect.Parameter(name, KEYWORD, default=default, annotation=Annotated[kind, info])


def model_group(name: str, model: type[M], panel: str | None = None) -> OptionGroup[M]:
    """The group of one option per field of ``model`` (:func:`_field_option`); its value is the model built from
    them, each ``Literal`` value checked first (an InputError naming the option and its values). An invalid value
    is the model's ValidationError (the CLI's entry point turns it into one line)."""
    fields = model.model_fields
    params = tuple(_field_option(n, f, panel) for n, f in fields.items())

    def build(values: dict[str, Any]) -> M:
        checked = {}
        for key, value in values.items():
            choices = literal_values(fields[key].annotation)
            checked[key] = choice(flag(key), value, choices) if choices is not None else value
        return model(**checked)

    return OptionGroup(name, params, build)


def with_groups(*groups: OptionGroup[Any]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decorator: the command's parameter named like a group becomes that group's options (in its place), and
    the command is called with the group's value. Every parameter becomes keyword-only (typer passes options by
    name)."""
    by_name = {g.name: g for g in groups}

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        sig = inspect.signature(fn, eval_str=True)
        missing = set(by_name) - set(sig.parameters)
        if missing:
            raise TypeError(f"{fn.__name__} has no parameter for the option group(s) {', '.join(sorted(missing))}")
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            params += by_name[p.name].params if p.name in by_name else [p.replace(kind=KEYWORD)]
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise TypeError(f"{fn.__name__}: two options share a name")

        @functools.wraps(fn)
        def command(**values: Any) -> T:
            for g in groups:
                values[g.name] = g.build({p.name: values.pop(p.name) for p in g.params})
            return fn(**values)

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return command

    return decorate


def implied_values(args: Sequence[str], implied: Mapping[str, str]) -> list[str]:
    """``args`` with ``implied[option]`` after each such option given without a value (last, or followed by
    another option), so ``--ray`` alone reads as ``--ray local`` while ``--ray HOST:PORT`` keeps its value."""
    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg in implied and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(implied[arg])
    return out


class ImpliedValueCommand(TyperCommand):
    """A command whose options in :attr:`implied` may be given without a value (the value is then implied)."""

    implied: ClassVar[Mapping[str, str]] = {}

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: typer's click Context
        return super().parse_args(ctx, implied_values(args, self.implied))

"""Commands imported when they are first needed: :class:`LazyGroup` is a typer group whose commands are named
in a table of :class:`LazyCommand` (module, function or typer app, command class) instead of being built when
the program starts.

Running a command, or asking for its own ``--help``, imports its module and builds it as typer would have.
The group's own ``--help`` imports none of them: each command is listed with the help typer would show, read
from its module's source without running it (the function's docstring, or the ``help=`` of the command
group's ``typer.Typer(...)``), so that listing the commands costs milliseconds, not the seconds of importing
pandas, scipy and the scoring stack. tests/e2e/cli/test_cli_startup.py checks the two listings are the same.

A command is listed under its help panel (``panel``: who it is for); a ``renamed`` one is an old name kept
working but hidden from the listing, and running it says its new form on stderr.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """A command of ``madrag.cli.<module>``: ``attribute`` is its function or, for a command group, its typer
    app; ``command_class`` (``module:Class``) parses its options when typer's own class is not enough;
    ``panel``: the help panel ``--help`` lists it under; ``renamed``: its new form (``score --protocols X``),
    for an old name kept as a hidden alias."""

    module: str
    attribute: str
    command_class: str | None = None
    panel: str | None = None
    renamed: str | None = None

    @property
    def hidden(self) -> bool:
        return self.renamed is not None

    @property
    def module_name(self) -> str:
        return f"madrag.cli.{self.module}"

    def load(self, name: str) -> TyperCommand | TyperGroup:
        """The command (or group) typer builds for this command, as when it is registered on an app."""
        target = getattr(importlib.import_module(self.module_name), self.attribute)
        parent = typer.Typer(add_completion=False)
        if isinstance(target, typer.Typer):
            parent.add_typer(target, name=name)
            built = typer.main.get_command(parent)
            if isinstance(built, TyperGroup):
                built = built.commands[name]
        else:
            parent.command(name, cls=_command_class(self.command_class))(target)
            built = typer.main.get_command(parent)  # one command and no callback: typer builds it alone
        if not isinstance(built, TyperCommand | TyperGroup):
            raise TypeError(f"madrag {name}: typer built a {type(built).__name__}, not a command")
        built.hidden, built.rich_help_panel = self.hidden, self.panel
        return built

    def help(self) -> str | None:
        """The help typer shows for this command, read from its module's source without importing it."""
        spec = importlib.util.find_spec(self.module_name)
        if spec is None or spec.origin is None:
            return None
        with open(spec.origin, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == self.attribute:
                return ast.get_docstring(node)
            if isinstance(node, ast.Assign) and any(_named(t, self.attribute) for t in node.targets):
                return _help_keyword(node.value)
        return None


def _named(target: ast.expr, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name


def _help_keyword(call: ast.expr) -> str | None:
    """The ``help=`` of ``typer.Typer(help=...)``, or the ``doc=`` a command made by a function call gets as
    its docstring (cleaned as :func:`inspect.getdoc` cleans a docstring)."""
    if isinstance(call, ast.Call):
        for keyword in call.keywords:
            if keyword.arg in ("help", "doc") and isinstance(keyword.value, ast.Constant):
                text = str(keyword.value.value)
                return inspect.cleandoc(text) if keyword.arg == "doc" else text
    return None


def _command_class(path: str | None) -> Any:
    if path is None:
        return None
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def lazy_app(group: type[LazyGroup], **options: Any) -> typer.Typer:
    """The typer app of ``group``'s commands (with a callback that does nothing: typer makes a group only of an
    app with a callback)."""
    app = typer.Typer(cls=group, no_args_is_help=True, add_completion=False, **options)
    app.callback()(lambda: None)
    return app


class LazyGroup(TyperGroup):
    """A typer group whose commands are :attr:`lazy_commands` (set by a subclass), built when first needed."""

    lazy_commands: ClassVar[dict[str, LazyCommand]] = {}
    _listing: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loaded: dict[str, TyperCommand | TyperGroup] = {}

    # ctx: typer's click Context, formatter: its HelpFormatter
    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.lazy_commands)

    def get_command(self, ctx: Any, cmd_name: str) -> TyperCommand | TyperGroup | None:
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is None:
            return None
        if self._listing:  # only the name and help are shown: no import
            return TyperCommand(cmd_name, help=lazy.help(), hidden=lazy.hidden, rich_help_panel=lazy.panel)
        if cmd_name not in self.loaded:
            self.loaded[cmd_name] = lazy.load(cmd_name)
        return self.loaded[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        lazy = self.lazy_commands.get(name or "")
        if lazy is not None and lazy.renamed is not None:
            print(f"note: 'madrag {name}' is now 'madrag {lazy.renamed}' (the old name still works)", file=sys.stderr)
        return name, command, rest

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

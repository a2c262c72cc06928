"""The code's contracts (docs/architecture.md, "Contracts"): the import layers and no import cycles, checked with
import-linter over the contract file ``.importlinter``; the size of functions (over the AST) and of modules; backends
named in providers/ only; one plugin loader (madrag.plugins); and one HTTP client to model servers
(madrag.providers.http_client).

import-linter is a dev dependency (``pip install -e '.[dev]'``, which ``scripts/setup.sh`` runs).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import madrag

ROOT = Path(__file__).resolve().parents[3]
CONTRACTS = ROOT / ".importlinter"
PACKAGE = Path(madrag.__file__).resolve().parent

MAX_LINES = 60
"""The most lines a function may span (its ``def`` to its last line, decorators excluded)."""
MAX_PARAMS = 8
"""The most parameters a function may take (``self`` / ``cls`` excluded; a CLI command's options excluded)."""
MAX_MODULE_LINES = 450
"""The most lines a module of the package may hold (split a longer one by concept, into modules named for what
they hold)."""

EXCEPTIONS: dict[str, str] = {
    # module:qualname -> why it may break the rule; an entry that no longer breaks it fails the test
    "madrag.api.scoring:ascore": "its 20 parameters are the public API's keyword options (madrag.score), as a CLI "
    "command's are its options",
    "madrag.audit.api:aaudit": "its 11 parameters are the public API's keyword options (madrag.audit.audit), as "
    "ascore's are",
    "madrag.providers.openai_compat:OpenAICompatProvider.__init__": "9: a backend's constructor, its server's "
    "address, key (a variable's name, or the web app's key held in memory), limits, logprobs, HTTP client "
    "(the tests give reference clients) and request shape; each is a public keyword of the provider",
}


def _lint_imports() -> tuple[int, str]:
    """``lint-imports`` over the contract file, in a process of its own: import-linter configures logging with
    ``dictConfig``, which would disable the loggers of the modules this test process has imported. Its exit
    status and report."""
    try:
        import importlinter  # noqa: F401
    except ImportError:  # pragma: no cover - a checkout without the dev dependencies
        pytest.fail("import-linter is not installed: pip install -e '.[dev]' (scripts/setup.sh does)")
    script = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(CONTRACTS)], capture_output=True, text=True, cwd=CONTRACTS.parent
    )
    return done.returncode, done.stdout + done.stderr


def test_import_contracts_hold() -> None:
    """The layers (each package imports only the layers below it), no import cycles at any depth, no pandas in
    the scoring core: every contract of ``.importlinter`` is kept (its report names each broken import)."""
    status, report = _lint_imports()
    assert status == 0, report
    assert "0 broken" in report, report


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, set())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_cycle_finder_finds_a_loop() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_round_a_loop() -> None:
    """0 import cycles between any two modules (imports under ``if TYPE_CHECKING:`` and inside functions count)."""
    pytest.importorskip("grimp", reason="grimp comes with import-linter")
    import grimp

    graph = grimp.build_graph("madrag", cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(edges) > 100  # the whole package was read
    assert _cycles(edges) == []


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def _is_option(arg: ast.arg) -> bool:
    """A CLI option declaration: ``Annotated[..., typer.Option(...)]`` or one of ``cli/options.py``'s aliases
    (``RunDirOpt``, ``RunArg`` ...)."""
    note = arg.annotation
    if isinstance(note, ast.Subscript) and isinstance(note.value, ast.Name) and note.value.id == "Annotated":
        return True
    return isinstance(note, ast.Name) and note.id.endswith(("Opt", "Arg"))


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef, cli: bool) -> int:
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
    return sum(1 for a in every if a.arg not in {"self", "cls"} and not (cli and _is_option(a)))


def _measure() -> dict[str, tuple[int, int]]:
    """module:qualname -> (lines, parameters) of every function of the package breaking a rule."""
    out: dict[str, tuple[int, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("madrag", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        cli = module.startswith("madrag.cli.")
        for name, node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            params = _params(node, cli)
            if lines > MAX_LINES or params > MAX_PARAMS:
                out[f"{module}:{name}"] = (lines, params)
    return out


def test_functions_are_small() -> None:
    """No function over MAX_LINES lines or with more than MAX_PARAMS parameters, but the listed exceptions; and
    every exception still needs its place (a fixed one is taken off the list)."""
    found = _measure()
    unlisted = {name: size for name, size in found.items() if name not in EXCEPTIONS}
    assert unlisted == {}, f"(lines, parameters) over {MAX_LINES} / {MAX_PARAMS}: {unlisted}"
    assert sorted(set(EXCEPTIONS) - set(found)) == [], "these keep the rule now: take them off EXCEPTIONS"


def test_modules_are_small() -> None:
    """No module of the package over MAX_MODULE_LINES lines."""
    sizes = {
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 100  # the whole package was read
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}, f"over {MAX_MODULE_LINES} lines"


MAX_TOP_MODULES = 8
"""The most modules at the package's top besides ``__init__`` (``__main__`` counted): the core's few concepts
(docs/architecture.md); a helper lives in the package that uses it, a concept of several modules is a package."""


def test_the_package_top_shows_the_architecture() -> None:
    """At most MAX_TOP_MODULES modules beside the packages at the top of ``src/madrag``."""
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert "errors" in top  # the package's own top was read
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} top-level modules: {top}"


def test_the_size_rule_sees_a_long_function_and_many_parameters(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = f"def long():\n{body}\n\n\ndef wide(self, a, b, c, d, e, f, g, h, i):\n    pass\n"
    sizes = {name: node for name, node in _functions(ast.parse(source))}
    long, wide = sizes["long"], sizes["wide"]
    assert (long.end_lineno or 0) - long.lineno + 1 == MAX_LINES + 1
    assert _params(wide, cli=False) == MAX_PARAMS + 1
    command = ast.parse("def cmd(run: RunArg, k: Annotated[int, typer.Option()] = 1, plain: int = 0): pass")
    assert _params(next(_functions(command))[1], cli=True) == 1


# -- backends are named in providers/ only (issue: "the backend as one contract") -----------------------------

BACKEND_HOME = PACKAGE / "providers"
TEMPLATE_BRANCH = r"""(==|!=|\bin)\s*\(?\s*['"]({names})['"]|['"]({names})['"]\s*(==|!=|\bin\b)"""


def _builtin_kinds() -> tuple[str, ...]:
    from madrag.providers.backends import backends

    return tuple(b.kind for b in backends() if b.build.__module__.startswith("madrag.providers."))


def _names_in(node: ast.expr, kinds: tuple[str, ...]) -> list[str]:
    """The backend names a comparison operand spells: a string constant, or a tuple / list / set of them."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in kinds]


def backend_branches(source: str, kinds: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, name) of each comparison (``==``, ``!=``, ``in``, ``not in``, a ``match`` case) of a value with
    a backend's name in Python source: a branch on which backend it is."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found += [(node.lineno, n) for n in _names_in(operand, kinds)]
        elif isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchValue):
            found += [(node.pattern.lineno, n) for n in _names_in(node.pattern.value, kinds)]
    return found


def template_branches(text: str, kinds: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, text) of each comparison with a backend's name in a Jinja template."""
    import re

    pattern = re.compile(TEMPLATE_BRANCH.format(names="|".join(map(re.escape, kinds))))
    return [(i, m.group(0)) for i, line in enumerate(text.splitlines(), 1) for m in pattern.finditer(line)]


def test_no_code_outside_providers_branches_on_a_backend_name() -> None:
    kinds = _builtin_kinds()
    assert set(kinds) == {"llamacpp", "openai", "fake", "anthropic"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if BACKEND_HOME not in path.parents:
            found += [
                f"{path.relative_to(PACKAGE)}:{n}: {name}" for n, name in backend_branches(path.read_text(), kinds)
            ]
    for path in sorted(PACKAGE.rglob("*.html")):
        found += [f"{path.relative_to(PACKAGE)}:{n}: {t}" for n, t in template_branches(path.read_text(), kinds)]
    assert found == [], "branch on a backend's traits (madrag.providers.backends.BackendTraits), not its name"


def test_the_branch_check_sees_each_form_of_a_backend_branch() -> None:
    kinds = ("llamacpp", "openai", "fake")
    code = (
        "if spec.kind == 'openai': pass\n"
        "if 'fake' != kind: pass\n"
        "if kind in ('llamacpp', 'fake'): pass\n"
        "x = d.get('kind') not in {'openai'}\n"
        "match kind:\n    case 'llamacpp':\n        pass\n"
        "y = {'kind': 'openai'}\n"  # naming one as data is not a branch
    )
    assert backend_branches(code, kinds) == [(1, "openai"), (2, "fake"), (3, "llamacpp"), (3, "fake"),
                                             (4, "openai"), (6, "llamacpp")]  # fmt: skip
    page = "{% if run.backend.kind == \"openai\" %}x{% endif %}\n{{ 'checked' if kind == 'fake' }}\n{{ kind }}"
    assert [n for n, _ in template_branches(page, kinds)] == [1, 2]


# -- one plugin loader (issue 41: "one of each") ---------------------------------------------------------------

PLUGIN_LOADER = PACKAGE / "plugins.py"
"""The one module that reads entry points and ``$MADRAG_PLUGINS`` (madrag.plugins: backends and protocols)."""


def _is_plugins_env(node: ast.expr) -> bool:
    """``"MADRAG_PLUGINS"`` itself, or a name for it (``PLUGINS_ENV``, ``plugins.PLUGINS_ENV``)."""
    if isinstance(node, ast.Constant):
        return node.value == "MADRAG_PLUGINS"
    return (node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)) == "PLUGINS_ENV"


def plugin_loading(source: str) -> list[tuple[int, str]]:
    """(line, what) of each place Python source loads plugins itself: imports or calls ``entry_points`` (of
    ``importlib.metadata``), spells the variable ``MADRAG_PLUGINS``, or reads the environment at ``PLUGINS_ENV``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any(a.name == "entry_points" for a in node.names):
            found.append((node.lineno, f"from {node.module} import entry_points"))
        elif isinstance(node, ast.Attribute) and node.attr == "entry_points":
            found.append((node.lineno, ".entry_points"))
        elif isinstance(node, ast.Constant) and node.value == "MADRAG_PLUGINS":
            found.append((node.lineno, "'MADRAG_PLUGINS'"))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in {"get", "getenv", "pop"}:
            found += [(node.lineno, "reads $MADRAG_PLUGINS") for a in node.args[:1] if _is_plugins_env(a)]
        elif isinstance(node, ast.Subscript) and _is_plugins_env(node.slice):
            found.append((node.lineno, "reads $MADRAG_PLUGINS"))
    return found


def test_one_plugin_loader() -> None:
    """Only madrag.plugins discovers plugins (entry points, ``$MADRAG_PLUGINS``); a registry asks it."""
    assert plugin_loading(PLUGIN_LOADER.read_text()) != []  # the check sees the loader itself
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != PLUGIN_LOADER:
            found += [f"{path.relative_to(PACKAGE)}:{n}: {w}" for n, w in plugin_loading(path.read_text())]
    assert found == [], "load plugins with madrag.plugins.PluginLoader, not a second loader"


def test_the_plugin_check_sees_each_way_of_loading_plugins() -> None:
    code = (
        "from importlib.metadata import EntryPoint, entry_points\n"
        "import importlib.metadata\nx = importlib.metadata.entry_points(group='g')\n"
        "y = os.environ.get('MADRAG_PLUGINS', '')\n"
        "z = os.environ[PLUGINS_ENV]\n"
        "w = os.getenv(plugins.PLUGINS_ENV)\n"
        '"""A docstring may name $MADRAG_PLUGINS."""\n'
        "v = os.environ.get('OTHER')\n"
    )
    assert sorted(n for n, _ in plugin_loading(code)) == [1, 3, 4, 4, 5, 6]


# -- one HTTP client (issue 41: "one of each") -----------------------------------------------------------------

HTTP_CLIENT = PACKAGE / "providers" / "http_client.py"
"""The one module that sends requests to model servers (on aiohttp)."""
OTHER_CLIENTS = frozenset({"httpx", "httpx2", "openai", "anthropic", "requests", "urllib3"})
"""HTTP client libraries madrag does not send with (httpx and openai are the tests' references only)."""


def http_clients(source: str) -> list[tuple[int, str]]:
    """(line, what) of each import of another HTTP client library, and each use of aiohttp's client side."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if a.name.split(".")[0] in OTHER_CLIENTS]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in OTHER_CLIENTS:
            found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Attribute) and node.attr in ("ClientSession", "TCPConnector", "request"):
            if isinstance(node.value, ast.Name) and node.value.id == "aiohttp":
                found.append((node.lineno, f"aiohttp.{node.attr}"))
    return found


def test_one_http_client_to_model_servers() -> None:
    """Every request to a model server goes through madrag.providers.http_client; no module imports httpx, the
    openai package or another client (the stub server answers with aiohttp's server side, which is allowed)."""
    assert http_clients(HTTP_CLIENT.read_text()) != []  # the check sees the client itself
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != HTTP_CLIENT:
            found += [f"{path.relative_to(PACKAGE)}:{n}: {w}" for n, w in http_clients(path.read_text())]
    assert found == [], "send with madrag.providers.http_client.AiohttpClient, not a second client"


def test_the_client_check_sees_each_way_of_bringing_a_second_client() -> None:
    code = (
        "import httpx\nfrom openai import AsyncOpenAI\nimport aiohttp\ns = aiohttp.ClientSession()\n"
        "import requests.adapters\nfrom aiohttp import web\n"
    )
    assert sorted(n for n, _ in http_clients(code)) == [1, 2, 4, 5]

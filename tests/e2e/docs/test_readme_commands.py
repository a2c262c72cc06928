"""Every shell command of the README and of the docs site's pages, run through the real CLI, so that none can rot.

The pages are those of ``mkdocs.yml``'s nav, in its order, then README.md (whose few commands repeat the pages'
and are run once); :data:`NOT_RUN` names the pages whose commands run elsewhere or not, and why. Every line of
every fenced ```bash block (``\\`` continuations joined, ``#`` comments set aside, ``&&`` chains
split) is either a ``madrag`` command, which is run, or one of the setup and development lines in :data:`SETUP`,
which are not. Any other line fails the test, so a new documented command is run or explicitly excused.

The commands run in that order in one temporary folder (later ones read the runs earlier ones made), each
through the CLI's own command tree in this process (:func:`in_process`: typer's test runner, working directory
the folder; a fresh interpreter per command cost some 2 seconds of imports each, a minute or two in all), and
each must exit 0. Every ``runs/...`` path a command's comment names must exist after it ran. The only
changes, so that each runs offline in seconds, are the rewrite table :data:`REWRITES` (applied by
:func:`rewrite`) and the files the docs leave to the user, written into the folder (:func:`user_files`).
The console entry point itself (``python -m madrag``, its one-line errors and exit codes) has its own tests
(tests/e2e/cli/test_cli_startup.py, tests/e2e/cli/test_bad_inputs.py). ``madrag demo`` (the embedded model and
MiniLM) and ``madrag serve`` (a server that runs until stopped) run as their own processes in their own tests below.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.main
import yaml
from tests.servers import free_port, stop_process
from typer.testing import CliRunner

from madrag.cli.app import app

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
MKDOCS = REPO / "mkdocs.yml"
CLI = [sys.executable, "-m", "madrag.cli"]

SETUP = {
    "bash scripts/setup.sh": "installs the environment these tests run in",
    "bash .ci/run": "runs this test suite",
    ".venv/bin/pytest": "the test suite itself",
    ".venv/bin/mypy": "the type checks of the suite's CI",
    ".venv/bin/ruff": "the lint and format checks of the suite's CI",
}
"""Lines (by how they start) that are not madrag commands, and why they are not run."""

NOT_RUN = {
    "docs/reproduce.md": "every command of it runs in its own tests (tests/e2e/docs/test_reproduce_commands.py)",
    "docs/scaling.md": "a Ray cluster and several GPU servers, with `...` for the options given above them",
    "docs/lms.md": "a Canvas instance and its token: the same commands (connect, pull, push --dry-run, push) run "
    "against a local Canvas double in tests/e2e/lms/test_canvas_round_trip.py",
    "docs/dependencies.md": "the installs' measurement: a fresh venv and a timed pip install per extra (each install "
    "is run by its own test in tests/integration/project)",
}
"""Pages of the site whose ```bash blocks this test does not run, and why (none came from the README)."""

REWRITES = {
    '"$(madrag data asap FILE)"': "the path that `madrag data asap FILE` prints (run through the CLI as well)",
    "--provider openai": "--provider fake (canned answers, no network)",
    "no --provider (score, paper confidence meta-eval)": "--provider fake added",
    "score, paper baseline --data": "--embedder hashing added (no MiniLM model loaded)",
    "score: --limit N, or none": "--limit 3",
    "paper baseline": "--trees 10 added (the forest's 200 trees take most of its time)",
    "paper baseline --data": "--features light added (the paper's features parse every essay of the set, some "
    "30 s a set on 2 cores; they run on a run's split in docs/scoring.md's `paper baseline runs/abl`, and have "
    "their own tests: tests/unit/paper/baselines/test_parsed_features.py)",
    "eval, report, compare, paper eval-consensus": "--bootstrap 20 added (1,000 resamples by default)",
    "every command that takes --cache-dir": "--cache-dir cache added (the folder's own cache: in this process "
    "the option's default was read from $MADRAG_CACHE when the CLI was imported, not per command)",
}
"""The rewrite table, as documentation: what is changed in a documented command before it runs, and into what."""

BACKEND_COMMANDS = {"score", "paper confidence meta-eval"}
BANK_COMMANDS = {"score"}
BOOTSTRAP_COMMANDS = {"eval", "report", "compare", "paper eval-consensus"}
LIMIT = "3"
GROUPS = {"runs", "paper", "confidence", "data"}  # command groups: the command is the group and its subcommand
OWN_TESTS = {
    "demo": "the embedded SmolLM2 model and MiniLM, minutes on 2 cores: test_readme_demo_runs (integration) runs "
    "it with --n 1 --max-tokens 16 --traits Ideas",
    "serve": "a server that runs until stopped: test_readme_serve_answers starts it, fetches a page, stops it",
}


@dataclass(frozen=True)
class Command:
    """One documented command: its words after ``madrag``, its comment, and the page and line it stands on."""

    args: tuple[str, ...]
    comment: str
    line: int
    doc: str = "README.md"

    @property
    def name(self) -> str:
        """``score``, ``runs export``, ``paper confidence meta-eval`` ..."""
        path = [self.args[0]]
        while path[-1] in GROUPS and len(path) < len(self.args):
            path.append(self.args[len(path)])
        return " ".join(path)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: madrag {shlex.join(self.args)}"


def split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a shell line: the comment starts at the first ``#`` that begins a word outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def bash_lines(doc: Path = README) -> Iterator[tuple[int, str, str]]:
    """(line number, code, comment) of every line of every ```bash block of ``doc``, continuations joined."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    in_block, pending, start = False, "", 0
    for number, text in enumerate(lines, start=1):
        if text.startswith("```"):
            in_block = text.strip() == "```bash"
            continue
        if not in_block:
            continue
        code, comment = split_comment(text)
        if code.endswith("\\"):
            pending, start = f"{pending} {code[:-1]}", start or number
            continue
        if code or pending:
            yield start or number, f"{pending} {code}".strip(), comment
        pending, start = "", 0


def readme_commands(doc: Path = README) -> tuple[list[Command], list[str]]:
    """(the madrag commands of ``doc`` to run, the setup lines left out); an AssertionError names any other line."""
    commands, setup = [], []
    name = doc.relative_to(REPO).as_posix()
    for number, code, comment in bash_lines(doc):
        words = shlex.split(code)
        while words:
            part = words[: words.index("&&")] if "&&" in words else words
            words = words[len(part) + 1 :]
            if part[0] in ("madrag", ".venv/bin/madrag"):
                commands.append(Command(tuple(part[1:]), comment, number, name))
            elif any(shlex.join(part).startswith(prefix) for prefix in SETUP):
                setup.append(shlex.join(part))
            else:
                raise AssertionError(f"{name}:{number}: {shlex.join(part)!r} is neither a madrag command nor in SETUP")
    return commands, setup


def nav_pages(nav: list[Any]) -> list[str]:
    """Every page of a mkdocs nav, in order (sections flattened)."""
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def documented_pages() -> list[Path]:
    """The pages whose commands run, in the order they run: the site's nav (less :data:`NOT_RUN`), then the README."""
    config = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))
    docs = REPO / config.get("docs_dir", "docs")
    pages = [docs / page for page in nav_pages(config["nav"])]
    return [p for p in pages if p.relative_to(REPO).as_posix() not in NOT_RUN] + [README]


def documented_commands() -> tuple[list[Command], list[str]]:
    """(the madrag commands of every page of :func:`documented_pages`, in order; the setup lines left out)."""
    commands, setup = [], []
    for page in documented_pages():
        found, skipped = readme_commands(page)
        commands += found
        setup += skipped
    return commands, setup


def the_command(name: str) -> Command:
    """The one documented ``madrag NAME`` (written the same way wherever the docs give it)."""
    found = [c for c in documented_commands()[0] if c.name == name]
    assert found and len({c.args for c in found}) == 1, f"madrag {name}: {[str(c) for c in found]}"
    return found[0]


def run_cli(
    args: list[str], cwd: Path, timeout: float = 300, own_cache: bool = True
) -> subprocess.CompletedProcess[str]:
    """``madrag ARGS`` in ``cwd`` as the console script runs it, with a private server folder there and (unless
    ``own_cache`` is False: the environment's, where a MiniLM index may already be) a private cache."""
    env = {**os.environ, "MADRAG_SERVER_DIR": str(cwd / "server")}
    if own_cache:
        env["MADRAG_CACHE"] = str(cwd / "cache")
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class Ran:
    """What a command run by :func:`in_process` gave: exit code, output, error output (with any traceback)."""

    returncode: int
    stdout: str
    stderr: str


def in_process(args: list[str], cwd: Path) -> Ran:
    """``madrag ARGS`` run by the CLI's command tree in this process (typer's test runner) from ``cwd``, with
    the private server folder and cache of :func:`run_cli` in its environment."""
    env = {"MADRAG_SERVER_DIR": str(cwd / "server"), "MADRAG_CACHE": str(cwd / "cache"), "COLUMNS": "200"}
    before = Path.cwd()
    os.chdir(cwd)
    try:
        done = CliRunner().invoke(app, args, env=env)
    finally:
        os.chdir(before)
    error = done.stderr
    if done.exc_info is not None and not isinstance(done.exception, SystemExit):
        error += "".join(traceback.format_exception(*done.exc_info))
    return Ran(done.exit_code, done.stdout, error)


_DATA = re.compile(r"\$\(madrag (data asap(?: \w+)?)\)")


def shipped_path(word: str, cwd: Path, seen: dict[str, str]) -> str:
    """``word`` with ``$(madrag data asap FILE)`` replaced by what that command prints (run once per FILE)."""

    def path(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in seen:
            done = in_process(key.split(), cwd)
            assert done.returncode == 0, f"madrag {key}: {done.stderr}"
            seen[key] = done.stdout.strip()
            assert Path(seen[key]).exists(), f"madrag {key} printed {seen[key]!r}, which does not exist"
        return seen[key]

    out = _DATA.sub(path, word)
    assert "$" not in out and "…" not in out and out != "...", f"{word!r} is not covered by the rewrite table"
    return out


def rewrite(command: Command, cwd: Path, seen: dict[str, str]) -> list[str]:
    """The command's words after the rewrite table (:data:`REWRITES`)."""
    args = [shipped_path(word, cwd, seen) for word in command.args]
    name = command.name
    if "--provider" in args:
        at = args.index("--provider") + 1
        assert args[at] in ("openai", "llamacpp", "fake"), f"{command}: --provider {args[at]} is not covered"
        args[at] = "fake"
    elif name in BACKEND_COMMANDS:
        args += ["--provider", "fake"]
    if name in BANK_COMMANDS or (name == "paper baseline" and "--data" in args):
        args += ["--embedder", "hashing"]
    if name in BANK_COMMANDS:
        if "--limit" in args:
            del args[args.index("--limit") : args.index("--limit") + 2]
        args += ["--limit", LIMIT]
    if name == "paper baseline":
        args += ["--trees", "10"]
        if "--data" in args:
            args += ["--features", "light"]
    if name in BOOTSTRAP_COMMANDS:
        args += ["--bootstrap", "20"]
    if "--cache-dir" not in args and "--cache-dir" in cli_options(tuple(args))[1]:
        args += ["--cache-dir", "cache"]
    return args


def user_files(folder: Path) -> None:
    """The files the documented commands leave to the user, written into ``folder``, and the repository's ``docs``
    (the commands run from the repository root)."""
    (folder / "essays.csv").write_text(
        "id,text,Ideas,Style,fold\n"
        + "".join(
            f"e{i},Essay {i}: the bus was late and I learned to wait.,{i % 4},{(i + 1) % 4},{i % 2}\n" for i in range(8)
        ),
        encoding="utf-8",
    )
    (folder / "rubric.yaml").write_text(
        "traits:\n"
        + "".join(
            f"  - name: {name}\n    min: 0\n    max: 3\n    levels: {{3: good, 2: fair, 1: weak, 0: missing}}\n"
            for name in ("Ideas", "Style")
        ),
        encoding="utf-8",
    )
    (folder / "prices.yaml").write_text(
        'gpt-4o-mini: {prompt: 0.15, completion: 0.60}\n"*": {prompt: 1.0, completion: 2.0}\n', encoding="utf-8"
    )
    shutil.copy(REPO / "tests/data/summeval_paired_sample.jsonl", folder / "model_annotations.aligned.paired.jsonl")
    shutil.copy(REPO / "tests/data/coded_errors_sample.csv", folder / "coded.csv")  # an error export, coded
    (folder / "docs").symlink_to(REPO / "docs", target_is_directory=True)


def named_outputs(comment: str) -> list[str]:
    """The ``runs/...`` files and folders a command's comment says it writes (``runs/abl/report.html`` ...)."""
    return [p.rstrip(".,:;)") for p in re.findall(r"\bruns/[\w./-]+", comment) if "/" in p[len("runs/") :]]


def test_the_readme_has_its_commands() -> None:
    commands, setup = documented_commands()
    names = {c.name for c in commands}
    assert {"score", "eval", "report", "costs", "paper baseline", "runs export", "serve", "demo"} <= names
    assert "bash scripts/setup.sh" in setup and len({c.args for c in commands}) >= 25
    own, own_setup = readme_commands()  # the front page: the two commands and the most common ones
    assert "demo" in {c.name for c in own} and "bash scripts/setup.sh" in own_setup and "bash .ci/run" in own_setup


def test_every_page_with_commands_is_run_or_excused() -> None:
    """A page of docs/ with a ```bash block is in the nav (so its commands run) or in :data:`NOT_RUN`."""
    run = {p.relative_to(REPO).as_posix() for p in documented_pages()}
    for page in sorted((REPO / "docs").glob("*.md")):
        name = page.relative_to(REPO).as_posix()
        if "```bash" in page.read_text(encoding="utf-8"):
            assert name in run or name in NOT_RUN, f"{name} has commands, but neither runs them nor says why"
    assert not set(NOT_RUN) & run and all((REPO / name).is_file() for name in NOT_RUN)


def test_the_line_parser() -> None:
    assert split_comment('madrag eval --data "a # b" x  # each run\'s tables') == (
        'madrag eval --data "a # b" x',
        "each run's tables",
    )
    assert named_outputs("runs/abl/report.html: plots, runs/abl (the run), runs/s7/eval-merged/") == [
        "runs/abl/report.html",
        "runs/s7/eval-merged/",
    ]


def cli_options(args: tuple[str, ...]) -> tuple[str, set[str]]:
    """(the command's path, every option it takes) from the CLI itself, as ``madrag CMD --help`` lists them."""
    command: Any = typer.main.get_command(app)  # typer's own copy of click: a group has ``commands``
    path: list[str] = []
    for word in args:
        if not hasattr(command, "commands"):
            break
        found = command.get_command(typer.Context(command), word)  # the top group builds its commands when asked
        assert found is not None, f"madrag {' '.join([*path, word])}: no such command"
        command, path = found, [*path, word]
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    return " ".join(path), options


def test_every_readme_option_exists() -> None:
    """Fast (no command runs): every documented command names a real command and only options it has."""
    for command in documented_commands()[0]:
        path, options = cli_options(command.args)
        given = {word.split("=", 1)[0] for word in command.args if word.startswith("-")}
        assert given <= options, f"{command}: madrag {path} has no {', '.join(sorted(given - options))}"


def test_every_readme_command_is_covered(tmp_path: Path) -> None:
    """Fast: the rewrite table covers every command (no placeholder, variable or unknown backend is left), and
    every option it adds exists."""
    seen: dict[str, str] = {}
    for command in documented_commands()[0]:
        if command.name not in OWN_TESTS:
            args = tuple(rewrite(command, tmp_path, seen))
            _, options = cli_options(args)
            assert {w for w in args if w.startswith("--")} <= options, f"{command}: rewritten to {args}"
    assert set(seen) == {"data asap essays", "data asap rubric7", "data asap rubric8"}


def test_every_readme_command_runs(tmp_path: Path) -> None:
    """Every documented command, in order; one the README repeats from a page runs once, where the page has it."""
    user_files(tmp_path)
    commands, _ = documented_commands()
    seen: dict[str, str] = {}
    timings, ran = [], set()
    for command in commands:
        if command.name in OWN_TESTS or command.args in ran:
            continue
        ran.add(command.args)
        args = rewrite(command, tmp_path, seen)
        started = time.monotonic()
        done = in_process(args, tmp_path)
        timings.append((time.monotonic() - started, command.name))
        assert done.returncode == 0, f"{command}\nran as: madrag {shlex.join(args)}\n{done.stderr[-3000:]}"
        for output in named_outputs(command.comment):
            assert (tmp_path / output).exists(), f"{command}: its comment names {output}, which it did not write"
    assert {c.name for c in commands} - set(OWN_TESTS) == {name for _, name in timings}
    print("slowest:", sorted(timings, reverse=True)[:5])


def test_readme_serve_answers(tmp_path: Path) -> None:
    serve = the_command("serve")
    port = free_port()
    args = [*serve.args, "--port", str(port), "--data-dir", str(tmp_path / "server"), "--embedder", "hashing"]
    env = {**os.environ, "MADRAG_CACHE": str(tmp_path / "cache")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*CLI, *args], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline, page = time.monotonic() + 120, None
        while page is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
            except httpx.TransportError:
                time.sleep(0.3)
        assert page is not None, f"madrag serve did not answer: {log.read_text(errors='replace')}"
        assert page.status_code == 200 and "madrag" in page.text
    finally:
        stop_process(proc, signal.SIGINT, timeout=20)


@pytest.mark.integration
@pytest.mark.timeout(1800)  # MiniLM over set 7's pool and the embedded model: ~14 minutes on 2 busy cores
def test_readme_demo_runs(tmp_path: Path) -> None:
    demo = the_command("demo")
    args = [*demo.args, "--n", "1", "--max-tokens", "16", "--traits", "Ideas"]
    done = run_cli(args, tmp_path, timeout=1500, own_cache=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "human" in done.stdout and (tmp_path / "runs/demo/store.sqlite").is_file()
    store = sqlite3.connect(tmp_path / "runs/demo/store.sqlite")
    try:
        rows = store.execute("SELECT role, trait FROM records WHERE error IS NULL").fetchall()
    finally:
        store.close()
    assert sorted(rows) == [("advocate", "Ideas"), ("judge", "Ideas"), ("skeptic", "Ideas")]  # one debate, judged

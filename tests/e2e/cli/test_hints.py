"""Every hint madrag prints that names an option of ``madrag score`` / ``madrag resume`` runs as printed: each is
in the one registry (:mod:`madrag.errors`), and each is made to be printed here (on the fake backend or the stub
server), read back from the output and run as printed: accepted, on the same run folder unless the hint names a
new ``--run-dir``. A token limit (a setting that does not change a finished record's meaning) is accepted by a
run that has records; a run with no record yet takes any setting."""

from __future__ import annotations

import ast
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import madrag
from madrag.errors import HINTS
from madrag.testing.stub_server import StubServer

SRC = Path(madrag.__file__).parent
SAID = re.compile(r"(?:\buse|\bTry|rerun with|resume it with|resume with|score with) (--[a-z][a-z-]*)")
"""How a message tells a person to add an option."""
ELSEWHERE = {
    "--runtime": "the embedded model's runtime of an older run: needs llama-cpp-python and a model",
    "--out": "madrag errors' export folder, not a scoring option",
    "--format": "NIKL's data (nikl-all), which is not shipped",
    "--prompts-dir": "a run made before runs kept their templates (tests/e2e/cli/test_release_b8ea291_run.py)",
    "--run-dir": "a new run folder: what the other hints are run against",
    "--no-logprobs": "the start-up probe's NO_LOGPROBS (providers/openai_answer.py); run below from the adapter",
}
"""Options said in messages outside the registry, and why this test does not run them."""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def said_options() -> dict[str, str]:
    """Every option a string of the package tells a person to add, with the file that says it."""
    found: dict[str, str] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for m in SAID.finditer(node.value):
                    found.setdefault(m.group(1), str(path.relative_to(SRC)))
    return found


def test_every_option_a_message_names_is_registered_or_said_why_not() -> None:
    registered = {o for text in HINTS.values() for o in re.findall(r"--[a-z][a-z-]*", text)}
    said = said_options()
    unlisted = {o: where for o, where in said.items() if o not in registered and o not in ELSEWHERE}
    assert not unlisted, f"hints outside madrag/errors.py: {unlisted}"
    assert "--judge-max-tokens" in said and "--score-method" in said  # the scan sees the registry's own


def as_printed(text: str, name: str) -> tuple[list[str], bool]:
    """The options of hint ``name`` where ``text`` prints it (its first alternative), and whether it names a new
    run folder."""
    pattern = re.escape(HINTS[name]).replace(r"\{new_run_dir\}", "with a new --run-dir")
    m = re.search(re.sub(r"\\\{[a-z_]+\\\}", "(.+?)", pattern), " ".join(text.split()))
    assert m is not None, f"hint {name!r} not printed in: {text}"
    first = re.split(r",? or ", m.group(0).split(": ", 1)[-1])[0]
    new_dir = "with a new --run-dir" in first
    options: list[str] = []
    for raw in first.replace("with a new --run-dir", "").split():
        word = raw.rstrip(",.;")
        if word.startswith("--") or (options and options[-1].startswith("--")):
            options.append(word)
        elif options:
            break
        if raw != word:
            break
    return options, new_dir


def _rubric_and_data(tmp_path: Path, fold: bool = True) -> tuple[Path, Path]:
    rubric = tmp_path / "rubric.json"
    levels = ", ".join(f'"{s}": "level {s}"' for s in range(4))
    rubric.write_text('{"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": {' + levels + "}}]}")
    data = tmp_path / "essays.jsonl"
    rows = [
        f'{{"id": "e{i}", "text": "A story about waiting for the bus, number {i}.", "Ideas": {i % 4}'
        + (f', "fold": {i % 2}' if fold else "")
        + "}"
        for i in range(4)
    ]
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return rubric, data


def _run(base: list[str], run_dir: Path, options: list[str]) -> subprocess.CompletedProcess[str]:
    return cli(*base, *options, "--run-dir", str(run_dir))


def test_token_limits_run_as_printed_on_a_run_that_has_records(tmp_path: Path) -> None:
    """The limits a context refusal names (``or score with --debater-max-tokens 256``) on a run that has
    records, by ``madrag score`` and by ``madrag resume``; run.log says what each session changed."""
    rubric, data = _rubric_and_data(tmp_path)
    base = ["score", "--data", str(data), "--rubric", str(rubric), "--protocol", "MAD", "--provider", "fake",
            "--fold", "all", "--cache-dir", str(tmp_path / "c")]  # fmt: skip
    run = tmp_path / "run"
    assert _run(base, run, ["--limit", "2"]).returncode == 0
    printed = "... = 5474, more than the server's context; " + HINTS["context-limits"].format(
        options="--debater-max-tokens 256 or --judge-max-tokens 300"
    )
    options, new_dir = as_printed(printed, "context-limits")
    assert options == ["--debater-max-tokens", "256"] and not new_dir
    again = _run(base, run, ["--limit", "3", *options])
    assert again.returncode == 0, again.stderr
    conn = sqlite3.connect(run / "store.sqlite")  # as if interrupted: one essay's judge never answered
    conn.execute("DELETE FROM records WHERE essay_id = 'e0' AND role = 'judge'")
    conn.execute("DELETE FROM scores WHERE essay_id = 'e0'")  # its scores are kept after its judges answered
    conn.commit()
    conn.close()
    resumed = cli("resume", str(run), "--judge-max-tokens", "300", "--cache-dir", str(tmp_path / "c"))
    assert resumed.returncode == 0, resumed.stderr
    log = (run / "run.log").read_text(encoding="utf-8")
    assert "token limits changed this session: debater_max_tokens 1024 -> 256" in log
    assert "token limits changed this session: judge_max_tokens 1024 -> 300" in log
    other = _run(base, run, ["--placeholders", "mask"])  # a setting that changes meaning: still refused
    assert other.returncode == 2 and "made with different settings (settings.placeholders)" in other.stderr


def test_a_cut_judge_and_a_server_without_schemas_print_hints_that_run(tmp_path: Path) -> None:
    """Cut Judge answers print "Try --judge-max-tokens N with a new --run-dir ..., or --score-method constrained
    with a new --run-dir"; the first runs as printed (and on the same folder, a token limit); the second on a
    server that ignores JSON schemas is refused with "use --score-method text", which runs as printed."""
    rubric, data = _rubric_and_data(tmp_path)
    with StubServer(capacity=2, latency_s=0.0) as server:
        base = ["score", "--data", str(data), "--rubric", str(rubric), "--protocol", "MA", "--provider", "openai",
                "--model", "stub-model", "--base-url", server.base_url, "--api-key-env", "MADRAG_NO_KEY",
                "--fold", "all", "--no-cache", "--cache-dir", str(tmp_path / "c")]  # fmt: skip
        cut = _run(base, tmp_path / "cut", ["--judge-max-tokens", "4"])
        assert cut.returncode == 0, cut.stderr
        options, new_dir = as_printed(cut.stdout, "larger-judge-limit")
        assert options == ["--judge-max-tokens", "8"] and new_dir
        assert _run(base, tmp_path / "larger", options).returncode == 0
        assert _run(base, tmp_path / "cut", options).returncode == 0  # a token limit: the same folder takes it
        constrained = _run(base, tmp_path / "schema", ["--score-method", "constrained"])
        assert constrained.returncode == 2 and not (tmp_path / "schema").exists()
        options, new_dir = as_printed(constrained.stderr, "score-method-text")
        assert options == ["--score-method", "text"] and not new_dir
        assert _run(base, tmp_path / "schema", options).returncode == 0


def test_a_reasoning_models_refusals_print_hints_that_run(tmp_path: Path) -> None:
    rubric, data = _rubric_and_data(tmp_path)
    with StubServer(capacity=2, latency_s=0.0, reasoning_model=True, model="o3") as server:
        base = ["score", "--data", str(data), "--rubric", str(rubric), "--protocol", "MA", "--provider", "openai",
                "--model", "o3", "--base-url", server.base_url, "--api-key-env", "MADRAG_NO_KEY",
                "--fold", "all", "--no-cache", "--cache-dir", str(tmp_path / "c")]  # fmt: skip
        for name, given in [
            ("no-logprobs", []),
            ("token-param", ["--no-logprobs", "--token-param", "max_tokens"]),
            ("sampling-params", ["--no-logprobs", "--sampling-params", "send"]),
        ]:
            run = tmp_path / name
            refused = _run(base, run, given)
            assert refused.returncode == 2, refused.stderr
            options, new_dir = as_printed(refused.stderr, name)
            kept = [g for g in given if g == "--no-logprobs"]
            done = _run(base, run, [*kept, *options])  # the same folder: it holds no record yet
            assert done.returncode == 0 and not new_dir, done.stderr


def test_data_without_folds_prints_a_hint_that_runs(tmp_path: Path) -> None:
    rubric, data = _rubric_and_data(tmp_path, fold=False)
    base = ["score", "--data", str(data), "--rubric", str(rubric), "--protocol", "MA", "--provider", "fake",
            "--cache-dir", str(tmp_path / "c")]  # fmt: skip
    refused = _run(base, tmp_path / "run", [])
    assert refused.returncode == 2
    options, _ = as_printed(refused.stderr, "fold-all")
    assert options == ["--fold", "all"] and _run(base, tmp_path / "run", options).returncode == 0

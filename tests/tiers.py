"""The test tiers (docs/development.md, "Tests"): the folder a test file is in gives its tier, and this module the
tests that are ``slow`` and those that must run alone (``serial``).

- ``tests/unit/<package>/``: one part of ``src/madrag/<package>/`` in this process, on fakes (no subprocess, no real
  model, server, browser or vector store); ``core`` holds madrag's top-level modules, ``project`` the repository's
  own rules.
- ``tests/e2e/<area>/``: a front door end to end on the fake backend: the CLI (often in its own process), the Python
  API, the web app (in process, or in Chromium for ``browser``), the documentation's commands.
- ``tests/integration/<package>/``: real parts (MiniLM, Chroma, llama.cpp, llama.cpp's server, Ray).

A test in a ``unit`` or ``e2e`` file that needs a real part carries its own ``integration`` mark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "e2e", "integration")

# tests over ~15 s, by "file stem::test name", with what took the time (seconds measured with --durations, -n 2, on
# the 2-core machine at a load average of 7: about 3x a quiet machine's); the default run leaves them out, .ci/run
# runs them
SLOW: dict[str, str] = {
    "test_fold_each::test_fold_each_reproduces_table2_sizes_without_leaking_a_fold": "every essay of a set, 5 folds: "
    "176 s (set 8) and 127 s (set 7)",
    "test_xllama_runtime::test_the_gguf_header_reads_as_the_gguf_package_reads_it": "the gguf package reads the "
    "model file's header: 40 s",
    "test_memory_bounded::test_thousand_essays_bounded_rss_and_no_lost_record": "a thousand essays: 25 s",
    "test_paper_figures::test_eval_paper_prints_table_1_beside_the_measured": "eval --paper on a full run: 25 s",
    # the e2e tier, measured the same way at a load average of 5 to 7
    "test_confidence_figure3::test_table1_over_two_sets_ranks_each_set_on_its_own_run": "two judged runs, each "
    "meta-evaluated, through the CLI: 118 s",
    "test_confidence_study::test_score_meta_eval_analyze_from_the_command_line": "score, meta-eval and analyze, "
    "each its own process: 47 s per reading",
    "test_run_failures::test_cli_finishes_with_failures_exit_3_and_fail_fast_exit_2": "three runs, each its own "
    "process: 42 s",
    "test_one_writer::test_readers_read_while_a_writer_holds_the_run": "a writer and its readers as processes: 39 s",
    "test_cli::test_fake_run_then_export": "score, eval, report and export, each its own process: 36 s",
    "test_consensus_cli::test_ablate_consensus_then_evaluate": "ablate-consensus and eval-consensus as processes: 35 s",
    "test_protocols_cj_mts::test_ablate_with_madrag_cj_mts_geval_then_eval_one_table": "four protocols' ablation "
    "and its eval as processes: 32 s",
}


def tier_of(path: Path) -> str | None:
    """The tier of the test file at ``path``: the first folder under tests/ (None for a file outside the tiers)."""
    try:
        first = path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None
    return first if first in TIERS else None


def is_serial(path: Path, integration: bool) -> bool:
    """Whether a test must run alone, never beside another (``.ci/run`` runs these after the rest, in one process):
    every test that uses a real part (they share the model cache, fill the cores with llama.cpp's threads and start
    Ray) and every test that drives Chromium (the browser and the accessibility checks). pytest-xdist's
    ``--dist loadgroup`` would keep them on one worker, but pytest-xdist 3.8 marks the group in a field pytest 9.2
    no longer reads (``item._nodeid``), so the groups spread over the workers all the same."""
    return integration or is_browser(path)


def is_browser(path: Path) -> bool:
    """Whether the test drives Chromium (tests/e2e/browser): each is slow (a server and a browser, 20 to 70 s at a
    load average of 10) and serial."""
    return path.resolve().relative_to(TESTS).parts[:2] == ("e2e", "browser")


def marks_of(path: Path, name: str, integration: bool) -> list[pytest.MarkDecorator]:
    """The marks a test gets from its place: its tier, ``slow`` when it is in ``SLOW``, ``serial`` (is_serial)."""
    tier = tier_of(path)
    marks = [getattr(pytest.mark, tier)] if tier else []
    if f"{path.stem}::{name}" in SLOW or is_browser(path):
        marks.append(pytest.mark.slow)
    if is_serial(path, integration or tier == "integration"):
        marks.append(pytest.mark.serial)
    return marks

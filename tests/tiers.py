"""The test tiers (docs/development.md, "Tests"): the folder a test file is in gives its tier, and this module the
tests that are ``slow`` and those that must run alone (``serial``).

- ``tests/unit/<package>/``: one part of ``src/madrag/<package>/`` in this process, on fakes (no subprocess, no real
  model, server, browser or vector store); ``core`` holds madrag's top-level modules, ``project`` the repository's
  own rules.
- ``tests/e2e/<area>/``: a front door end to end on the fake backend: the CLI (often in its own process), the Python
  API, the web app (in process, or in Chromium for ``browser``), the documentation's commands.
- ``tests/integration/<package>/``: real parts (MiniLM, llama.cpp, llama.cpp's server, Ray, several processes;
  Chroma as the reference madrag's retrieval is compared with).

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
    # the documentation's commands on the fake backend (measured the same way, -n 2, load average ~3)
    "test_readme_commands::test_every_readme_command_runs": "some 30 commands in this process: 75 s",
    "test_reproduce_commands::test_every_reproduce_command_runs": "some 20 commands in this process: 110 s",
    # over ~3 s on a quiet 2-core machine (.ci/run's --durations, -n 2, load average ~2): the default run stays
    # under three minutes there; most run madrag in processes of their own, where the process is the point
    "test_cli_presets::test_ablate_is_score_with_the_preset_recorded_in_the_run": "ablate and score, resumed: 10 s",
    "test_cli_presets::test_an_old_paper_command_still_runs_and_names_its_new_form": "a process per old name: 3 s",
    "test_consensus_multi_cli::test_several_runs_are_averaged_and_gridded": "three runs and their eval: 9 s",
    "test_consensus_multi_cli::test_runs_of_another_rubric_are_refused": "two runs and a refused eval: 6 s",
    "test_confidence_study::test_analyze_without_meta_from_the_command_line": "analyze as a process, twice: 8 s",
    "test_summeval::test_the_six_seed_002_protocols_and_eval_consensus_run_on_summeval": "six protocols: 8 s",
    "test_toy_backend::test_the_cli_generates_the_toys_option_and_scores_with_it": "three processes: 7 s",
    "test_readme_no_logprobs::test_the_cli_error_names_the_flag_and_the_rerun_with_it_works": "two processes: 6 s",
    "test_readme_no_logprobs::test_a_dead_port_leaves_a_folder_as_it_was_and_the_fixed_command_works_on_it": (
        "two processes: 5 s"
    ),
    "test_bad_inputs::test_a_fixed_command_runs_after_a_refused_one": "a refused and a finished process: 6 s",
    "test_toy_protocol::test_the_cli_loads_the_plugin_scores_then_eval_and_the_report_read_the_toy": "processes: 6 s",
    "test_research_run::test_the_summary_tells_cache_hits_apart": "two runs as processes: 6 s",
    "test_one_writer::test_a_second_server_on_the_same_data_dir_is_refused": "two servers: 5 s",
    "test_one_writer::test_two_writers_at_a_barrier_never_mix_a_run": "two writers, several rounds: 4 s",
    "test_resume_kill::test_sigkill_mid_run_then_resume": "a killed process and its resume: 5 s",
    "test_cli::test_resuming_with_other_settings_is_refused": "two processes: 5 s",
    "test_evaluation::test_command_functions_register_in_typer": "every command's help: 5 s",
    "test_own_data::test_single_rater_run_eval_and_errors": "score, eval, errors as processes: 5 s",
    "test_own_data::test_input_errors_are_one_stderr_line_without_a_progress_bar": "a process per input: 4 s",
    "test_own_data::test_protocols_needing_exemplars_refuse_a_trait_without_scores": "processes: 4 s",
    "test_disk_full::test_a_real_full_disk_during_the_run": "a run on a 2 MB filesystem: 5 s",
    "test_store_readonly::test_reading_an_old_run_leaves_its_files_as_they_were_and_resuming_migrates_it_saying_so": (
        "processes over an old run: 4 s"
    ),
    "test_store_readonly::test_a_run_on_a_read_only_filesystem_is_evaluated": "processes: 3 s",
    "test_resume_command::test_resume_makes_exactly_the_calls_left_with_the_runs_own_templates": "two runs: 4 s",
    "test_cli_out_and_ids::test_report_out_in_a_missing_folder_through_the_console_entry_point": "processes: 4 s",
    "test_tokens::test_an_anchor_run_records_the_chosen_essays": "an anchor run on a whole set: 4 s",
    "test_tokens::test_an_adaptive_run_records_its_threshold_and_costs_reports_the_calls_saved": "two runs: 3 s",
    "test_reference_ties::test_score_command_records_the_tie_rule": "score as processes: 4 s",
    "test_previous_release_run::test_it_opens_evaluates_and_exports": "a whole old run evaluated: 3 s",
    "test_confidence_figure3::test_sets_need_two_judged_runs_with_distinct_labels": "judged runs: 3 s",
    "test_readme_commands::test_readme_serve_answers": "madrag serve as a process: 3 s",
    "test_reasoning_backend::test_score_against_a_reasoning_model_from_the_command_line": "a process: 3 s",
    "test_hints::test_a_reasoning_models_refusals_print_hints_that_run": "six score processes on the stub: 35 s",
    "test_hints::test_a_cut_judge_and_a_server_without_schemas_print_hints_that_run": "six score processes: 33 s",
    "test_hints::test_token_limits_run_as_printed_on_a_run_that_has_records": "four processes: 17 s",
    # the integration tier (serial), measured alone on the 2-core machine
    "test_core_install::test_the_core_install_pulls_no_extra_and_scores_with_a_servers_embeddings": "a fresh venv "
    "and pip install of the core from pip's cache, then madrag as processes: 50 s",
    # each extra's install in a fresh venv from pip's cache, then one command of its audience (measured alone)
    "test_extras_install::test_web_serves_the_home_page_and_the_json_api": "pip install of [web], madrag serve: 30 s",
    "test_extras_install::test_paper_runs_the_llm_free_baselines_with_the_papers_features": "pip install of "
    "[paper], the baselines and eval: 35 s",
    "test_extras_install::test_documents_scores_a_class_workbook": "pip install of [documents], a score: 25 s",
    "test_extras_install::test_ray_scores_two_essays_on_a_local_instance": "pip install of [ray], a score on a "
    "local Ray instance: 41 s",
    "test_extras_install::test_embedded_runs_the_readme_demo_on_one_trait": "pip install of [embedded] and the "
    "model's package, the demo on one essay and trait: 103 s",
}


def tier_of(path: Path) -> str | None:
    """The tier of the test file at ``path``: the first folder under tests/ (None for a file outside the tiers)."""
    try:
        first = path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None
    return first if first in TIERS else None


BESIDE_OTHERS: dict[str, str] = {
    "test_bank_processes": "the bank store from several processes, with the hashing embedder",
    "test_fold_each": "real per-fold banks of whole sets, with the hashing embedder",
    "test_baselines": "the kNN baseline on real fold banks, with a bag-of-words embedder",
    "test_retrieval_memory": "Chroma's queries beside the in-memory bank's, with the hashing embedder",
    "test_vectors::test_fold_each_embeds_each_essay_once": "real per-fold banks, with a counting embedder",
    "test_sqlite_banks::test_a_real_old_chroma_store_is_recognised_and_its_bank_built_again": "a real Chroma store "
    "beside the SQLite store, with the hashing embedder",
    # a fresh venv each (its own madrag cache; pip builds from a copy of the package): the install reads pip's
    # cache and writes the venv, and the command after it is light; [ray] and [embedded] run alone (Ray's
    # processes and the embedded model fill the cores)
    "test_extras_install::test_web_serves_the_home_page_and_the_json_api": "pip install of [web], madrag serve",
    "test_extras_install::test_paper_runs_the_llm_free_baselines_with_the_papers_features": "pip install of "
    "[paper], a small cross-validated FeatEng-RF",
    "test_extras_install::test_documents_scores_a_class_workbook": "pip install of [documents], a score on the stub",
}
"""Tests of real parts that run beside others all the same (by "file stem" or "file stem::test name", with
what they use): banks (and Chroma) in a folder of their own, with an embedder that loads no model, or an extra's
install in a venv of its own; no model, server, Ray or browser of theirs fills the cores or shares a cache with
another test (pip's cache aside: pip writes each entry whole, so installs beside each other share it)."""


ON_THE_CLOCK: dict[str, str] = {
    "test_time_left_stub::test_a_run_against_a_varying_server_counts_down_steadily": "the time left of a run read "
    "against the wall clock: beside other tests, the run's own end (its accounts, its store) stretches past the "
    "last call by seconds",
}
"""Tests of the fake backend that measure time on the real clock: they run alone (``serial``), like the real
parts, so that what they measure is the run's and not the machine's other work."""


def is_serial(path: Path, integration: bool, name: str = "") -> bool:
    """Whether a test must run alone, never beside another (``.ci/run`` runs these after the rest, in one process):
    every test that uses a real part (they share the model cache, fill the cores with llama.cpp's or MiniLM's
    threads and start Ray), except those of :data:`BESIDE_OTHERS`; and those of :data:`ON_THE_CLOCK`. The browser
    tests (each its own server and Chromium) run beside others. pytest-xdist's ``--dist loadgroup`` would keep the
    serial ones on one worker, but pytest-xdist 3.8 marks the group in a field pytest 9.2 no longer reads
    (``item._nodeid``), so the groups spread over the workers all the same."""
    beside = path.stem in BESIDE_OTHERS or f"{path.stem}::{name}" in BESIDE_OTHERS
    return (integration and not beside) or f"{path.stem}::{name}" in ON_THE_CLOCK


def is_browser(path: Path) -> bool:
    """Whether the test drives Chromium (tests/e2e/browser): each is slow (a server and a browser, 20 to 70 s at a
    load average of 10)."""
    return path.resolve().relative_to(TESTS).parts[:2] == ("e2e", "browser")


def marks_of(path: Path, name: str, integration: bool) -> list[pytest.MarkDecorator]:
    """The marks a test gets from its place: its tier, ``slow`` when it is in ``SLOW`` or drives the browser,
    ``serial`` (is_serial)."""
    tier = tier_of(path)
    marks = [getattr(pytest.mark, tier)] if tier else []
    if f"{path.stem}::{name}" in SLOW or is_browser(path):
        marks.append(pytest.mark.slow)
    if is_serial(path, integration or tier == "integration", name):
        marks.append(pytest.mark.serial)
    return marks

"""``madrag paper ...``: the commands only reproducing the papers needs, in one group apart from scoring and the
teachers' web app (registered by :mod:`madrag.cli.app`): the confidence study, the consensus evaluation, the
MADRAG paper's coded error tables and the LLM-free baselines of its Table 1.

Like the top-level commands, each is imported only when it runs (:class:`~madrag.cli.lazy.LazyGroup`). Their
old top-level names (``madrag confidence``, ``eval-consensus``, ``baseline``) still run them, hidden from
``madrag --help`` (:data:`madrag.cli.app.COMMANDS`).
"""

from __future__ import annotations

from madrag.cli.lazy import LazyCommand, LazyGroup, lazy_app

PAPER_COMMANDS: dict[str, LazyCommand] = {
    "confidence": LazyCommand("confidence", "confidence_app"),
    "eval-consensus": LazyCommand("consensus", "eval_consensus_command"),
    "error-tables": LazyCommand("evaluate", "error_tables_command"),
    "baseline": LazyCommand("baseline", "baseline_command"),
}
"""The commands of ``madrag paper``, in the order its help lists them."""


class PaperGroup(LazyGroup):
    """``madrag paper``: the commands of :data:`PAPER_COMMANDS`, each imported when first needed."""

    lazy_commands = PAPER_COMMANDS


paper_app = lazy_app(
    PaperGroup,
    help="Reproduce the papers: the confidence study, the consensus evaluation, the coded error tables, the "
    "LLM-free baselines (docs/reproduce.md).",
)

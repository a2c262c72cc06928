"""One self-contained HTML report per run (``<run>/report.html``): tables, plots and every transcript.

Plots are matplotlib figures (Agg, no pyplot state) embedded as base64 PNGs, so the file opens anywhere
offline. Every piece of essay or model text goes through :func:`html.escape`; the page has no scripts.
Essays sit in collapsible ``<details>`` blocks and each exemplar's text is written once in an appendix,
so a run of a few hundred essays stays a usable page.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from dataclasses import replace
from io import BytesIO
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from madrag.data.essay import Essay
from madrag.evaluation.agreement import HH_EVAL, HH_FULL, Evaluation, evaluate_run, protocol_cell, trait_label, wide
from madrag.evaluation.run import RunData, load_run, open_store
from madrag.evaluation.sources import Sources, debate_turns, essay_sources, judge_for
from madrag.evaluation.tables import display_tables, fmt, new_figure
from madrag.files.atomic import open_atomic
from madrag.metrics import TieRule, checked_ties
from madrag.pipeline.unusable import summary_lines
from madrag.records import AgentRecord
from madrag.rubric import Trait

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}pre{white-space:pre-wrap;background:#f7f7f7;padding:0.6em}
details{margin:0.3em 0}
summary{cursor:pointer;padding:4px 0;min-height:24px}.turn{border-left:4px solid #999;padding-left:0.6em;margin:0.4em 0}
.advocate{border-color:#2a7}.skeptic{border-color:#c44}.judge{border-color:#36c}.muted{color:#595959}
img{max-width:100%;height:auto}.scroll{overflow-x:auto;max-width:100%}@media (max-width:600px){body{margin:0.6em}}
"""


def esc(value: Any) -> str:
    """Any value as HTML-escaped text (quotes too, so it is safe in attributes)."""
    return html.escape(str(value), quote=True)


def png(fig: Figure, alt: str) -> str:
    """A figure as an <img> with an embedded base64 PNG."""
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def html_table(frame: Any) -> str:
    """A (display) DataFrame as an escaped HTML table, index as the first column."""
    head = "".join(f"<th>{esc(c)}</th>" for c in ["", *frame.columns])
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(fmt(v))}</td>" for v in [index, *row.tolist()]) + "</tr>"
        for index, row in frame.iterrows()
    )
    return f"<table><tr>{head}</tr>{body}</table>"


# -- plots ----------------------------------------------------------------------------------------------


def qwk_plot(evaluation: Evaluation) -> str:
    """Grouped bars: QWK per trait for every protocol and the Human-Human rows, with bootstrap CIs."""
    values, low, high = (wide(evaluation.qwk, c) for c in ("qwk", "ci_low", "ci_high"))
    fig = new_figure(figsize=(max(6.0, 1.6 * len(values.columns)), 3.6))
    ax = fig.subplots()
    width = 0.8 / max(len(values.index), 1)
    x = np.arange(len(values.columns))
    for i, name in enumerate(values.index):
        v = values.loc[name].to_numpy(dtype=float)
        err = np.vstack([v - low.loc[name].to_numpy(dtype=float), high.loc[name].to_numpy(dtype=float) - v])
        human = name in (HH_FULL, HH_EVAL)
        ax.bar(
            x + i * width,
            np.nan_to_num(v),
            width,
            label=str(name),
            yerr=np.maximum(np.nan_to_num(err), 0),
            capsize=2,
            color="0.55" if name == HH_FULL else ("0.8" if human else None),
            hatch="//" if human else None,
        )
    ax.set_xticks(x + width * (len(values.index) - 1) / 2, [str(c) for c in values.columns])
    ax.set_ylabel("QWK vs human reference")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return png(fig, "QWK per trait and protocol")


def confusion_plot(run: RunData, protocol: str) -> str:
    """One heatmap per trait: rows = human reference, columns = the protocol's score (counts)."""
    traits = run.rubric.traits
    fig = new_figure(figsize=(2.6 * len(traits), 2.7), layout="constrained")
    scores = run.score_map()  # once for every trait
    for ax, trait in zip(np.atleast_1d(fig.subplots(1, len(traits))), traits, strict=True):
        k = trait.max - trait.min + 1
        matrix = np.zeros((k, k), dtype=int)
        for ref, pred in zip(*protocol_cell(run, protocol, trait, scores)[:2], strict=True):
            matrix[int(ref) - trait.min, int(pred) - trait.min] += 1
        ax.imshow(matrix, cmap="Blues", vmin=0)
        for (i, j), count in np.ndenumerate(matrix):
            dark = count > matrix.max() / 2
            ax.text(j, i, str(count), ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(k), [str(s) for s in trait.scores])
        ax.set_yticks(range(k), [str(s) for s in trait.scores])
        ax.set_title(trait_label(trait.name), fontsize=9)
        ax.set_xlabel(protocol, fontsize=8)
    fig.axes[0].set_ylabel("human reference", fontsize=8)
    return png(fig, f"confusion matrices of {protocol}")


def distribution_plot(run: RunData) -> str:
    """Per trait: share of each score for the human reference and every protocol (middle-score bias)."""
    traits = run.rubric.traits
    fig = new_figure(figsize=(3.0 * len(traits), 2.8), layout="constrained")
    names = ["human reference", *run.protocols]
    scores = run.score_map()  # once for every trait and protocol
    for ax, trait in zip(np.atleast_1d(fig.subplots(1, len(traits))), traits, strict=True):
        width = 0.8 / len(names)
        refs: list[float] = [r for e in run.essays if (r := e.reference(trait, run.label_ties)) is not None]
        series = [refs, *(protocol_cell(run, p, trait, scores)[1] for p in run.protocols)]
        for i, (name, values) in enumerate(zip(names, series, strict=True)):
            counts = np.array([values.count(s) for s in trait.scores], dtype=float)
            share = counts / counts.sum() if counts.sum() else counts
            ax.bar(np.arange(len(trait.scores)) + i * width, share, width, label=name, color="0.4" if i == 0 else None)
        ax.set_xticks(np.arange(len(trait.scores)) + 0.4 - width / 2, [str(s) for s in trait.scores])
        ax.set_title(trait_label(trait.name), fontsize=9)
    fig.axes[0].set_ylabel("share of essays")
    fig.axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return png(fig, "score distributions, human vs model")


def extreme_plot(evaluation: Evaluation) -> str:
    """Agree@1 on the extreme subset per protocol (all traits pooled), MAE in the labels."""
    pooled = evaluation.extreme[evaluation.extreme["trait"] == "all"]
    fig = new_figure(figsize=(max(4.0, 1.1 * len(pooled)), 2.8))
    ax = fig.subplots()
    labels = [
        f"{p}\nN {n}, MAE {fmt(m, 2)}" for p, n, m in zip(pooled["protocol"], pooled["n"], pooled["mae"], strict=True)
    ]
    ax.bar(range(len(pooled)), np.nan_to_num(pooled["agree_at_1"].to_numpy(dtype=float)), color="#36c")
    ax.set_xticks(range(len(pooled)), labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("Agree@1 (extreme subset)")
    return png(fig, "extreme-subset Agree@1 per protocol")


# -- transcripts ----------------------------------------------------------------------------------------


def evidence_note(record: AgentRecord | None) -> str:
    """A muted line under an answer: its quotes found and not found in the essay (listed), and its sentences
    citing a placeholder as an error; empty when the record has no counts or nothing to say."""
    counts = None if record is None else record.evidence
    if counts is None:
        return ""
    parts = []
    if counts.checked and counts.quotes_found:
        missing = "; ".join(f"\u201c{q}\u201d" for q in counts.unverified_quotes)
        parts.append(
            f"quotes: {counts.quotes_found}, not found in the essay: {counts.quotes_unverified}"
            + (f" ({missing})" if missing else "")
        )
    if counts.placeholder_errors:
        parts.append(f"placeholder cited as an error: {counts.placeholder_errors}")
    return f"<p class='muted'>{esc(' · '.join(parts))}</p>" if parts else ""


def _turn(record: AgentRecord) -> str:
    conf = "" if record.confidence is None else f" · confidence {record.confidence:.2f} ({record.confidence_source})"
    title = f"{record.role.capitalize()} {record.round}{conf}"
    text = esc(record.text.strip())
    return f'<div class="turn {esc(record.role)}"><b>{esc(title)}</b><pre>{text}</pre>{evidence_note(record)}</div>'


def _exemplar_item(level: dict[str, Any], shown: dict[str, str]) -> str:
    """One exemplar line. Per-level dumps ({score, exemplar}) come from MARAG/MADRAG, plain ones from SARAG."""
    ex = level.get("exemplar") if "exemplar" in level else level
    label = f"score {level['score']}: " if "score" in level else ""
    if not ex:
        return f"<li>{esc(label)}<i>none available</i></li>"
    eid = str(ex.get("essay_id"))
    shown.setdefault(eid, str(ex.get("text", "")))
    sim = ex.get("similarity")
    extra = "" if sim is None else f" (similarity {float(sim):.2f})"
    if "score" not in level and ex.get("scores"):
        extra += f" scores {ex['scores']}"
    return f'<li>{esc(label)}<a href="#{esc("ex-" + eid)}">essay {esc(eid)}</a>{esc(extra)}</li>'


def _exemplars(judge: AgentRecord | None, shown: dict[str, str]) -> str:
    """The exemplars a Judge saw, linking to the appendix copy of each text (written once per essay)."""
    levels = [] if judge is None else judge.context.get("exemplars") or []
    items = "".join(_exemplar_item(level, shown) for level in levels if isinstance(level, dict))
    return f"<div>Exemplars shown to the Judge:<ul>{items}</ul></div>" if items else ""


def _trait_block(run: RunData, essay: Essay, trait: Trait, sources: Sources, shown: dict[str, str]) -> str:
    """One trait of one essay: each debate once (shared by the protocols that read it), then every Judge."""
    key = (essay.id, trait.name)
    raters = ", ".join(f"{s:g}" for s in essay.rater_scores.get(trait.name, []))
    summary = [f"human {fmt(essay.reference(trait, run.label_ties))} (raters {raters})"]
    parts, debates_done = [], set()
    for protocol in run.protocols:
        found = sources.scores.get((protocol, *key))
        judge = judge_for(sources.judges, protocol, *key)
        summary.append(f"{protocol} {'—' if found is None or found.score is None else found.score}")
        turns = debate_turns(judge, sources.debates)
        ids = tuple(t.key for t in turns)
        if turns and ids not in debates_done:
            debates_done.add(ids)
            parts.append(f"<h5>Debate ({esc(turns[0].protocol)})</h5>" + "".join(_turn(t) for t in turns))
        if found is not None:
            result = found.result
            mode = "" if result is None else f" · {result.mode}"
            problem = None if judge is None else judge.error
            if judge is not None and problem is None and found.score is None and result is not None:
                problem = f"unusable score: {result.invalid_raw}"  # computed from a readable answer (G-Eval's)
            error = "" if problem is None else f" · {problem}"
            head = f"{protocol} Judge: score {'unusable' if found.score is None else found.score}{mode}{error}"
            parts.append(
                f'<div class="turn judge"><b>{esc(head)}</b><pre>{esc(found.rationale)}</pre>'
                f"{evidence_note(judge)}{_exemplars(judge, shown)}</div>"
            )
    return f"<details><summary>{esc(trait.name)}: {esc(' | '.join(summary))}</summary>{''.join(parts)}</details>"


def essay_block(run: RunData, essay: Essay, sources: Sources, shown: dict[str, str]) -> str:
    """A collapsible block per essay: the text, then every trait's debate and Judges."""
    refs = ", ".join(f"{trait_label(t.name)} {fmt(essay.reference(t, run.label_ties))}" for t in run.rubric.traits)
    for protocol in run.protocols:
        found = [sources.scores.get((protocol, essay.id, t.name)) for t in run.rubric.traits]
        refs += f" | {protocol} " + "/".join("—" if s is None or s.score is None else str(s.score) for s in found)
    traits = "".join(_trait_block(run, essay, t, sources, shown) for t in run.rubric.traits)
    return (
        f"<details><summary>essay {esc(essay.id)} — human reference: {esc(refs)}</summary>"
        f'<pre class="essay">{esc(essay.text)}</pre>{traits}</details>'
    )


def _appendix(shown: dict[str, str]) -> str:
    items = "".join(
        f'<div id="{esc("ex-" + eid)}"><h4>exemplar essay {esc(eid)}</h4><pre>{esc(text)}</pre></div>'
        for eid, text in sorted(shown.items())
    )
    return f"<h2>Exemplar essays</h2><details><summary>{len(shown)} essays shown to Judges</summary>{items}</details>"


def not_read_section(run: RunData) -> str:
    """The scores the run could not read, per protocol and cause, as its last finished job counted them (the
    lines ``madrag score`` ended with); nothing when every score was read."""
    if run.unusable is None:
        return (
            "<p class='muted'>note: this run's unread scores were not counted (a job counts them at its end: "
            "this run was stopped before one, or made before madrag kept the count)</p>"
        )
    lines = summary_lines(run.unusable)
    if not lines:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f"<h2>Scores not read</h2><ul>{items}</ul>"


PaperSection = Callable[[Evaluation], str]
"""What a paper's figures beside the run's are, as HTML, from the run's evaluation (the CLI's ``--paper`` gives
:func:`madrag.paper.beside_paper.paper_section`: the core knows no paper)."""


def page_head(run: RunData, evaluation: Evaluation, extra: str = "", paper: PaperSection | None = None) -> str:
    """The page up to its essays: the run, its agreement, plots, confusion matrices and ``extra``."""
    meta = evaluation.meta
    tables = "".join(
        f"<h3>{esc(t)}</h3><div class='scroll' tabindex='0' role='region' aria-label='{esc(t)}'>{html_table(f)}</div>"
        for t, f in display_tables(evaluation).items()
    )
    confusion = "".join(f"<h3>{esc(p)}</h3>{confusion_plot(run, p)}" for p in run.protocols)
    notes = "".join(f"<p class='muted'>note: {esc(n)}</p>" for n in evaluation.notes)
    title = f"madrag report: essay set {meta.get('essay_set')}, {len(run.essays)} essays"
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{STYLE}</style>"
        f"</head><body><h1>{esc(title)}</h1><p class='muted'>run {esc(run.run_dir)} · protocols "
        f"{esc(', '.join(run.protocols))} · {esc(meta.get('reference'))}</p>{notes}{not_read_section(run)}"
        f"<h2>Agreement with the human reference</h2>{qwk_plot(evaluation)}{tables}"
        f"{paper(evaluation) if paper is not None else ''}"
        f"<h2>Extreme-score subset</h2>{extreme_plot(evaluation)}"
        f"<h2>Score distributions</h2>{distribution_plot(run)}"
        f"<h2>Confusion matrices</h2>{confusion}{extra}"
        f"<h2>Essays</h2>"
    )


def page_tail(shown: dict[str, str]) -> str:
    """The page after its essays: the exemplar essays the Judges were shown (``shown``), once each."""
    return f"{_appendix(shown)}</body></html>"


ESSAYS_AT_ONCE = 500
"""How many essays' records the report holds at once while it writes their blocks."""


def write_essays(fh: IO[str], run: RunData, shown: dict[str, str]) -> None:
    """Every essay's block, written to ``fh`` a few essays at a time (their records read light, then dropped),
    so a large run's report holds its scores and one batch of records, not every record of the run."""
    scores = run.score_map()
    store = open_store(run.run_dir)
    try:
        for i in range(0, len(run.essays), ESSAYS_AT_ONCE):
            batch = run.essays[i : i + ESSAYS_AT_ONCE]
            sources = essay_sources(store, scores, [e.id for e in batch])
            fh.write("".join(essay_block(run, e, sources, shown) for e in batch))
    finally:
        store.close()


def write_report(
    run_dir: Path,
    bootstrap: int = 1000,
    seed: int = 0,
    out: Path | None = None,
    ties: TieRule | None = None,
    extra: str = "",
    paper: PaperSection | None = None,
) -> Path:
    """Evaluate the run and write ``<run>/report.html`` (or ``out``); returns the path written. Reference labels
    round ties by ``ties`` (default: the run's own rule); ``extra``: sections of higher layers, as HTML (the
    run's audit: :func:`madrag.audit.report.audit_html`); ``paper``: the MADRAG paper's figures beside the run's."""
    loaded = load_run(run_dir, judges=False)  # the scores; the records are read a batch of essays at a time
    rule = checked_ties(ties or loaded.reference_ties)
    run = replace(loaded, label_ties=rule)
    evaluation = evaluate_run(run, bootstrap=bootstrap, seed=seed, ties=rule)
    target = out or Path(run_dir) / "report.html"
    shown: dict[str, str] = {}
    with open_atomic(target) as fh:  # the whole page or none: a report killed midway leaves the old one
        fh.write(page_head(run, evaluation, extra, paper))
        write_essays(fh, run, shown)
        fh.write(page_tail(shown))
    return target

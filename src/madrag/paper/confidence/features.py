"""Token log-probability confidence features (the confidence paper, Section 3.3).

A response of ``T`` tokens gives the trajectory ``L = (l_1, ..., l_T)`` of its token log-probabilities.
Section 3.3.1 cuts it into windows: the full response, the first / last ``k`` tokens (fixed-length windows)
and the first / last ``floor(alpha * T)`` tokens (percentage windows, ``alpha`` in (0, 1]). Section 3.3.2
summarises each window by its mean, median, min, max, population variance and standard deviation, range
and the slope ``a`` of the least-squares line ``l_t ~ a t + b``. A window that the response is too short to
fill is *undefined*: its features are NaN, never padded or truncated.

Feature names are implementation identifiers (``first3_range``); :func:`feature_label` turns them into the
descriptive names the paper's tables use (Appendix B: "range of first 3 tokens", "median of final half").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from madrag.records import AgentRecord

STATISTICS: tuple[str, ...] = ("mean", "median", "min", "max", "var", "std", "range", "slope")
STATISTIC_LABELS: dict[str, str] = {s: s for s in STATISTICS} | {"var": "variance", "std": "standard deviation"}
META_COLUMNS: tuple[str, ...] = (
    *("key", "run_id", "protocol", "essay_id", "trait", "role", "round", "n_tokens", "truncated"),
)

_WINDOW_NAME = re.compile(r"(?P<kind>first|last)(?:(?P<pct>\d+(?:\.\d+)?)pct|(?P<k>\d+))")


@dataclass(frozen=True)
class Window:
    """A contiguous window of a log-probability trajectory (Section 3.3.1).

    ``kind="full"`` is the whole response; ``kind="first"``/``"last"`` with ``k`` is the fixed-length window
    of the first / last ``k`` tokens; with ``fraction`` (``alpha`` in (0, 1]) it is the percentage window of
    the first / last ``floor(alpha * T)`` tokens. Exactly one of ``k`` and ``fraction`` is set for
    first/last windows, neither for the full window.
    """

    kind: Literal["first", "last", "full"]
    k: int | None = None
    fraction: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("first", "last", "full"):
            raise ValueError(f"window kind must be 'first', 'last' or 'full', not {self.kind!r}")
        if self.kind == "full":
            if self.k is not None or self.fraction is not None:
                raise ValueError("a full window takes neither k nor fraction")
            return
        if (self.k is None) == (self.fraction is None):
            raise ValueError(f"a {self.kind} window needs exactly one of k and fraction")
        if self.k is not None and (isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1):
            raise ValueError(f"window size k must be a positive integer, not {self.k!r}")
        if self.fraction is not None and not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"window fraction must be in (0, 1], not {self.fraction!r}")

    @property
    def percent(self) -> float | None:
        """The fraction as a percentage (25.0 for 0.25), or None for a fixed-length / full window."""
        return None if self.fraction is None else round(self.fraction * 100.0, 6)

    @property
    def name(self) -> str:
        """Identifier used in feature names: ``full``, ``first3``, ``last10``, ``first25pct``, ``last50pct``."""
        if self.kind == "full":
            return "full"
        if self.k is not None:
            return f"{self.kind}{self.k}"
        return f"{self.kind}{self.percent:g}pct"

    @property
    def label(self) -> str:
        """Descriptive name as in the paper (Appendix B): ``first 3 tokens``, ``final half``, ``first 25%``."""
        if self.kind == "full":
            return "full response"
        if self.k is not None:
            return f"{self.kind} token" if self.k == 1 else f"{self.kind} {self.k} tokens"
        if self.fraction == 0.5:
            return "first half" if self.kind == "first" else "final half"
        return f"{self.kind} {self.percent:g}%"

    def size(self, n_tokens: int) -> int | None:
        """How many tokens this window holds in a response of ``n_tokens`` tokens; None when undefined.

        ``floor(alpha * T)`` is taken after rounding ``alpha * T`` to 9 decimals, so that binary floating
        point (``0.29 * 100 == 28.999...``) does not drop a token the paper's formula keeps.
        """
        if n_tokens <= 0:
            return None
        if self.kind == "full":
            return n_tokens
        if self.k is not None:
            return self.k if n_tokens >= self.k else None
        assert self.fraction is not None
        m = math.floor(round(self.fraction * n_tokens, 9))
        return m if m > 0 else None


_SIDES: tuple[Literal["first", "last"], ...] = ("first", "last")
DEFAULT_WINDOWS: tuple[Window, ...] = (
    Window("full"),
    *(Window(side, k=k) for side in _SIDES for k in (3, 5, 10, 20)),
    *(Window(side, fraction=f) for side in _SIDES for f in (0.1, 0.25, 0.5)),
)


def as_logprobs(logprobs: Sequence[float] | NDArray[np.float64]) -> NDArray[np.float64]:
    """The trajectory as a 1-D float array; ValueError when it is not 1-D or holds a non-finite value."""
    values = np.asarray(logprobs, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"log-probabilities must be a 1-D sequence, got shape {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"non-finite log-probability {values[bad[0]]} at token {int(bad[0])} (of {values.size})")
    return values


def window_values(logprobs: Sequence[float] | NDArray[np.float64], window: Window) -> NDArray[np.float64] | None:
    """The log-probabilities inside ``window`` (Section 3.3.1), or None when the window is undefined.

    ``W_first = (l_1, ..., l_m)`` and ``W_last = (l_{T-m+1}, ..., l_T)`` with ``m = k`` or
    ``m = floor(alpha * T)``. Undefined: an empty response, ``T < k``, or ``floor(alpha * T) == 0``.
    """
    values = as_logprobs(logprobs)
    m = window.size(values.size)
    if m is None:
        return None
    if window.kind == "last":
        return values[values.size - m :]
    return values[:m]


def window_statistics(values: NDArray[np.float64]) -> dict[str, float]:
    """Summary statistics of one window (Section 3.3.2), keyed by :data:`STATISTICS`.

    The variance is the population variance ``1/|W| sum (l - mu)^2`` as in the paper, ``std`` its root;
    ``slope`` is the least-squares slope ``a`` of ``l_t ~ a t + b`` over ``t = 1..|W|`` (NaN when ``|W| < 2``).
    """
    w = as_logprobs(values)
    if w.size == 0:
        raise ValueError("cannot summarise an empty window")
    mean = float(w.mean())
    var = float(np.mean((w - mean) ** 2))
    if w.size >= 2:
        t = np.arange(1, w.size + 1, dtype=np.float64)
        tc = t - t.mean()
        slope = float(tc @ (w - mean) / (tc @ tc))
    else:
        slope = math.nan
    lo, hi = float(w.min()), float(w.max())
    return {
        "mean": mean,
        "median": float(np.median(w)),
        "min": lo,
        "max": hi,
        "var": var,
        "std": math.sqrt(var),
        "range": hi - lo,
        "slope": slope,
    }


def feature_names(windows: Sequence[Window] = DEFAULT_WINDOWS) -> list[str]:
    """Feature names ``f"{window.name}_{stat}"`` in a stable order: windows as given, then :data:`STATISTICS`."""
    names = [w.name for w in windows]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate windows: {names}")
    return [f"{name}_{stat}" for name in names for stat in STATISTICS]


def trajectory_features(
    logprobs: Sequence[float] | NDArray[np.float64], windows: Sequence[Window] = DEFAULT_WINDOWS
) -> dict[str, float]:
    """Every statistic of every window of one trajectory (Section 3.3); NaN for the undefined windows."""
    values = as_logprobs(logprobs)
    out = dict.fromkeys(feature_names(windows), math.nan)
    for window in windows:
        w = window_values(values, window)
        if w is not None:
            out.update({f"{window.name}_{stat}": v for stat, v in window_statistics(w).items()})
    return out


def window_from_name(name: str) -> Window:
    """The window a :attr:`Window.name` stands for; ValueError for a name no window has."""
    if name == "full":
        return Window("full")
    match = _WINDOW_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"unknown window name {name!r}")
    kind: Literal["first", "last"] = "first" if match["kind"] == "first" else "last"
    if match["k"] is not None:
        return Window(kind, k=int(match["k"]))
    return Window(kind, fraction=float(match["pct"]) / 100.0)


def parse_feature(name: str) -> tuple[Window, str]:
    """Split a feature name such as ``first3_range`` into its window and statistic; ValueError if unknown."""
    window_name, _, stat = name.rpartition("_")
    if stat not in STATISTICS or not window_name:
        raise ValueError(f"unknown feature name {name!r}: expected '<window>_<{'|'.join(STATISTICS)}>'")
    try:
        return window_from_name(window_name), stat
    except ValueError as exc:
        raise ValueError(f"unknown feature name {name!r}: {exc}") from None


def feature_label(name: str) -> str:
    """Descriptive, paper-style name of a feature (Appendix B): ``first3_range`` -> "range of first 3 tokens"."""
    window, stat = parse_feature(name)
    return f"{STATISTIC_LABELS[stat]} of {window.label}"


def record_logprobs(record: AgentRecord) -> list[float] | None:
    """The token log-probability trajectory of one agent response; None when the backend gave none.

    A record whose ``tokens`` is None or empty has no trajectory (its logprobs were not returned).
    """
    if not record.tokens:
        return None
    return [t.logprob for t in record.tokens]


def features_frame(
    records: Iterable[AgentRecord], windows: Sequence[Window] = DEFAULT_WINDOWS
) -> tuple[pd.DataFrame, int]:
    """One row of confidence features (Section 3.3) per agent response that has token log-probabilities.

    Columns: :data:`META_COLUMNS` (``key``, ``run_id``, ``protocol``, ``essay_id``, ``trait``, ``role``,
    ``round``, ``n_tokens``, ``truncated``), then :func:`feature_names`. Records without logprobs are skipped,
    never imputed; their count is returned alongside the frame. A non-finite logprob raises ValueError naming
    the record key. A response cut by the token limit is flagged (``truncated``) and its late windows
    (``last ...``) are NaN: the last tokens of a cut answer are not the answer's ending.
    """
    columns = [*META_COLUMNS, *feature_names(windows)]
    rows: list[dict[str, object]] = []
    skipped = 0
    for record in records:
        logprobs = record_logprobs(record)
        if logprobs is None:
            skipped += 1
            continue
        try:
            feats = trajectory_features(logprobs, windows)
            if record.truncated:
                late = [f"{w.name}_{stat}" for w in windows if w.kind == "last" for stat in STATISTICS]
                feats.update(dict.fromkeys(late, math.nan))
        except ValueError as exc:
            raise ValueError(f"record {record.key!r} (run {record.run_id!r}): {exc}") from exc
        meta = {c: getattr(record, c) for c in META_COLUMNS if c != "n_tokens"}
        rows.append({**meta, "n_tokens": len(logprobs), **feats})
    return pd.DataFrame(rows, columns=columns), skipped


def feature_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` that are confidence features (valid feature names), in frame order.

    Works on a :func:`features_frame` and on one merged with other columns (targets, metadata).
    """
    out: list[str] = []
    for column in frame.columns:
        try:
            parse_feature(str(column))
        except ValueError:
            continue
        out.append(str(column))
    return out

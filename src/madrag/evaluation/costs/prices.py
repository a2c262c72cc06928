"""Price tables: dollars per million prompt and completion tokens per model name, ``"*"`` for any other model.

A model missing from the table is unpriced: its calls are counted, never priced
(:attr:`madrag.evaluation.costs.tally.Tally.unpriced_calls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from madrag.errors import InputError

ANY_MODEL = "*"
"""The price table entry for models not listed."""
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    prompt: float
    completion: float


Prices = Mapping[str, Price]
"""A price table: model name (or :data:`ANY_MODEL`) -> price."""


def price_for(model: str, prices: Prices | None, asked: str | None = None) -> Price | None:
    """The model's price (the model the answers named), else the price of the model ``asked`` for (OpenAI's API
    answers ``gpt-4o-mini`` as ``gpt-4o-mini-2024-07-18``), else the table's :data:`ANY_MODEL` price; None without
    a table or a matching entry."""
    if prices is None:
        return None
    return prices.get(model) or (prices.get(asked) if asked else None) or prices.get(ANY_MODEL)


def load_prices(path: str | Path) -> dict[str, Price]:
    """A YAML or JSON mapping ``model -> {prompt: $/1M tokens, completion: $/1M tokens}``."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))  # JSON is YAML
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read price table {p}: {exc}") from exc
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"price table {p} must map model names to {{prompt: ..., completion: ...}}")
    prices = {}
    for model, entry in raw.items():
        if not isinstance(entry, dict) or set(entry) != {"prompt", "completion"}:
            raise InputError(f"price table {p}: {model!r} needs exactly 'prompt' and 'completion' ($ per 1M tokens)")
        try:
            prompt, completion = float(entry["prompt"]), float(entry["completion"])
        except (TypeError, ValueError) as exc:
            raise InputError(f"price table {p}: {model!r} prices must be numbers") from exc
        if prompt < 0 or completion < 0:
            raise InputError(f"price table {p}: {model!r} prices must not be negative")
        prices[str(model)] = Price(prompt, completion)
    return prices

"""ASAP anonymization placeholders (``@CAPS1``, ``@PERSON2``, ``@NUM3`` ...): finding and masking them.

The ASAP essays replace names, numbers, dates and places by an ``@`` followed by a capitalised kind and an
optional number. This module is the one definition of that token for the prompts (masking), the feature
baseline (counting kinds) and the error export (listing them).
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"@([A-Z]+)(\d*)")
"""One placeholder token; group 1 is its kind (``CAPS``), group 2 its number (may be empty)."""

_MASKS = {
    "PERSON": "[person]",
    "CAPS": "[name]",
    "NUM": "[number]",
    "DATE": "[date]",
    "TIME": "[time]",
    "MONTH": "[month]",
    "LOCATION": "[place]",
    "CITY": "[city]",
    "STATE": "[state]",
    "ORGANIZATION": "[organization]",
    "MONEY": "[amount]",
    "PERCENT": "[percent]",
    "EMAIL": "[email]",
    "DR": "[doctor]",
}


MASK_WORDS: tuple[str, ...] = (*_MASKS.values(), "[name]")
"""Every neutral word a masked essay shows in place of a placeholder (``[person]``, ``[name]`` ...)."""


def placeholders(text: str) -> list[str]:
    """ASAP anonymization placeholders in ``text`` in order of appearance (``@CAPS1``, ``@NUM2`` ...)."""
    return [m.group(0) for m in PLACEHOLDER.finditer(text)]


def mask_placeholders(text: str) -> str:
    """Replace ``@CAPS1``-style anonymization placeholders by neutral bracketed words."""
    return PLACEHOLDER.sub(lambda m: _MASKS.get(m.group(1), "[name]"), text)

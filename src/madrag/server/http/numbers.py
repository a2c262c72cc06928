"""The one reader of a whole number a form field, a query parameter or a header carries.

``str.isdigit`` is no test of what ``int`` reads: a superscript two and an Arabic-Indic one are digits to it and
``int`` refuses them, and ``int`` refuses a string of more than 4,300 digits; each was a 500. A number here is
ASCII digits (an optional sign before them) and at most :data:`MAX_DIGITS` of them, read without ever calling
``int`` on anything else; anything else is no number (``None``), or, where the request cannot go on without it,
a 400 naming the field.
"""

from __future__ import annotations

import re

from madrag.server.http.errors import ApiError

MAX_DIGITS = 18
"""The most digits a number of a request may have (every count, score and page of madrag is far smaller)."""
_WHOLE = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")  # [0-9]: ASCII only, where \d takes any script's digits


def whole_number(raw: object) -> int | None:
    """The integer ``raw`` spells (spaces around it allowed); None for anything else: empty, no ASCII digits,
    too many of them, a fraction, a superscript."""
    text = raw.strip() if isinstance(raw, str) else ""
    return int(text) if _WHOLE.fullmatch(text) else None


def required_number(raw: object, field: str, what: str = "a whole number") -> int:
    """The integer ``raw`` spells; a 400 naming ``field`` when it spells none."""
    found = whole_number(raw)
    if found is None:
        shown = raw.strip()[:20] if isinstance(raw, str) else ""
        raise ApiError(400, f"{field} must be {what}, not {shown!r}", field)
    return found

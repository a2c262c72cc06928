"""A time span in words, as every surface says it (the web app's time left, a dry run's estimate)."""

from __future__ import annotations


def duration(seconds: float | None) -> str:
    """A time span in words: "about 40 s", "about 12 min", "about 2 h 5 min" ("" when unknown)."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"about {minutes} min" if minutes < 90 else f"about {minutes // 60} h {minutes % 60} min"

"""What every LMS client of :mod:`madrag.lms` shares: its errors (one line each for the CLI), how often a failed
call is retried (:class:`Backoff`) and the retry loop itself (:func:`with_retries`): a 429, a 5xx or a dropped
connection retried with backoff, a refusal (401 / 403 / 404) turned at once into the one sentence its client
words, anything else one line naming what madrag was doing. Canvas (:mod:`.client`) and Google Classroom
(:mod:`.classroom_client`) each say which of their answers is which."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from madrag.errors import MadragError

T = TypeVar("T")


class LmsError(MadragError):
    """The LMS refused or could not answer a request; one line saying what to do."""


class LmsTransient(LmsError):
    """An answer a retry may change (429, 5xx, a dropped connection), after the retries ran out."""


@dataclass(frozen=True)
class Backoff:
    """How often and how long a failed call is retried: ``tries`` in all, waiting ``first_s``, doubled each
    time, at most ``max_s``."""

    tries: int = 5
    first_s: float = 1.0
    max_s: float = 30.0


@dataclass(frozen=True)
class Judge:
    """How one LMS's failures read: its name, whether a failure is one a retry may fix, and the sentence of a
    refusal (None for anything else)."""

    lms: str
    transient: Callable[[Exception], bool]
    refusal: Callable[[Exception, str], LmsError | None]

    def failed(self, exc: Exception, what: str) -> LmsError:
        """The one line of a failure that is not retried (or no longer): the refusal's, else a transient's or
        any other error's."""
        refused = None if self.transient(exc) else self.refusal(exc, what)
        if refused is not None:
            return refused
        if self.transient(exc):
            return LmsTransient(f"{self.lms} did not answer while {what} ({str(exc)[:200]})")
        return LmsError(f"{self.lms} answered an error while {what}: {str(exc)[:300]}")


def with_retries(what: str, fn: Callable[[], T], judge: Judge, backoff: Backoff, sleep: Callable[[float], None]) -> T:
    """``fn()``, retried on what a retry may fix; a refusal, another error or the last failure as one LmsError."""
    wait = backoff.first_s
    for attempt in range(1, backoff.tries + 1):
        try:
            return fn()
        except Exception as exc:  # each client's and its transport's exceptions
            if not judge.transient(exc):
                raise judge.failed(exc, what) from None
            if attempt == backoff.tries:
                raise LmsTransient(
                    f"{judge.lms} did not answer while {what} after {attempt} tries ({str(exc)[:200]}): try again later"
                ) from None
            sleep(wait)
            wait = min(wait * 2, backoff.max_s)
    raise AssertionError("unreachable")

"""Checks on what an agent's answer says about the essay: quoted evidence and placeholders cited as errors.

The MADRAG paper's error analysis (Table 3) names two failure mechanisms these checks measure:

* C3, a spurious debate claim accepted: an Advocate or Skeptic "quotes" the essay with words the essay does not
  contain and the Judge builds on it. :func:`extract_quotes` finds the quoted spans of an answer and
  :func:`verify_quote` looks each one up in the essay: exact, then with case, whitespace, quote marks and
  surrounding punctuation normalised, then near-exact (difflib ratio at least :data:`FUZZY_THRESHOLD` against an
  essay window of about the quote's length). A quote with an ellipsis is verified piece by piece, in order.
  Placeholders (``@CAPS1``, or the neutral word a masked essay shows) match any placeholder: a model that writes
  ``@CAPS2`` for the essay's ``@CAPS1`` has not invented anything.
* C6, anonymization distortion: :func:`placeholder_error_mentions` counts the sentences of an answer that cite
  a placeholder together with an error word ("misspelled @CAPS1", "the random [name] is confusing").

Everything here is a pure function of text; :func:`check_answer` makes the per-call counts a record keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from madrag.agents.placeholders import MASK_WORDS, PLACEHOLDER
from madrag.records import EvidenceCounts

MIN_QUOTE_WORDS = 3
"""Shorter quoted spans ("vivid", "Ideas and Content") name a word or a rubric term rather than cite the essay,
so they are not counted as evidence."""
MAX_QUOTE_CHARS = 600
"""Longer "quoted" spans are unbalanced quote marks, not citations."""
FUZZY_THRESHOLD = 0.88
"""difflib ratio from which a quote counts as near-exact: a corrected misspelling or a dropped comma in a
ten-word quote keeps the ratio above 0.95, one changed word of a five-word quote gives about 0.85, and a
paraphrase (several words changed or reordered) stays below 0.8. 0.88 accepts copy slips, not rewording."""

_DOUBLE = re.compile(r'"([^"\n]{1,600}?)"')
_CURLY = re.compile(r"\u201c([^\u201d\n]{1,600}?)\u201d")
# a single-quoted span only when clearly a quote: the opening mark starts a word (not an apostrophe inside one),
# the closing mark ends one and is not followed by a letter (not "writer's"), no space just inside either mark
_SINGLE = re.compile(r"(?<![\w'])['\u2018](?=\S)([^'\u2018\u2019\n]{1,600}?)(?<=\S)['\u2019](?![\w])")
_ELLIPSIS = re.compile(r"\s*(?:\[\s*(?:\.\.\.|\u2026)\s*\]|\.\.\.+|\u2026)\s*")
_MASKED = re.compile("|".join(re.escape(w) for w in sorted(set(MASK_WORDS), key=len, reverse=True)))
_SLOT = "\x00"  # what any placeholder (or masked word) becomes before comparing
_PUNCT_EDGES = " \t\n.,;:!?\"'\u2018\u2019\u201c\u201d()-"
_QUOTE_CHARS = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": "-"})

_ERROR_WORDS = re.compile(
    r"\b(?:errors?|mistakes?|misspell\w*|spelling|spelled|capitali[sz]\w*|typos?|grammar|grammatical|"
    r"incorrect\w*|wrong\w*|unclear|confus\w*|awkward\w*|odd\w*|strange\w*|random\w*|nonsens\w*|"
    r"meaningless|inconsisten\w*|distract\w*|garbled|unexplained)\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(
    r"\b(?:not|never|no|aren't|isn't|without)\b[^.!?]{0,40}\b(?:errors?|mistakes?|misspell\w*)\b"
    r"|\bcorrectly written\b|\bas (?:intended|placeholders?)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")


@dataclass(frozen=True)
class QuoteVerdict:
    """One quoted span and how it was found in the essay (``how`` is None when it was not)."""

    quote: str
    how: str | None  # "exact", "normalised", "fuzzy" or None

    @property
    def verified(self) -> bool:
        """Whether the quote was found in the essay."""
        return self.how is not None


def extract_quotes(text: str) -> list[str]:
    """The quoted spans of ``text`` that cite something (at least :data:`MIN_QUOTE_WORDS` words), in order:
    "double", \u201ccurly\u201d and 'single' quotes (single only where the marks cannot be apostrophes)."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for pattern in (_DOUBLE, _CURLY, _SINGLE):
        for m in pattern.finditer(text):
            start, end = m.span()
            if any(start < b and a < end for a, b in taken):
                continue  # a quote inside a quote already taken ('inner' within "outer")
            quote = m.group(1).strip()
            if len(quote.split()) >= MIN_QUOTE_WORDS and len(quote) <= MAX_QUOTE_CHARS:
                found.append((start, quote))
                taken.append((start, end))
    return [quote for _, quote in sorted(found)]


def normalise(text: str) -> str:
    """Text as quotes are compared: placeholders and masked words as one slot, typographic quotes plain,
    lower case, whitespace runs as one space."""
    text = _MASKED.sub(_SLOT, PLACEHOLDER.sub(_SLOT, text)).translate(_QUOTE_CHARS).lower()
    return " ".join(text.split())


def _pieces(quote: str) -> list[str]:
    """A quote cut at its ellipses, each piece normalised and trimmed of edge punctuation (empty ones dropped)."""
    return [p for p in (normalise(part).strip(_PUNCT_EDGES) for part in _ELLIPSIS.split(quote)) if p]


def _best_ratio(piece: str, essay_words: list[str]) -> tuple[float, int]:
    """The best difflib ratio of ``piece`` against essay windows of about its length, and where that window
    ends (a word index)."""
    n = len(piece.split())
    best, best_end = 0.0, 0
    matcher = SequenceMatcher(autojunk=False)
    matcher.set_seq2(piece)
    for size in {max(1, n - 1), n, n + 1}:
        for start in range(max(1, len(essay_words) - size + 1)):
            window = " ".join(essay_words[start : start + size])
            matcher.set_seq1(window)
            if matcher.real_quick_ratio() < best or matcher.quick_ratio() < best:
                continue
            ratio = matcher.ratio()
            if ratio > best:
                best, best_end = ratio, start + size
    return best, best_end


def verify_quote(quote: str, essay: str, threshold: float = FUZZY_THRESHOLD, fuzzy: bool = True) -> QuoteVerdict:
    """Whether ``quote`` is in ``essay``: exactly, after normalising (case, spacing, quote marks, placeholders,
    edge punctuation; ellipsis pieces in order), or near-exactly (every piece at least ``threshold``; not tried
    unless ``fuzzy``)."""
    if quote in essay:
        return QuoteVerdict(quote, "exact")
    pieces = _pieces(quote)
    if not pieces:
        return QuoteVerdict(quote, None)
    flat = normalise(essay)
    position = 0
    for piece in pieces:
        position = flat.find(piece, position)
        if position < 0:
            break
        position += len(piece)
    else:
        return QuoteVerdict(quote, "normalised")
    if not fuzzy:
        return QuoteVerdict(quote, None)
    words = flat.split()
    offset = 0
    for piece in pieces:
        ratio, end = _best_ratio(piece, words[offset:])
        if ratio < threshold:
            return QuoteVerdict(quote, None)
        offset += end
    return QuoteVerdict(quote, "fuzzy")


def placeholder_error_mentions(text: str) -> int:
    """How many sentences of ``text`` cite an anonymization placeholder (``@CAPS1`` or a masked word) as an
    error: the placeholder and an error word in one sentence, unless the sentence says it is not one."""
    count = 0
    for m in _SENTENCE.finditer(text):
        sentence = m.group(0)
        if not (PLACEHOLDER.search(sentence) or _MASKED.search(sentence)):
            continue
        if _ERROR_WORDS.search(sentence) and not _NEGATED.search(sentence):
            count += 1
    return count


def check_answer(text: str, essay: str, quotes: bool = True) -> EvidenceCounts:
    """The per-call counts a record keeps: quotes found, verified and unverified (with the unverified ones), when
    ``quotes``; and always the placeholder-as-error mentions."""
    verdicts = [verify_quote(q, essay) for q in extract_quotes(text)] if quotes else []
    unverified = [v.quote for v in verdicts if not v.verified]
    return EvidenceCounts(
        checked=quotes,
        quotes_found=len(verdicts),
        quotes_verified=len(verdicts) - len(unverified),
        quotes_unverified=len(unverified),
        unverified_quotes=unverified,
        placeholder_errors=placeholder_error_mentions(text),
    )

"""Reading the per-trait Judge's score from its text: its last own ``Final score: N`` statement (the MADRAG paper's
A.5).

The MADRAG paper's A.5 parses ``Final Score: {integer}`` with a regular expression. Chat models write that statement in
many ways, and a Judge's answer also holds words that are not its own; the rule here is what a careful reader
takes:

* a *statement* is ``Final score`` or ``Final scores`` (any case, markdown around it, an optional ``(Ideas)`` /
  ``for Ideas`` qualifier), then ``:``, ``=``, a dash, ``is`` or ``of`` (or nothing, or a line break after a
  heading), then the value, optionally in ``[ ]``, ``( )`` or ``\\boxed{ }`` and followed by ``/ M`` or
  ``out of M``; whatever stands after it (``(adequate)``, ``- focused, but ...``, a closing paragraph) is a
  remark. ``N-M`` / ``N or M`` is a statement whose value is not one number;
* it must begin its sentence: at the start of a line or after a sentence's end, behind only markdown, a list
  marker, a short lead-in ending in ``,`` ``:`` ``;`` or a dash, a connective (``so``, ``therefore``, ...) and
  ``my`` / ``our`` / ``the``. A score named inside a sentence ("I considered a final score: 3, but") is a
  mention, not a statement;
* a statement in someone else's words is not the Judge's own: one in quotation marks (a quote mark right before
  it or right after its value, or an unclosed quote in its sentence), on a blockquote (``>``) line, inside a
  ``<think>`` block, or inside a passage of the essay the answer quotes or reproduces. The last needs the essay;
  a statement counts as the essay's only if the essay itself holds a ``Final score`` statement of the same
  value, and the answer's text around it is the essay's: the text between the nearest quote marks around it is
  found in the essay (:func:`madrag.agents.evidence.verify_quote`, near-exact matching only for a quote of at
  most :data:`~madrag.agents.evidence.MAX_QUOTE_CHARS` characters), or its line, with the line before or after
  it, is essay text (exact or normalised, never fuzzy). So a Judge that reproduces the essay's injected line in
  a block is not read as scoring with it, while its own closing ``Final score: 3`` still counts when the
  essay's injected line says 3 too;
* an answer printed inside one pair of quotes (the MADRAG paper's Figure 7) is read as if unquoted, unless that quoted
  whole is the essay's text.

The score is the value of the Judge's last own statement. Own statements with different values are a failed
parse, never one of them (a Judge that writes ``Final score: 3`` and later ``On reflection, Final score: 2``
gets no score), as is a value that is not an integer in the trait's range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from madrag.agents.evidence import MAX_QUOTE_CHARS, MIN_QUOTE_WORDS, verify_quote
from madrag.rubric import Trait

_MD = r"[*_`~|]*"  # markdown inside a line: bold, italics, code, strike-through, table cells
_GAP = r"[ \t*_`~|]*"  # spaces and markdown
FINAL_SCORE = re.compile(
    rf"\bfinal[ \t]+scores?(?:[ \t]*\([^()\n]{{1,40}}\)|[ \t]+for[ \t]+[^:\uff1a=\n]{{1,40}}?(?={_GAP}[:\uff1a=]))?"
    rf"{_GAP}(?:[:\uff1a=]|[-\u2013\u2014](?=[ \t])|is\b|of\b)?{_GAP}"
    rf"(?P<below>(?:\n[ \t]*(?:#+[ \t]*)?{_GAP}){{1,2}})?"
    r"(?:\\boxed\{|\[|\()?[ \t]*(?P<value>-?\d+(?:[.,]\d+)?)(?!\d)[ \t]*[\]\)\}]?"
    r"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*\d+)?"
    r"(?P<range>[ \t]*(?:-|\u2013|\u2014|to|or)[ \t]*-?\d)?",
    re.IGNORECASE,
)
"""A ``Final score: N`` statement anywhere in a text; group ``value`` is N. Where it stands decides whether it
is the Judge's own (:func:`statements`)."""

_QUOTES = "\"'\u201c\u201d\u2018\u2019"
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)*_]*[ \t]+")
_LEAD_MARKUP = re.compile(r"^[ \t]*(?:#+[ \t]*)?(?:(?:[-+\u2022]|\d+[.)])[ \t]+)?")
_LEAD_OK = re.compile(
    r"(?:[^\n]{0,80}?[,:;\-\u2013\u2014])?[ \t]*"
    r"(?:(?:and|but|so|thus|therefore|hence|overall|ultimately|finally|then|accordingly)\b[ \t]*)?"
    r"(?:(?:my|our|the)\b)?",
    re.IGNORECASE,
)
_AFTER_CLOSE = re.compile(r"[ \t*_.]*[\"'\u201d\u2019]")
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_REMAINDER = re.compile(r"[ \t*_`~|.]*(?:\n|\Z)")


@dataclass(frozen=True)
class Statement:
    """One ``Final score`` statement of an answer: its raw value (``"2"``, ``"2.5"``, ``"2-3"``), where the value
    starts, where the statement's sentence starts (with the markdown or list marker before it on its line) and
    where the statement ends, and why it is not the Judge's own (None when it is)."""

    raw: str
    value_at: int
    start: int
    end: int
    not_own: str | None

    @property
    def own(self) -> bool:
        """Whether the statement is the Judge's own."""
        return self.not_own is None

    @property
    def value(self) -> float | None:
        """The stated number (None when the value is not one number, as in ``2-3``)."""
        try:
            return float(self.raw.replace(",", "."))
        except ValueError:
            return None


def _unwrapped(text: str, essay: str | None) -> str:
    """``text`` with the one pair of quotes around the whole of it blanked (an answer printed in quotes, the MADRAG
    paper
    Figure 7), unless the quoted whole is the essay's text; offsets are kept."""
    body = text.strip()
    if len(body) < 2 or body[0] not in '"\u201c' or body[-1] not in '"\u201d':
        return text
    if essay is not None and verify_quote(body[1:-1], essay, fuzzy=False).verified:
        return text
    first, last = text.index(body[0]), text.rindex(body[-1])
    return f"{text[:first]} {text[first + 1 : last]} {text[last + 1 :]}"


def _sentence_start(text: str, at: int) -> int:
    """Where the sentence holding offset ``at`` starts on its line: the line's start when only markdown or a
    list marker stands before ``at``, else just after the last sentence end before it."""
    line_start = text.rfind("\n", 0, at) + 1
    line = text[line_start:at]
    if re.fullmatch(_GAP, _LEAD_MARKUP.sub("", line, count=1)):
        return line_start
    ends = list(_SENTENCE_END.finditer(line))
    return line_start + (ends[-1].end() if ends else 0)


def _essay_values(essay: str | None) -> set[float]:
    """The values of the ``Final score`` statements the essay itself holds (an injected score line)."""
    found = set()
    for m in FINAL_SCORE.finditer(essay or ""):
        if not m.group("range"):
            found.add(float(m.group("value").replace(",", ".")))
    return found


def _is_mention(text: str, line_start: int, at: int) -> bool:
    """Whether the marker at ``at`` is named inside a sentence (or inside an unclosed quote) rather than
    beginning it."""
    line = text[line_start:at]
    ends = list(_SENTENCE_END.finditer(line))
    lead = line[ends[-1].end() :] if ends else line
    lead = re.sub(_MD, "", _LEAD_MARKUP.sub("", lead, count=1)).strip()
    if lead.count('"') % 2 or lead.count("\u201c") > lead.count("\u201d"):
        return True
    return _LEAD_OK.fullmatch(lead) is None


def _is_quoted(text: str, line_start: int, at: int, end: int) -> bool:
    """Whether the statement at ``at``..``end`` is in quotation marks or on a blockquote line."""
    if text[line_start:].lstrip().startswith(">"):
        return True
    before = text[line_start:at].rstrip(" \t*_")
    return (bool(before) and before[-1] in _QUOTES) or _AFTER_CLOSE.match(text, end) is not None


def _lines_around(text: str, at: int) -> tuple[str, str, str]:
    """The line holding offset ``at`` and the nearest non-blank lines before and after it."""
    start = text.rfind("\n", 0, at) + 1
    stop = text.find("\n", at)
    stop = len(text) if stop < 0 else stop
    before = [ln for ln in text[:start].splitlines() if ln.strip()]
    after = [ln for ln in text[stop:].splitlines() if ln.strip()]
    return (before[-1] if before else ""), text[start:stop], (after[0] if after else "")


def _from_essay(text: str, at: int, end: int, essay: str) -> bool:
    """Whether the statement at ``at``..``end`` lies in a passage of ``essay`` the answer quotes (the text between
    the nearest quote marks around it is found in the essay) or reproduces (its line, with the line before or
    after it, is essay text, exact or normalised)."""
    opening = max(text.rfind('"', 0, at), text.rfind("\u201c", 0, at))
    closing = min((i for i in (text.find('"', end), text.find("\u201d", end)) if i >= 0), default=-1)
    if opening >= 0 and closing >= 0:
        quoted = text[opening + 1 : closing]
        if verify_quote(quoted, essay, fuzzy=len(quoted) <= MAX_QUOTE_CHARS).verified:
            return True
    previous, line, following = _lines_around(text, at)
    need = len(text[at:end].split()) + MIN_QUOTE_WORDS
    for window in (line, f"{previous}\n{line}", f"{line}\n{following}"):
        if len(window.split()) >= need and verify_quote(window.strip(), essay, fuzzy=False).verified:
            return True
    return False


def _why_not_own(text: str, m: re.Match[str], essay: str | None, essay_values: set[float]) -> str | None:
    """Why the statement matched by ``m`` is not the Judge's own (None when it is)."""
    at, end = m.start(), m.end()
    line_start = text.rfind("\n", 0, at) + 1
    if m.group("below") and _REMAINDER.match(text, end) is None:
        return "a heading followed by more than a score"
    if any(t.start() <= at < t.end() for t in _THINK.finditer(text)):
        return "in a <think> block"
    if _is_quoted(text, line_start, at, end):
        return "quoted"
    if _is_mention(text, line_start, at):
        return "named inside a sentence"
    value = float(m.group("value").replace(",", "."))
    if essay is not None and value in essay_values and _from_essay(text, at, end, essay):
        return "in a passage of the essay"
    return None


def statements(text: str, essay: str | None = None) -> list[Statement]:
    """Every ``Final score`` statement of ``text`` in order, each with why it is not the Judge's own (see the
    module docstring); ``essay``, the essay the Judge saw, lets a statement the answer quotes or reproduces
    from it be told apart."""
    read = _unwrapped(text, essay)
    essay_values = _essay_values(essay)
    found = []
    for m in FINAL_SCORE.finditer(read):
        start = _sentence_start(read, m.start())
        raw = read[m.start("value") : m.end("range")] if m.group("range") else m.group("value")
        why = _why_not_own(read, m, essay, essay_values)
        found.append(Statement(raw=raw, value_at=m.start("value"), start=start, end=m.end(), not_own=why))
    return found


def final_statement(text: str, essay: str | None = None) -> Statement | None:
    """The Judge's last own ``Final score`` statement (None when there is none)."""
    own = [s for s in statements(text, essay) if s.own]
    return own[-1] if own else None


def find_final_score(text: str, essay: str | None = None) -> tuple[str | None, int]:
    """The raw value of the Judge's last own ``Final score`` statement and the offset where the value starts
    ((None, -1) when there is none)."""
    last = final_statement(text, essay)
    return (last.raw, last.value_at) if last is not None else (None, -1)


def parse_score(text: str, trait: Trait, essay: str | None = None) -> tuple[int | None, str | None]:
    """(score, problem): the value of the Judge's last own ``Final score`` statement if it is an integer in the
    trait's range. Own statements with two different values are a failed parse, never one of them."""
    found = [s for s in statements(text, essay) if s.own]
    if not found:
        return None, "no 'Final score: N' line"
    values = list(dict.fromkeys(s.value if s.value is not None else s.raw for s in found))
    if len(values) > 1:
        return None, "two different closing scores: " + ", ".join(
            f"{v:g}" if isinstance(v, float) else v for v in values
        )
    last = found[-1]
    value = last.value
    if value is None or not value.is_integer():
        return None, f"score {last.raw} is not an integer"
    if not trait.contains(value):
        return None, f"score {last.raw} outside [{trait.min}, {trait.max}]"
    return int(value), None


def rationale(text: str, essay: str | None = None) -> str:
    """The Judge's rationale (the MADRAG paper's A.5): the text before its last own ``Final score`` statement; when the
    statement opens the answer (score first), the text after it; the whole answer when it has none."""
    last = final_statement(text, essay)
    if last is None:
        return text.strip()
    return text[: last.start].strip() or text[last.end :].strip()

"""The fixed English word lists the essay features count against (:mod:`madrag.paper.baselines.features`).

Subordinators and relative pronouns, discourse connectives by category, stop words, pronouns, and the spelling
lexicon shipped inside the PyPI package ``pyspellchecker``. None depends on the essays, so no feature can leak
information across folds.
"""

from __future__ import annotations

import functools

from madrag.errors import MadragError

SUBORDINATORS = frozenset(
    "after although as because before if once since than that though unless until when whenever where whereas "
    "wherever whether while who whom whose which".split()
)


def _phrases(text: str) -> tuple[str, ...]:
    """Words and phrases written one after another, separated by ", "."""
    return tuple(text.split(", "))


CONNECTIVES: dict[str, tuple[str, ...]] = {
    "addition": _phrases("also, furthermore, moreover, in addition, additionally, besides, as well as, another"),
    "contrast": _phrases(
        "but, however, although, though, yet, instead, whereas, on the other hand, nevertheless, despite, otherwise"
    ),
    "cause": _phrases("because, since, so, therefore, thus, as a result, consequently, hence, due to"),
    "sequence": _phrases(
        "first, second, third, then, next, after, afterwards, before, finally, later, meanwhile, eventually, "
        "suddenly, when, while, until, at last, soon"
    ),
    "summary": _phrases(
        "in conclusion, overall, for example, for instance, in fact, in the end, such as, especially, of course, "
        "to sum up"
    ),
}
STOPWORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before being below between "
    "both but by can could did do does doing down during each few for from further had has have having he her "
    "here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not "
    "now of off on once only or other our ours ourselves out over own same she should so some such than that the "
    "their theirs them themselves then there these they this those through to too under until up very was we "
    "were what when where which while who whom why will with would you your yours yourself yourselves "
    "i'm it's don't didn't was wasn't got get went go going said".split()
)
PRONOUNS = {"first_person": {"i", "me", "my", "mine", "myself", "we", "us", "our"}, "second_person": {"you", "your"}}


@functools.lru_cache(maxsize=1)
def english_lexicon() -> frozenset[str]:
    """The lowercase English word list shipped inside ``pyspellchecker`` (about 160k words incl. contractions)."""
    try:
        from spellchecker import SpellChecker
    except ImportError as exc:
        raise MadragError("the spelling features need pyspellchecker: pip install pyspellchecker") from exc
    return frozenset(str(w) for w in SpellChecker(language="en").word_frequency.dictionary)

"""Hand-crafted essay features for the supervised FeatEng-RF-style baseline (the MADRAG paper, Appendix C).

Mathias and Bhattacharyya (2020) score ASAP traits with a Random Forest over length, punctuation, syntax,
style and cohesion features. This module computes a comparable, dependency-light set (no parser, no tagger):

* length: characters, words, sentences, paragraphs, word-length mean/std, short/long word shares;
* punctuation: counts and per-word rates of each mark, spacing errors around marks, repeated marks;
* spelling: out-of-vocabulary (OOV) words against the English word list shipped inside the PyPI package
  ``pyspellchecker`` (a fixed list, so the feature never sees another essay and cannot leak across folds; it and
  the other word lists are :mod:`madrag.paper.baselines.lexicon`);
* syntax/complexity proxies: sentence-length mean/std/max, commas and subordinators/relative pronouns per
  sentence, long and very short sentences, capitalisation of sentence starts, syllables and Flesch scores;
* style/lexical diversity: type-token ratio, root TTR, moving-average TTR (window 50), MTLD, stop-word share,
  pronoun and ``-ly`` adverb rates, quotation marks (dialogue);
* cohesion: discourse connectives by category, adjacent-sentence content-word overlap, overlap with the prompt;
* anonymisation placeholders (``@CAPS1``, ``@PERSON2``, ``@NUM3`` ...): total and per kind. They are removed
  before the word-level features so that they are neither counted as words nor as misspellings.

ASAP sets 7/8 have no newlines: a paragraph break is written as sentence-final punctuation followed by two or
more spaces, which is what :func:`paragraphs` splits on (mid-sentence double spaces are typing noise).

Every feature depends on one essay (and the fixed word list / prompt) only, so a feature matrix is computed
once per essay and reused across folds and traits.

Feature sets: ``paper`` (the default) adds the syntax and entity-grid features the MADRAG paper's Appendix C names,
from a part-of-speech tagger (:mod:`madrag.paper.baselines.parsed_features`, the ``parse`` extra); ``light`` is the
parser-free set above (:data:`FEATURE_NAMES`) alone.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from madrag.agents.placeholders import PLACEHOLDER as _PLACEHOLDER
from madrag.errors import MadragError
from madrag.paper.baselines.lexicon import CONNECTIVES, PRONOUNS, STOPWORDS, SUBORDINATORS, english_lexicon

PLACEHOLDER_KINDS = ("CAPS", "PERSON", "NUM", "LOCATION", "DATE", "ORGANIZATION", "TIME", "MONTH", "MONEY")
PUNCTUATION = {"comma": ",", "period": ".", "exclaim": "!", "question": "?", "semicolon": ";", "colon": ":"}
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_SENTENCE_END = re.compile(r"[.!?]+")
_PARAGRAPH_BREAK = re.compile(r"(?<=[.!?\"'”])\s{2,}|\n\s*")
_VOWEL_GROUP = re.compile(r"[aeiouy]+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})  # curly and back quotes


FeatureSet = Literal["paper", "light"]
FEATURE_SETS: tuple[FeatureSet, ...] = ("paper", "light")
PAPER_FEATURE_SET: FeatureSet = "paper"


def feature_names(feature_set: FeatureSet = PAPER_FEATURE_SET) -> tuple[str, ...]:
    """The columns of :func:`feature_matrix` for ``feature_set``."""
    if feature_set == "light":
        return FEATURE_NAMES
    from madrag.paper.baselines.parsed_features import PARSED_FEATURE_NAMES

    return (*FEATURE_NAMES, *PARSED_FEATURE_NAMES)


def normalize(text: str) -> str:
    """Straight apostrophes, so ``didn\u2019t`` (curly) and ``didn't`` are the same word."""
    return text.translate(_APOSTROPHES)


def words_of(text: str) -> list[str]:
    """Alphabetic words (apostrophes inside kept), anonymisation placeholders removed, original case."""
    return _WORD.findall(_PLACEHOLDER.sub(" ", normalize(text)))


def sentences(text: str) -> list[list[str]]:
    """Sentences as lowercase word lists: split at every run of ``.!?`` and keep the parts that have words.

    Splitting at the mark itself (not "mark + space + capital") copes with ASAP's ``waiting .I was`` spacing.
    """
    parts = (words_of(p) for p in _SENTENCE_END.split(_PLACEHOLDER.sub(" x ", normalize(text))))
    return [[w.lower() for w in p] for p in parts if p]


def paragraphs(text: str) -> list[str]:
    """Paragraphs: split at newlines and at sentence-final punctuation followed by 2+ spaces (ASAP's breaks)."""
    return [p for p in _PARAGRAPH_BREAK.split(text.strip()) if p.strip()]


def syllables(word: str) -> int:
    """Vowel-group count with a silent final ``e`` dropped; at least 1 (a standard readability heuristic)."""
    w = word.lower()
    count = len(_VOWEL_GROUP.findall(w))
    if w.endswith("e") and not w.endswith(("le", "ee")) and count > 1:
        count -= 1
    return max(count, 1)


def mattr(tokens: Sequence[str], window: int = 50) -> float:
    """Moving-average type-token ratio (Covington and McFall 2010); the plain TTR for shorter texts."""
    if not tokens:
        return 0.0
    if len(tokens) <= window:
        return len(set(tokens)) / len(tokens)
    counts = Counter(tokens[:window])
    total = len(counts)
    for i in range(window, len(tokens)):
        counts[tokens[i]] += 1
        old = tokens[i - window]
        counts[old] -= 1
        if counts[old] == 0:
            del counts[old]
        total += len(counts)
    return total / (len(tokens) - window + 1) / window


def _mtld_pass(tokens: Sequence[str], threshold: float) -> float:
    factors, types, count = 0.0, set[str](), 0
    for token in tokens:
        types.add(token)
        count += 1
        if len(types) / count <= threshold:
            factors, types, count = factors + 1, set(), 0
    if count:
        ttr = len(types) / count
        factors += (1 - ttr) / (1 - threshold) if ttr < 1 else 0.0
    return len(tokens) / factors if factors > 0 else float(len(tokens))


def mtld(tokens: Sequence[str], threshold: float = 0.72) -> float:
    """Measure of textual lexical diversity (McCarthy and Jarvis 2010): mean of a forward and a backward pass."""
    if not tokens:
        return 0.0
    return (_mtld_pass(tokens, threshold) + _mtld_pass(list(reversed(tokens)), threshold)) / 2


def count_phrases(lower_words: Sequence[str], phrases: Sequence[str]) -> int:
    """Occurrences of single words and multi-word phrases in a lowercase word sequence."""
    counts = Counter(lower_words)
    joined = " " + " ".join(lower_words) + " "
    return sum(joined.count(f" {p} ") if " " in p else counts[p] for p in phrases)


def _stem(word: str) -> str:
    """A crude stem (first 5 letters) so ``patient``/``patience`` and ``laugh``/``laughter`` match."""
    return word[:5]


def content_stems(lower_words: Sequence[str]) -> set[str]:
    """The crude stems of the content words (no stop words, longer than two letters)."""
    return {_stem(w) for w in lower_words if w not in STOPWORDS and len(w) > 2}


def adjacent_overlap(sents: Sequence[Sequence[str]]) -> float:
    """Mean Jaccard overlap of content-word stems between adjacent sentences (local lexical cohesion)."""
    sets = [content_stems(s) for s in sents]
    pairs = [(a, b) for a, b in itertools.pairwise(sets) if a or b]
    return float(np.mean([len(a & b) / len(a | b) for a, b in pairs])) if pairs else 0.0


def _safe(num: float, den: float) -> float:
    return num / den if den else 0.0


def _length_features(text: str, words: list[str], sents: list[list[str]]) -> dict[str, float]:
    lengths = np.array([len(w) for w in words], dtype=np.float64) if words else np.zeros(1)
    syl = np.array([syllables(w) for w in words], dtype=np.float64) if words else np.zeros(1)
    n_words, n_sents = len(words), max(len(sents), 1)
    paras = paragraphs(text)
    words_per_sent, syl_per_word = _safe(n_words, n_sents), float(syl.mean())
    return {
        "chars": float(len(text)),
        "words": float(n_words),
        "log_words": math.log1p(n_words),
        "unique_words": float(len({w.lower() for w in words})),
        "sentences": float(len(sents)),
        "paragraphs": float(len(paras)),
        "words_per_paragraph": _safe(n_words, len(paras)),
        "word_len_mean": float(lengths.mean()),
        "word_len_std": float(lengths.std()),
        "long_word_ratio": _safe(float((lengths >= 7).sum()), n_words),
        "short_word_ratio": _safe(float((lengths <= 3).sum()), n_words),
        "syllables_per_word": syl_per_word,
        "polysyllable_ratio": _safe(float((syl >= 3).sum()), n_words),
        "flesch_reading_ease": 206.835 - 1.015 * words_per_sent - 84.6 * syl_per_word,
        "flesch_kincaid_grade": 0.39 * words_per_sent + 11.8 * syl_per_word - 15.59,
    }


def _punctuation_features(text: str, n_words: int) -> dict[str, float]:
    out: dict[str, float] = {}
    total = 0
    for name, mark in PUNCTUATION.items():
        count = text.count(mark)
        total += count
        out[f"punct_{name}"] = float(count)
        out[f"punct_{name}_rate"] = _safe(count, n_words)
    out["punct_total_rate"] = _safe(total, n_words)
    out["quotes"] = float(len(re.findall(r"[\"“”]", text)))
    out["apostrophes"] = float(len(re.findall(r"[A-Za-z]['\u2019][A-Za-z]", text)))
    out["space_before_punct"] = float(len(re.findall(r"\s[,.!?;:]", text)))
    out["no_space_after_punct"] = float(len(re.findall(r"[,.!?;:][A-Za-z]", text)))
    out["repeat_punct"] = float(len(re.findall(r"[!?]{2,}|\.{4,}|,{2,}", text)))
    return out


def _spelling_features(text: str, words: list[str], lexicon: Collection[str]) -> dict[str, float]:
    lowered = [w.lower() for w in words]
    unknown = [w for w in lowered if w not in lexicon]
    return {
        "oov": float(len(unknown)),
        "oov_rate": _safe(len(unknown), len(words)),
        "oov_unique": float(len(set(unknown))),
        "numbers": float(len(re.findall(r"\d+", _PLACEHOLDER.sub(" ", text)))),
    }


def _syntax_features(text: str, words: list[str], sents: list[list[str]]) -> dict[str, float]:
    lens = np.array([len(s) for s in sents], dtype=np.float64) if sents else np.zeros(1)
    n_sents = max(len(sents), 1)
    lower = [w.lower() for w in words]
    subs = sum(1 for w in lower if w in SUBORDINATORS)
    starts = [m.group(0) for m in re.finditer(r"(?:^|[.!?]+[\s\"'”]*)([A-Za-z])", normalize(text))]
    lower_starts = sum(1 for s in starts if s[-1].islower())
    return {
        "sent_len_mean": float(lens.mean()),
        "sent_len_std": float(lens.std()),
        "sent_len_max": float(lens.max()),
        "long_sentence_ratio": float((lens > 30).mean()),
        "short_sentence_ratio": float((lens < 5).mean()),
        "commas_per_sentence": text.count(",") / n_sents,
        "subordinators": float(subs),
        "subordinators_per_sentence": subs / n_sents,
        "lower_sentence_start_ratio": _safe(lower_starts, len(starts)),
        "lowercase_i": float(sum(1 for w in words if w == "i" or w.startswith("i'"))),
        "allcaps_words": float(sum(1 for w in words if len(w) > 1 and w.isupper() and w != "I")),
    }


def _style_features(words: list[str]) -> dict[str, float]:
    lower = [w.lower() for w in words]
    n = len(lower)
    out = {
        "ttr": _safe(len(set(lower)), n),
        "root_ttr": _safe(len(set(lower)), math.sqrt(n)),
        "mattr50": mattr(lower),
        "mtld": mtld(lower),
        "stopword_ratio": _safe(sum(1 for w in lower if w in STOPWORDS), n),
        "ly_adverb_rate": _safe(sum(1 for w in lower if len(w) > 4 and w.endswith("ly")), n),
    }
    for kind, pronouns in PRONOUNS.items():
        out[f"pronoun_{kind}_rate"] = _safe(sum(1 for w in lower if w in pronouns), n)
    return out


def _cohesion_features(words: list[str], sents: list[list[str]], prompt_stems: set[str]) -> dict[str, float]:
    lower = [w.lower() for w in words]
    n_sents = max(len(sents), 1)
    out: dict[str, float] = {}
    total = 0
    for kind, phrases in CONNECTIVES.items():
        count = count_phrases(lower, phrases)
        total += count
        out[f"conn_{kind}"] = float(count)
        out[f"conn_{kind}_per_sentence"] = count / n_sents
    out["conn_total_rate"] = _safe(total, len(lower))
    out["adjacent_overlap"] = adjacent_overlap(sents)
    content = [_stem(w) for w in lower if w not in STOPWORDS and len(w) > 2]
    out["prompt_overlap"] = _safe(sum(1 for s in content if s in prompt_stems), len(content))
    return out


def _placeholder_features(text: str, n_words: int) -> dict[str, float]:
    kinds = Counter(m.group(1) for m in _PLACEHOLDER.finditer(text))
    total = sum(kinds.values())
    out = {"placeholders": float(total), "placeholder_rate": _safe(total, n_words + total)}
    out.update({f"ph_{k.lower()}": float(kinds[k]) for k in PLACEHOLDER_KINDS})
    return out


def essay_features(text: str, lexicon: Collection[str], prompt: str = "") -> dict[str, float]:
    """Every feature of one essay, keyed as :data:`FEATURE_NAMES` (all finite floats)."""
    words = words_of(text)
    sents = sentences(text)
    feats: dict[str, float] = {}
    feats.update(_length_features(text, words, sents))
    feats.update(_punctuation_features(text, len(words)))
    feats.update(_spelling_features(text, words, lexicon))
    feats.update(_syntax_features(text, words, sents))
    feats.update(_style_features(words))
    feats.update(_cohesion_features(words, sents, content_stems([w.lower() for w in words_of(prompt)])))
    feats.update(_placeholder_features(text, len(words)))
    return feats


FEATURE_NAMES: tuple[str, ...] = tuple(essay_features("", frozenset()))
"""The parser-free features (the ``light`` set; the ``paper`` set adds the parsed ones after them), in the order
:func:`essay_features` gives them."""


def feature_matrix(
    texts: Sequence[str],
    lexicon: Collection[str] | None = None,
    prompt: str = "",
    feature_set: FeatureSet = PAPER_FEATURE_SET,
) -> NDArray[np.float64]:
    """A ``(len(texts), len(feature_names(feature_set)))`` matrix; ``lexicon`` defaults to :func:`english_lexicon`."""
    vocab = english_lexicon() if lexicon is None else lexicon
    names = feature_names(feature_set)
    rows = [essay_features(t, vocab, prompt) for t in texts]
    if feature_set == "paper":
        from madrag.paper.baselines.parsed_features import parsed_features

        rows = [row | parsed_features(t) for row, t in zip(rows, texts, strict=True)]
    matrix = np.array([[row[name] for name in names] for row in rows], dtype=np.float64)
    matrix = matrix.reshape(len(texts), len(names))
    if not np.isfinite(matrix).all():
        raise MadragError("a feature is not finite; this is a bug in madrag.paper.baselines.features")
    return matrix

"""FeatEng-RF's syntax and entity-grid features (the MADRAG paper, Appendix C: "syntax, style, and cohesion
indicators such as discourse connectives and entity-grid features"), from a part-of-speech tagger and chunker.

The tagger is the one TextBlob ships inside its PyPI package (``textblob.en``: Pattern's Brill-style English
tagger, its lexicon and contextual rules as package data, and Pattern's shallow chunker), so nothing is downloaded
at run time; it comes with the ``parse`` extra (``pip install 'madrag[parse]'``). Per essay:

* syntax: the rate per word of each part of speech (Penn tags grouped: nouns, verbs, adjectives, adverbs,
  pronouns, prepositions, determiners, conjunctions, modals, past-tense verbs), lexical density (the share of
  content words), noun / verb / prepositional phrases per sentence, the mean noun-phrase length in words, the
  share of sentences without a verb phrase (fragments);
* entity grid (Barzilay and Lapata 2008): the entities are the head nouns of the noun phrases; in each sentence an
  entity is the subject (S: a noun phrase before the sentence's first verb phrase), the object (O: a noun phrase
  right after a verb phrase), another role (X), or absent (-), the highest of its roles when it occurs more than
  once; the 16 features are the probabilities of each role transition of length 2 over every entity's column,
  and the mean number of sentences an entity occurs in. The roles follow Pattern's own shallow-parse rule, not a
  dependency parse (a difference listed in docs/differences.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import cache
from typing import Any

from madrag.errors import ConfigError

POS_GROUPS: dict[str, tuple[str, ...]] = {
    "noun": ("NN", "NNS", "NNP", "NNPS"),
    "verb": ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ"),
    "adjective": ("JJ", "JJR", "JJS"),
    "adverb": ("RB", "RBR", "RBS"),
    "pronoun": ("PRP", "PRP$", "WP", "WP$"),
    "preposition": ("IN", "TO"),
    "determiner": ("DT", "PDT", "WDT"),
    "conjunction": ("CC",),
    "modal": ("MD",),
    "past_verb": ("VBD", "VBN"),
}
CONTENT = frozenset(POS_GROUPS["noun"] + POS_GROUPS["verb"] + POS_GROUPS["adjective"] + POS_GROUPS["adverb"])
ROLES = ("S", "O", "X", "-")
RANK = {"S": 3, "O": 2, "X": 1, "-": 0}
TRANSITIONS = tuple(a + b for a, b in itertools.product(ROLES, ROLES))

PARSED_FEATURE_NAMES: tuple[str, ...] = (
    *(f"pos_{group}_rate" for group in POS_GROUPS),
    "lexical_density",
    "np_per_sentence",
    "vp_per_sentence",
    "pp_per_sentence",
    "np_len_mean",
    "verbless_sentence_ratio",
    *(f"egrid_{t.replace('-', 'N')}" for t in TRANSITIONS),
    "egrid_entity_span",
)
"""The names of :func:`parsed_features`, in order (``egrid_SN`` is the transition S then absent)."""

Token = tuple[str, str, str]  # word, Penn tag, chunk tag (B-NP, I-VP, O ...)


@cache
def _parser() -> Callable[..., Any]:
    """TextBlob's bundled English parser (``textblob.en.parse``); ConfigError when the extra is missing."""
    try:
        from textblob.en import parse
    except ImportError:
        raise ConfigError(
            "FeatEng-RF's syntax and entity-grid features need the tagger of the 'parse' extra: "
            "pip install 'madrag[parse]' (or --features light, madrag's parser-free set)"
        ) from None
    return parse  # type: ignore[no-any-return]


def tagged_sentences(text: str) -> list[list[Token]]:
    """The essay's sentences as (word, tag, chunk) tokens."""
    parsed = str(_parser()(text, tokenize=True, tags=True, chunks=True, relations=False, lemmata=False))
    out = []
    for line in parsed.split("\n"):
        tokens = [tuple(part.rsplit("/", 3)[:3]) for part in line.split(" ") if part.count("/") >= 3]
        if tokens:
            out.append([(w, t, c) for w, t, c in tokens])
    return out


def _chunks(sentence: list[Token]) -> list[tuple[str, list[Token]]]:
    """The sentence's chunks in order: (type, tokens); a token outside every chunk is its own ``O`` chunk."""
    chunks: list[tuple[str, list[Token]]] = []
    for token in sentence:
        tag = token[2]
        if tag.startswith("I-") and chunks and chunks[-1][0] == tag[2:]:
            chunks[-1][1].append(token)
        else:
            chunks.append((tag[2:] if tag[:2] in ("B-", "I-") else "O", [token]))
    return chunks


def sentence_roles(sentence: list[Token]) -> dict[str, str]:
    """Entity (lower-cased head noun of a noun phrase) -> its highest role in the sentence: S, O or X."""
    roles: dict[str, str] = {}
    chunks = _chunks(sentence)
    seen_verb = False
    for i, (kind, tokens) in enumerate(chunks):
        if kind == "VP":
            seen_verb = True
            continue
        nouns = [w.lower() for w, t, _ in tokens if t in POS_GROUPS["noun"]]
        if kind != "NP" or not nouns:
            continue
        after_verb = i > 0 and chunks[i - 1][0] == "VP"
        role = "O" if after_verb else "X" if seen_verb else "S"
        if RANK[role] > RANK[roles.get(nouns[-1], "-")]:
            roles[nouns[-1]] = role
    return roles


def entity_grid(sentences: list[list[Token]]) -> dict[str, list[str]]:
    """Entity -> its role in each sentence (``-`` where absent), in order of first mention."""
    per_sentence = [sentence_roles(s) for s in sentences]
    entities = list(dict.fromkeys(e for roles in per_sentence for e in roles))
    return {e: [roles.get(e, "-") for roles in per_sentence] for e in entities}


def _grid_features(sentences: list[list[Token]]) -> dict[str, float]:
    grid = entity_grid(sentences)
    counts = dict.fromkeys(TRANSITIONS, 0)
    for column in grid.values():
        for a, b in itertools.pairwise(column):
            counts[a + b] += 1
    total = sum(counts.values())
    out = {f"egrid_{t.replace('-', 'N')}": (counts[t] / total if total else 0.0) for t in TRANSITIONS}
    spans = [sum(role != "-" for role in column) for column in grid.values()]
    out["egrid_entity_span"] = sum(spans) / len(spans) if spans else 0.0
    return out


def parsed_features(text: str) -> dict[str, float]:
    """Every feature of :data:`PARSED_FEATURE_NAMES` for one essay (finite floats; 0 for an empty essay)."""
    sentences = tagged_sentences(text)
    tags = [t for s in sentences for _, t, _ in s if t[:1].isalpha()]  # words, not punctuation
    n_words, n_sents = max(len(tags), 1), max(len(sentences), 1)
    out = {f"pos_{g}_rate": sum(t in members for t in tags) / n_words for g, members in POS_GROUPS.items()}
    out["lexical_density"] = sum(t in CONTENT for t in tags) / n_words
    chunks = [c for s in sentences for c in _chunks(s)]
    noun_phrases = [len(tokens) for kind, tokens in chunks if kind == "NP"]
    for kind in ("NP", "VP", "PP"):
        out[f"{kind.lower()}_per_sentence"] = sum(k == kind for k, _ in chunks) / n_sents
    out["np_len_mean"] = sum(noun_phrases) / len(noun_phrases) if noun_phrases else 0.0
    verbless = sum(all(k != "VP" for k, _ in _chunks(s)) for s in sentences)
    out["verbless_sentence_ratio"] = verbless / n_sents
    out.update(_grid_features(sentences))
    return out

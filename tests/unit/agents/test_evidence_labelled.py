"""Precision and recall of the quote verifier (madrag.agents.evidence) on hand-labelled debate answers.

Two essays in ASAP's style (a misspelling, placeholders, double spaces) and answers written to look like an
Advocate's, a Skeptic's and a Judge's. Every quote in them is labelled by hand: ``True`` when the essay says
it (exact, re-cased, re-spaced, a misspelling the model silently corrected, a placeholder renumbered or masked,
an ellipsis), ``False`` when it does not (paraphrased, invented, two passages blended). Apostrophes and
single-word scare quotes are in the answers too: they are not quotes, and extraction must not take them.

"Positive" is "the verifier says the essay contains this quote". Thresholds:

* extraction: every labelled quote found and nothing else (precision = recall = 1.0): the answers use the
  quote marks models use, and a quote lost here is never checked at all;
* verification recall >= 0.9: at most one genuine quote in ten wrongly reported as unverified (under
  ``--evidence-check feedback`` such a miss would make the Judge distrust a true claim);
* verification precision >= 0.9: at most one quote in ten accepted without being in the essay (a paraphrase
  that keeps most words is the hard case; the 0.88 fuzzy threshold is meant to reject it).
"""

from __future__ import annotations

from madrag.agents.evidence import FUZZY_THRESHOLD, extract_quotes, verify_quote
from madrag.agents.placeholders import mask_placeholders

ESSAY_A = (
    "Being patient is hard for most people, but I learned it when I was ten. My mom and I went to @LOCATION1 "
    "to get a new bike for my birthday.  The store was closed becuase it was a holiday, and I was really upset. "
    "@PERSON1 said we could come back tomorow, so we waited. I kept asking my mom if it was time yet. "
    "The next morning we went back and the bike was still there. That day I learned that waiting is worth it "
    "when you get something you really want."
)
ESSAY_B = (
    "Last summer my brother @CAPS1 and I built a treehouse in our backyard. It took us @NUM1 weeks because "
    "the wood kept splitting. Every time something broke, @CAPS1 would take a deep breath and start over. "
    "I did not understand why he was so calm. He told me that being patient means you dont give up even when "
    "things go wrong. Now whenever I get frustrated I think about the treehouse and I try to be patient like him."
)

# (essay, answer, {quote: in the essay?}) - the answer's quotes, each labelled by hand
LABELLED: list[tuple[str, str, dict[str, bool]]] = [
    (
        ESSAY_A,
        'The Advocate notes that the writer opens with a clear claim: "Being patient is hard for most people". '
        'The narrative is concrete: "My mom and I went to @LOCATION1 to get a new bike for my birthday." '
        "The writer's reaction is honest, \u201cthe store was closed because it was a holiday\u201d, and the "
        "lesson is stated: 'waiting is worth it when you get something you really want'.",
        {
            "Being patient is hard for most people": True,  # exact
            "My mom and I went to @LOCATION1 to get a new bike for my birthday.": True,  # exact
            "the store was closed because it was a holiday": True,  # re-cased, misspelling corrected
            "waiting is worth it when you get something you really want": True,  # exact, single quotes
        },
    ),
    (
        ESSAY_A,
        'The Skeptic argues the essay is "very short and does not explain the lesson in depth" and that the '
        'ending, "I realized patience is the key to every success in life", is a clich\u00e9. The writer says '
        '"the store   was closed" and "I KEPT ASKING MY MOM IF IT WAS TIME YET", which shows impatience, and '
        'quotes the mother saying "you have to learn to wait for good things", which the essay never develops.',
        {
            "very short and does not explain the lesson in depth": False,  # the Skeptic's own words as a quote
            "I realized patience is the key to every success in life": False,  # invented
            "the store   was closed": True,  # re-spaced
            "I KEPT ASKING MY MOM IF IT WAS TIME YET": True,  # re-cased
            "you have to learn to wait for good things": False,  # invented dialogue
        },
    ),
    (
        ESSAY_A,
        'The Judge weighs both sides. The Advocate\'s point about "@PERSON2 said we could come back tomorrow" '
        'holds, and "The next morning we went back ... the bike was still there" supports the structure. '
        'But the Skeptic\'s quote "the bike was gone when we came back the next day" is not accurate, and the '
        'phrase "I learned that patience pays off when you want something" paraphrases the ending. '
        'The word "upset" is well chosen.\nFinal score: 3',
        {
            "@PERSON2 said we could come back tomorrow": True,  # placeholder renumbered, misspelling corrected
            "The next morning we went back ... the bike was still there": True,  # ellipsis
            "the bike was gone when we came back the next day": False,  # invented, contradicts the essay
            "I learned that patience pays off when you want something": False,  # paraphrase
        },
    ),
    (
        ESSAY_B,
        'The Advocate highlights "my brother @CAPS1 and I built a treehouse in our backyard" and the '
        'repetition in "@CAPS1 would take a deep breath and start over". The lesson, "being patient means you '
        "don't give up even when things go wrong\", is clear, and the close \u201cI try to be patient like "
        "him\u201d ties it together.",
        {
            "my brother @CAPS1 and I built a treehouse in our backyard": True,  # exact
            "@CAPS1 would take a deep breath and start over": True,  # exact
            "being patient means you don't give up even when things go wrong": True,  # apostrophe added
            "I try to be patient like him": True,  # exact, curly quotes
        },
    ),
    (
        ESSAY_B,
        'The Skeptic finds weak spots: "It took us three weeks because the wood kept splitting" gives a '
        'reason but no detail, and "my brother taught me everything I know about building" is never shown. '
        'The line "he was always calm and never got angry at anything" overstates what the essay says, and '
        '"I did not understand why he was so calm" is left unexplained. The writer\'s use of "frustrated" is vague.',
        {
            "It took us three weeks because the wood kept splitting": True,  # @NUM1 written out: a placeholder
            "my brother taught me everything I know about building": False,  # invented
            "he was always calm and never got angry at anything": False,  # invented exaggeration
            "I did not understand why he was so calm": True,  # exact
        },
    ),
    (
        ESSAY_B,
        'Judge: the Advocate\'s "Every time something broke, @CAPS1 would take a deep breath" is accurate; the '
        'Skeptic\'s "the treehouse fell down twice before it was done" does not appear in the essay. '
        '"Now whenever I get frustrated I think about the treehouse" shows reflection, while "when things go '
        "wrong I just try again and again\" is a paraphrase of the brother's advice.\nFinal score: 2",
        {
            "Every time something broke, @CAPS1 would take a deep breath": True,  # exact
            "the treehouse fell down twice before it was done": False,  # invented
            "Now whenever I get frustrated I think about the treehouse": True,  # exact
            "when things go wrong I just try again and again": False,  # paraphrase
        },
    ),
]


def _counts() -> tuple[dict[str, float], list[str]]:
    """Extraction and verification precision/recall over the labelled set, and the misjudged quotes."""
    tp = fp = fn = tn = ext_hit = ext_extra = ext_total = 0
    wrong: list[str] = []
    for essay, answer, labels in LABELLED:
        found = extract_quotes(answer)
        ext_total += len(labels)
        ext_hit += sum(1 for q in found if q in labels)
        ext_extra += sum(1 for q in found if q not in labels)
        for quote, in_essay in labels.items():
            said = verify_quote(quote, essay).verified
            tp += said and in_essay
            fp += said and not in_essay
            fn += not said and in_essay
            tn += not said and not in_essay
            if said != in_essay:
                wrong.append(quote)
    metrics = {
        "extraction_precision": ext_hit / (ext_hit + ext_extra),
        "extraction_recall": ext_hit / ext_total,
        "precision": tp / (tp + fp),
        "recall": tp / (tp + fn),
        "flag_precision": tn / (tn + fn) if tn + fn else 1.0,  # of the quotes reported unverified, truly absent
        "n_quotes": float(tp + fp + fn + tn),
        "n_in_essay": float(tp + fn),
    }
    return metrics, wrong


def test_the_labelled_set_mixes_genuine_and_false_quotes() -> None:
    labels = [v for _, _, quotes in LABELLED for v in quotes.values()]
    assert len(labels) >= 20 and 0.3 < sum(labels) / len(labels) < 0.7


def test_quote_verifier_precision_and_recall_on_the_labelled_set() -> None:
    metrics, wrong = _counts()
    print(
        f"\nquote verifier on {metrics['n_quotes']:.0f} hand-labelled quotes ({metrics['n_in_essay']:.0f} in the "
        f"essay), fuzzy threshold {FUZZY_THRESHOLD}: extraction precision {metrics['extraction_precision']:.2f} "
        f"recall {metrics['extraction_recall']:.2f}; verification precision {metrics['precision']:.2f} recall "
        f"{metrics['recall']:.2f}; unverified-flag precision {metrics['flag_precision']:.2f}; misjudged: {wrong}"
    )
    assert metrics["extraction_precision"] == 1.0 and metrics["extraction_recall"] == 1.0
    assert metrics["precision"] >= 0.9
    assert metrics["recall"] >= 0.9


def test_masked_essays_verify_quotes_with_placeholders_or_neutral_words() -> None:
    masked = mask_placeholders(ESSAY_B)
    assert "[name]" in masked
    assert verify_quote("my brother @CAPS1 and I built a treehouse", masked).verified
    assert verify_quote("my brother [name] and I built a treehouse", ESSAY_B).verified
    assert not verify_quote("my brother Tom and I built a treehouse on the roof of the school", masked).verified

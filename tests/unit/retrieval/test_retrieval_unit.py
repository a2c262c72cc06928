"""Tests of the exemplar bank with a deterministic bag-of-words fake embedder, its store in tmp_path (madrag's
SQLite store, read into memory), and of the embedder protocol and window planning."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import BagOfWordsEmbedder

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.retrieval import Embedder, ExemplarBank, LevelExemplar, plan_windows
from madrag.retrieval.sqlite_banks import BANKS_FILE, SqliteBanks
from madrag.rubric import Rubric, Trait

LEVELS = {0: "none", 1: "some", 2: "good", 3: "great"}
RUBRIC = Rubric(
    traits=[
        Trait(name="Ideas", min=0, max=3, levels=LEVELS),
        Trait(name="Style", min=0, max=3, levels=LEVELS),
    ]
)
IDEAS, STYLE = RUBRIC.traits


def essay(eid: str, text: str, ideas: float | None = None, style: float | None = None) -> Essay:
    """An essay of set 7 with one rater's Ideas / Style scores where given."""
    scores: dict[str, list[float]] = {}
    if ideas is not None:
        scores["Ideas"] = [ideas]
    if style is not None:
        scores["Style"] = [style]
    return Essay(id=eid, text=text, essay_set=7, rater_scores=scores)


def make_pool() -> list[Essay]:
    """12 essays; no essay has Ideas == 3 (an empty level); Style covers 0..3."""
    topics = ["apple orchard harvest", "river boat journey", "mountain snow climb", "city market noise"]
    pool = []
    for i in range(12):
        topic = topics[i % 4]
        pool.append(essay(f"p{i}", f"{topic} story number {i} patience waiting", ideas=i % 3, style=(i // 3) % 4))
    return pool


@pytest.fixture()
def fake() -> BagOfWordsEmbedder:
    """The deterministic bag-of-words embedder."""
    return BagOfWordsEmbedder()


@pytest.fixture()
def pool() -> list[Essay]:
    """The 12-essay pool of :func:`make_pool`."""
    return make_pool()


@pytest.fixture()
def bank(pool: list[Essay], fake: BagOfWordsEmbedder, tmp_path: Path) -> ExemplarBank:
    """A bank of the pool in tmp_path, built in batches of 5."""
    return ExemplarBank.build_or_load(pool, RUBRIC, fake, tmp_path / "bank", batch_size=5)


def ids(level: LevelExemplar) -> str | None:
    """The id of the level's exemplar, or None."""
    return level.exemplar.essay_id if level.exemplar else None


def brute_force_nearest(query: Essay, candidates: list[Essay], emb: Embedder) -> str:
    """The candidate nearest to ``query`` by a full scan (what the bank must agree with)."""
    qv = emb.embed([query.text])[0]
    sims = emb.embed([c.text for c in candidates]) @ qv
    return candidates[int(np.argmax(sims))].id


def test_fake_embedder_satisfies_protocol(fake: BagOfWordsEmbedder) -> None:
    assert isinstance(fake, Embedder)


def test_bank_stores_whole_pool_in_batches(bank: ExemplarBank, pool: list[Essay], fake: BagOfWordsEmbedder) -> None:
    assert bank.size == len(pool)
    assert bank.built_now is True
    assert fake.calls == 3  # 12 essays in batches of 5
    assert fake.texts_embedded == len(pool)


def test_per_level_one_exemplar_per_level_with_that_score(bank: ExemplarBank, pool: list[Essay]) -> None:
    query = essay("q1", "river boat journey story about patience", ideas=1, style=2)
    levels = bank.per_level(query, STYLE)
    assert [lv.score for lv in levels] == [0, 1, 2, 3]
    pool_ids = {e.id for e in pool}
    for lv in levels:
        assert lv.exemplar is not None
        assert lv.exemplar.essay_id in pool_ids
        assert lv.exemplar.scores["Style"] == lv.score
        ref = next(e for e in pool if e.id == lv.exemplar.essay_id).reference(STYLE)
        assert ref == lv.score


def test_per_level_picks_the_nearest_candidate(bank: ExemplarBank, pool: list[Essay], fake: Embedder) -> None:
    query = essay("q2", "mountain snow climb with patience", ideas=0)
    for lv in bank.per_level(query, IDEAS):
        if lv.exemplar is None:
            continue
        candidates = [e for e in pool if e.reference(IDEAS) == lv.score]
        assert lv.exemplar.essay_id == brute_force_nearest(query, candidates, fake)


def test_per_level_records_none_for_empty_level(bank: ExemplarBank) -> None:
    levels = bank.per_level(essay("q3", "apple orchard"), IDEAS)
    assert [lv.score for lv in levels] == [0, 1, 2, 3]
    assert levels[3].exemplar is None
    assert all(lv.exemplar is not None for lv in levels[:3])


def test_query_in_pool_is_never_returned(bank: ExemplarBank, pool: list[Essay]) -> None:
    query = pool[4]  # identical text is in the bank: it would be its own nearest neighbour
    style = bank.per_level(query, STYLE)
    assert all(lv.exemplar is not None and lv.exemplar.essay_id != query.id for lv in style)
    for lv in bank.per_level(query, IDEAS):
        assert lv.exemplar is None or lv.exemplar.essay_id != query.id
    similar = bank.similar(query, k=len(pool))
    assert query.id not in {x.essay_id for x in similar}
    assert len(similar) == len(pool) - 1


def test_only_candidate_of_a_level_being_the_query_gives_none(fake: Embedder, tmp_path: Path) -> None:
    pool = [essay("a", "alpha text", ideas=0), essay("b", "beta text", ideas=1), essay("c", "gamma", ideas=1)]
    bank = ExemplarBank.build_or_load(pool, RUBRIC, fake, tmp_path)
    levels = bank.per_level(pool[0], IDEAS)
    assert levels[0].exemplar is None  # only essay "a" has Ideas 0, and it is the query
    assert levels[1].exemplar is not None and levels[1].exemplar.essay_id in {"b", "c"}


def test_similar_is_sorted_and_excludes_self(bank: ExemplarBank, pool: list[Essay], fake: Embedder) -> None:
    query = essay("q4", "city market noise story", style=1)
    found = bank.similar(query, k=3)
    assert len(found) == 3
    # nearest first; distances equal to 1e-6 (float32 vectors) are ties, kept in the pool's order
    assert all(b.distance >= a.distance - 1e-6 for a, b in itertools.pairwise(found))
    assert found[0].essay_id == brute_force_nearest(query, pool, fake)
    assert found[0].similarity == pytest.approx(1.0 - found[0].distance)
    assert {x.essay_id for x in found} <= {e.id for e in pool}


def test_missing_reference_is_not_a_level_candidate(fake: Embedder, tmp_path: Path) -> None:
    pool = [essay("n", "unscored apple orchard", style=1), essay("s", "scored river boat", ideas=2, style=1)]
    bank = ExemplarBank.build_or_load(pool, RUBRIC, fake, tmp_path)
    query = essay("q", "unscored apple orchard")
    ideas = bank.per_level(query, IDEAS)
    assert [ids(lv) for lv in ideas] == [None, None, "s", None]
    nearest = bank.similar(query, k=1)[0]
    assert nearest.essay_id == "n" and "Ideas" not in nearest.scores and nearest.scores["Style"] == 1


def test_second_build_reuses_collection(pool: list[Essay], tmp_path: Path) -> None:
    first_emb, second_emb = BagOfWordsEmbedder(), BagOfWordsEmbedder()
    first = ExemplarBank.build_or_load(pool, RUBRIC, first_emb, tmp_path)
    second = ExemplarBank.build_or_load(list(reversed(pool)), RUBRIC, second_emb, tmp_path)
    assert first.built_now and not second.built_now
    assert second.fingerprint == first.fingerprint
    assert second_emb.texts_embedded == 0  # nothing re-embedded
    assert second.size == len(pool)
    query = essay("q", "river boat journey")
    assert second.per_level(query, STYLE) == first.per_level(query, STYLE)


def collection_names(folder: Path) -> list[str]:
    """The collections of a cache folder, read by a store object of its own."""
    return sorted(c.name for c in SqliteBanks(folder).list_collections())


def damage(folder: Path, name: str, essay_id: str) -> None:
    """Delete one essay of the stored bank ``name`` behind madrag's back (a damaged bank with the right name)."""
    with sqlite3.connect(folder / BANKS_FILE) as conn:
        (cid,) = conn.execute("SELECT cid FROM collections WHERE name = ?", (name,)).fetchone()
        assert conn.execute("DELETE FROM items WHERE cid = ? AND id = ?", (cid, essay_id)).rowcount == 1
    conn.close()


@pytest.mark.parametrize(
    "change",
    ["text", "score", "drop", "embedder"],
)
def test_changed_inputs_build_a_new_bank_and_keep_the_old(pool: list[Essay], tmp_path: Path, change: str) -> None:
    """A changed pool gets a bank of its own; the older bank, which another run may be using, stays."""
    first = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    emb = BagOfWordsEmbedder(dim=32 if change == "embedder" else 64)
    changed = list(pool)
    if change == "text":
        changed[0] = essay("p0", "a different text", ideas=0, style=0)
    elif change == "score":
        changed[0] = essay("p0", pool[0].text, ideas=2, style=0)
    elif change == "drop":
        changed = changed[1:]
    second = ExemplarBank.build_or_load(changed, RUBRIC, emb, tmp_path)
    assert second.built_now and second.fingerprint != first.fingerprint
    assert emb.texts_embedded == len(changed)
    assert second.size == len(changed)
    assert collection_names(tmp_path) == sorted(f"madrag-bank-{b.fingerprint[:40]}" for b in (first, second))
    query = essay("q", "river boat journey")
    assert first.similar(query, k=3)  # the first run's bank still answers


def test_prune_deletes_only_unused_banks(pool: list[Essay], tmp_path: Path) -> None:
    from madrag.retrieval.bank_store import list_banks, prune_banks

    kept = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    dropped = ExemplarBank.build_or_load(pool[1:], RUBRIC, BagOfWordsEmbedder(), tmp_path)
    assert dropped.lease is not None
    dropped.lease.release()  # that run has ended
    assert {b.name: b.in_use for b in list_banks(tmp_path)} == {
        f"madrag-bank-{kept.fingerprint[:40]}": True,
        f"madrag-bank-{dropped.fingerprint[:40]}": False,
    }
    assert prune_banks(tmp_path, older_than_days=1.0) == []  # used just now
    gone = prune_banks(tmp_path, older_than_days=0.0)
    assert [b.name for b in gone] == [f"madrag-bank-{dropped.fingerprint[:40]}"]
    assert collection_names(tmp_path) == [f"madrag-bank-{kept.fingerprint[:40]}"]
    again = ExemplarBank.build_or_load(pool[1:], RUBRIC, BagOfWordsEmbedder(), tmp_path)
    assert again.built_now and again.size == len(pool) - 1


def test_incomplete_collection_is_replaced_not_overwritten(pool: list[Essay], tmp_path: Path) -> None:
    first = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    name = f"madrag-bank-{first.fingerprint[:40]}"
    damage(tmp_path, name, "p0")  # a damaged bank with the right name
    emb = BagOfWordsEmbedder()
    again = ExemplarBank.build_or_load(pool, RUBRIC, emb, tmp_path)
    assert again.built_now and again.size == len(pool) and emb.texts_embedded == len(pool)
    names = collection_names(tmp_path)
    assert len(names) == 2 and name in names and names[1].startswith(name + "-r")
    assert ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path).built_now is False


def test_query_embedding_computed_once_per_essay(bank: ExemplarBank, fake: BagOfWordsEmbedder) -> None:
    query = essay("q5", "apple orchard harvest", ideas=1)
    before = fake.texts_embedded
    result = bank.per_level_all(query)
    bank.per_level(query, IDEAS)
    bank.similar(query, k=2)
    assert set(result) == {"Ideas", "Style"}
    assert all(len(levels) == 4 for levels in result.values())
    assert fake.texts_embedded == before + 1


def test_a_precomputed_query_vector_skips_embedding(bank: ExemplarBank, fake: BagOfWordsEmbedder) -> None:
    query = essay("q6", "mountain snow climb")
    vector = fake.embed([query.text])[0]
    before = fake.texts_embedded
    with_vector = bank.per_level_all(query, [IDEAS], query_vector=vector)
    assert fake.texts_embedded == before
    embedded = bank.per_level(query, IDEAS)  # the same answer as when the bank embeds the query
    assert [ids(lv) for lv in with_vector["Ideas"]] == [ids(lv) for lv in embedded]
    for a, b in zip(with_vector["Ideas"], embedded, strict=True):
        assert a.exemplar is None or b.exemplar is None or a.exemplar.distance == pytest.approx(b.exemplar.distance)


def test_same_id_new_text_is_embedded_again(bank: ExemplarBank, fake: BagOfWordsEmbedder) -> None:
    bank.similar(essay("q7", "apple orchard"), k=1)
    before = fake.texts_embedded
    found = bank.similar(essay("q7", "river boat journey"), k=1)
    assert fake.texts_embedded == before + 1
    assert "river" in found[0].text


def test_results_are_json_serialisable(bank: ExemplarBank) -> None:
    levels = bank.per_level(essay("q8", "city market"), IDEAS)
    payload = json.loads(json.dumps([lv.model_dump(mode="json") for lv in levels]))
    assert payload[3] == {"trait": "Ideas", "score": 3, "exemplar": None}
    restored = [LevelExemplar.model_validate(p) for p in payload]
    assert restored == levels


def test_input_errors(bank: ExemplarBank, fake: Embedder, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="empty"):
        ExemplarBank.build_or_load([], RUBRIC, fake, tmp_path / "x")
    dup = [essay("d", "one", ideas=1), essay("d", "two", ideas=2)]
    with pytest.raises(InputError, match="duplicate"):
        ExemplarBank.build_or_load(dup, RUBRIC, fake, tmp_path / "y")
    with pytest.raises(InputError, match="k must be"):
        bank.similar(essay("q", "apple"), k=0)
    other = Trait(name="Voice", min=1, max=2, levels={1: "a", 2: "b"})
    with pytest.raises(InputError, match="Voice"):
        bank.per_level(essay("q", "apple"), other)


def test_plan_windows_short_text_is_one_window() -> None:
    assert plan_windows([0, 1, 2], window=8, overlap=2) == [(0, 3)]
    assert plan_windows([], window=8, overlap=2) == [(0, 0)]


def test_plan_windows_cover_everything_on_word_starts() -> None:
    # 40 words of 1-3 word pieces each
    word_ids = [w for w in range(40) for _ in range(1 + w % 3)]
    windows = plan_windows(word_ids, window=16, overlap=4)
    assert len(windows) > 1
    assert windows[0][0] == 0 and windows[-1][1] == len(word_ids)
    pairs = list(itertools.pairwise(windows))
    for (s1, e1), (s2, _) in pairs:
        assert s2 <= e1  # no gap
        assert s2 > s1  # progress
    assert all(s2 < e1 for (_, e1), (s2, _) in pairs)  # consecutive windows overlap
    for s, e in windows:
        assert 0 < e - s <= 16
        assert s == 0 or word_ids[s] != word_ids[s - 1]  # starts on a word start
        assert e == len(word_ids) or word_ids[e] != word_ids[e - 1]  # ends on a word end
    assert windows[-1][1] - windows[-1][0] >= 14  # the tail window is (nearly) full


def test_plan_windows_overlong_word_is_cut() -> None:
    word_ids = [0] * 30 + [1, 2]
    windows = plan_windows(word_ids, window=10, overlap=2)
    assert all(e - s <= 10 for s, e in windows)
    covered = {i for s, e in windows for i in range(s, e)}
    assert covered == set(range(len(word_ids)))


def test_losing_a_build_race_uses_the_finished_bank(
    pool: list[Essay], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from madrag.retrieval import bank_store

    first = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    # as if this process checked the cache before the other process finished the same bank
    real = bank_store.find_finished
    calls = iter([None])
    monkeypatch.setattr(bank_store, "find_finished", lambda *a: next(calls, real(*a)))
    second = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    assert second.built_now and second.fingerprint == first.fingerprint and second.size == len(pool)
    assert collection_names(tmp_path) == [f"madrag-bank-{first.fingerprint[:40]}"]


def test_banks_of_other_rubrics_are_kept_and_leftovers_only_pruned_explicitly(
    pool: list[Essay], tmp_path: Path
) -> None:
    from madrag.retrieval.bank_store import prune_banks

    leftover = "madrag-bank-0000-building-999999999"
    SqliteBanks(tmp_path).create_collection(leftover)  # a crashed build
    first = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    other_rubric = Rubric(traits=[Trait(name="Voice", min=0, max=3, levels=LEVELS)])
    other = ExemplarBank.build_or_load(pool, other_rubric, BagOfWordsEmbedder(), tmp_path)
    banks = sorted(f"madrag-bank-{b.fingerprint[:40]}" for b in (first, other))
    assert collection_names(tmp_path) == sorted([*banks, leftover])
    assert [b.name for b in prune_banks(tmp_path)] == [leftover]  # both banks are in use
    assert collection_names(tmp_path) == banks
    assert ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path).built_now is False


def test_a_replacement_bank_in_use_is_not_pruned(pool: list[Essay], tmp_path: Path) -> None:
    from madrag.retrieval.bank_store import prune_banks

    first = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)
    name = f"madrag-bank-{first.fingerprint[:40]}"
    damage(tmp_path, name, "p0")  # damaged: the next run replaces it
    assert first.lease is not None
    first.lease.release()
    again = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path)  # leases the bank's name
    replacement = next(n for n in collection_names(tmp_path) if n.startswith(name + "-r"))
    assert prune_banks(tmp_path) == []  # the replacement is in use (leased under the bank's name, as the damaged one)
    assert collection_names(tmp_path) == sorted([name, replacement]) and again.size == len(pool)
    assert again.lease is not None
    again.lease.release()
    assert sorted(b.name for b in prune_banks(tmp_path)) == sorted([name, replacement])

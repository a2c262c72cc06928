"""Every reading of a run's scores gives the same scores: the run reader keeping its Judge records, the one
streaming them light (the server's pages, ``madrag eval``), and ``madrag runs export``, on a run with failed
calls and a Judge group no configured protocol claims."""

from __future__ import annotations

from pathlib import Path

from tests.synthetic_runs import rubric_of, synthesize_run

from madrag.evaluation.run import load_run, read_trait_scores, score_rows, trait_scores
from madrag.records import AgentRecord
from madrag.store import RunStore


def _key(row: dict[str, object]) -> tuple[object, ...]:
    return (row["essay_id"], row["protocol"], row["trait"], row["score"], row["rationale"])


def test_kept_streamed_and_exported_scores_are_the_same(tmp_path: Path) -> None:
    rubric = rubric_of(2)
    run_dir = tmp_path / synthesize_run(tmp_path, 40, rubric, failed_every=7)
    store = RunStore(run_dir / "store.sqlite")
    try:  # Judge records of a protocol the run's configuration does not name (a run scored by an older madrag)
        judges = [r for r in store.records(role="judge") if not r.failed][:5]
        store.put_many([AgentRecord(**{**r.model_dump(), "key": "old-" + r.key, "protocol": "OLD"}) for r in judges])
        whole = trait_scores(store, rubric)  # the store read whole, every record parsed with its prompt
        streamed = read_trait_scores(store, rubric)
        essays = store.essays()
    finally:
        store.close()
    kept, light = load_run(run_dir, judges=True), load_run(run_dir, judges=False)
    assert light.judges == [] and len(kept.judges) > 0
    assert all(not r.messages and r.tokens is None and not r.failed for r in kept.judges)
    rows = {name: sorted(map(_key, score_rows(essays, found, rubric))) for name, found in (
        ("whole", whole), ("streamed", streamed), ("kept", kept.scores), ("light", light.scores)
    )}  # fmt: skip
    assert rows["whole"] == rows["streamed"] == rows["kept"] == rows["light"]
    assert {r[1] for r in rows["whole"]} == {"MADRAG", "OLD"}
    madrag = [r for r in rows["whole"] if r[1] == "MADRAG"]
    assert len(madrag) == 40 * 2 and 0 < sum(r[3] is None for r in madrag) < 40  # a failed call: missing, no score

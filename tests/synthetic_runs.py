"""Synthetic server runs for tests and benchmarks (a test fixture, not part of the package): a run directory
whose store holds fake but complete MADRAG records (Advocate, Skeptic, Judge per essay and trait, with prompts,
tokens, exemplars and confidences), written by the library's run store, so the pages can be measured on a
run of any size without scoring it.

Every ``failed_every``-th Judge has no usable score (``mode="failed"``), as a real run can have."""

from __future__ import annotations

import asyncio
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from madrag.data.essay import Essay
from madrag.pipeline.migrations import upgrade_scores
from madrag.providers.base import Message, TokenLogprob, TopLogprob, Usage
from madrag.records import AgentRecord, ScoreResult, call_key
from madrag.rubric import Rubric, Trait
from madrag.server import library
from madrag.server.http.schemas import BackendSettings
from madrag.server.runs.repo import RunBackend, RunMeta
from madrag.settings import ScoringSettings
from madrag.store import RunStore

WORDS = (
    "the student waited patiently at the station while rain fell and the train was late again so she read her book "
    "and thought about her grandmother who always said good things come to those who wait"
).split()


def rubric_of(n_traits: int, lo: int = 1, hi: int = 6) -> Rubric:
    """A rubric of ``n_traits`` traits scored ``lo``..``hi``."""
    traits = [
        Trait(
            name=f"Trait {i + 1}", min=lo, max=hi, levels={s: f"level {s} of trait {i + 1}" for s in range(lo, hi + 1)}
        )
        for i in range(n_traits)
    ]
    return Rubric(traits=traits, prompt="Write about patience.", name=f"synthetic {n_traits}-trait rubric")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _tokens(rng: random.Random, text: str) -> list[TokenLogprob]:
    out = []
    for piece in text.split()[:120]:
        lp = -rng.random()
        out.append(TokenLogprob(token=" " + piece, logprob=lp, top=[TopLogprob(token=" x", logprob=lp - 1)] * 5))
    return out


def _record(run_id: str, essay: Essay, trait: Trait, role: str, rng: random.Random, **fields: object) -> AgentRecord:
    text = _text(rng, 60)
    return AgentRecord(
        run_id=run_id,
        key=call_key("MADRAG", essay.id, trait.name, role),
        essay_id=essay.id,
        trait=trait.name,
        protocol="MADRAG",
        role=role,
        provider="fake",
        model="fake-model",
        messages=[Message(role="system", content="You score essays."), Message(role="user", content=essay.text)],
        text=text,
        rationale=text if role == "judge" else None,
        tokens=_tokens(rng, text),
        usage=Usage(prompt_tokens=900, completion_tokens=80),
        latency_s=0.5,
        **fields,  # type: ignore[arg-type]
    )


def _judge(run_id: str, essay: Essay, trait: Trait, rng: random.Random, failed: bool, debate: list[str]) -> AgentRecord:
    dist = {s: rng.random() for s in trait.scores}
    total = sum(dist.values())
    dist = {s: p / total for s, p in dist.items()}
    best = max(dist, key=lambda s: dist[s])
    score = ScoreResult(
        parsed=None if failed else best,
        distribution=None if failed else dist,
        argmax=None if failed else best,
        expected=None if failed else sum(s * p for s, p in dist.items()),
        mode="failed" if failed else "constrained_distribution",
        reported=None if failed else best,
        invalid_raw="Final score: ten" if failed else None,
    )
    exemplars = [
        {
            "trait": trait.name,
            "score": s,
            "exemplar": {
                "essay_id": f"pool-{s}",
                "text": _text(rng, 40),
                "scores": {},
                "distance": 0.2,
                "similarity": 0.8,
            },
        }
        for s in trait.scores
    ]
    context = {"exemplars": exemplars, "debate": debate, "confidences": {"advocate1": 0.8, "skeptic1": 0.7}}
    return _record(run_id, essay, trait, "judge", rng, score=score, context=context)


async def _write(store: RunStore, records: list[AgentRecord]) -> None:
    for i in range(0, len(records), 2000):
        await asyncio.gather(*(store.aput(r) for r in records[i : i + 2000]))


def synthesize_run(
    runs_dir: Path, n_essays: int, rubric: Rubric, failed_every: int = 0, seed: int = 0, human: bool = True
) -> str:
    """Write a finished MADRAG run of ``n_essays`` essays on ``rubric`` under ``runs_dir``; returns its id.
    ``human=False``: the essays carry no human scores (a class the teacher has not graded: every score open)."""
    rng = random.Random(seed)
    run_id = uuid.uuid4().hex[:12]
    run_dir = runs_dir / run_id
    essays = [
        Essay(
            id=f"e{i:05d}",
            text=_text(rng, 250),
            rater_scores={t.name: [float(rng.randint(t.min, t.max))] for t in rubric.traits} if human else {},
        )
        for i in range(n_essays)
    ]
    inputs = library.write_inputs(run_dir, rubric, essays, "none", None, 0)
    store = RunStore(run_dir / "store.sqlite")
    try:
        store.bind_config(
            {"rubric": rubric.model_dump(mode="json"), "protocols": [{"name": "MADRAG"}], "data": str(inputs.data)}
        )
        store.set_meta("run_id", run_id)
        store.add_essays(essays)
        records: list[AgentRecord] = []
        n = 0
        for essay in essays:
            for trait in rubric.traits:
                adv = _record(
                    run_id, essay, trait, "advocate", rng, confidence=0.8, confidence_source="first_token_logprob"
                )
                skp = _record(
                    run_id, essay, trait, "skeptic", rng, confidence=0.7, confidence_source="first_token_logprob"
                )
                n += 1
                failed = failed_every > 0 and n % failed_every == 0
                records += [adv, skp, _judge(run_id, essay, trait, rng, failed, [adv.key, skp.key])]
        with ThreadPoolExecutor(1) as pool:  # its own event loop, whatever loop the caller runs
            pool.submit(asyncio.run, _write(store, records)).result()
        upgrade_scores(store, rederive=True)  # the run's final scores, as its protocol returned them
    finally:
        store.close()
    meta = RunMeta(
        id=run_id,
        name=f"synthetic: {n_essays} essays x {len(rubric.traits)} traits",
        status="finished",
        rubric_name=rubric.name,
        protocols=["MADRAG"],
        pool="none",
        eval_fold=None,
        backend=RunBackend.of(BackendSettings(kind="fake"), "none"),
        n_essays=n_essays,
        n_traits=len(rubric.traits),
        settings=ScoringSettings().model_dump(mode="json"),
    )
    (run_dir / "run.json").write_text(meta.model_dump_json(indent=2), encoding="utf-8")
    return run_id

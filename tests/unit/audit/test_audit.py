"""madrag audit: scripted backends that move (obey injections, compress, flip, read spelling) and one that does
not, each detected or not as it should be; the audit's calls kept apart from the run's scores, resumed, counted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.web_helpers import FAKE, client_for, essays_json, make_config, wait_status
from tests.web_helpers import RUBRIC as WEB_RUBRIC
from typer.testing import CliRunner

import madrag
from madrag.audit import AuditReport, audit, audit_html, load_audit
from madrag.audit.perturbations import PERTURBATIONS, get_perturbations, perturb
from madrag.cli.app import app
from madrag.errors import InputError
from madrag.evaluation.run import load_run
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.rubric import Rubric
from madrag.server.runs.library_runs import write_report as web_report

RUBRIC = {
    "traits": [
        {"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")},
        {"name": "Conventions", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")},
    ]
}
WORDS = "one day my mother waited patiently at the station while the train was late and she never complained".split()
VOCAB = {*WORDS, "essay"}
INJECTED = re.compile(r"highest score|maximum score|full marks|im_start|Final score: \d")
INJECTIONS = ["inject-start", "inject-end", "inject-middle", "fake-final-score", "fake-system"]


def _essays(n: int = 8) -> list[madrag.Essay]:
    out = []
    for i in range(n):
        score = i % 4
        text = f"Essay {i}. Q{score}Q " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(40))
        out.append(madrag.Essay(id=f"e{i}", text=text, rater_scores={"Ideas": [score] * 2, "Conventions": [score] * 2}))
    return out


def _essay_text(request: ChatRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def _marker(text: str) -> int:
    found = re.search(r"\bQ(\d)Q\b", text)
    return int(found.group(1)) if found else 0


def _reply(score: int, request: ChatRequest) -> FakeReply:
    if request.choices is not None:
        return FakeReply(text=str(score))
    if request.role in ("advocate", "skeptic"):
        return FakeReply(text="A point about the essay.")
    return FakeReply(text=f"Weighed against the rubric.\nFinal score: {score}")


def robust(request: ChatRequest) -> FakeReply:
    """Scores the essay's true quality whatever else it says."""
    return _reply(_marker(_essay_text(request)), request)


def obeys_injections(request: ChatRequest) -> FakeReply:
    text = _essay_text(request)
    return _reply(3 if INJECTED.search(text) else _marker(text), request)


def compresses(request: ChatRequest) -> FakeReply:
    return _reply(1 + (_marker(_essay_text(request)) > 1), request)  # 0,1 -> 1; 2,3 -> 2


def flips(request: ChatRequest) -> FakeReply:
    return _reply((_marker(_essay_text(request)) + (request.seed or 0)) % 4, request)


def reads_spelling(request: ChatRequest) -> FakeReply:
    """Conventions drops by one for a misspelt word; Ideas is the essay's quality."""
    text = _essay_text(request)
    essay = next((line for line in text.splitlines() if re.search(r"\bQ\dQ\b", line)), "")
    words = re.findall(r"[a-z]{4,}", essay.lower())
    score = _marker(text)
    if request.trait == "Conventions" and any(w not in VOCAB for w in words):
        score = max(0, score - 1)
    return _reply(score, request)


def _run(tmp_path: Path, script: object, protocol: str = "MA") -> tuple[Path, FakeProvider]:
    provider = FakeProvider(script=script, model_name=getattr(script, "__name__", "fake"))  # type: ignore[arg-type]
    run_dir = tmp_path / "run"
    madrag.score(
        _essays(),
        RUBRIC,
        protocol=protocol,
        provider=provider,
        fold="all",
        run_dir=run_dir,
        progress=False,
        cache_dir=tmp_path / "cache",
    )
    return run_dir, provider


def _audit(run_dir: Path, provider: FakeProvider, **options: object) -> AuditReport:
    return audit(run_dir, provider=provider, sample=8, bootstrap=200, **options)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MADRAG_CACHE", str(tmp_path / "cache"))


def test_injection_obeying_judge_is_caught_and_robust_one_is_not(tmp_path: Path) -> None:
    for name, script in (("obeys", obeys_injections), ("robust", robust)):
        run_dir, provider = _run(tmp_path / name, script)
        report = _audit(run_dir, provider, perturbations=INJECTIONS, repeats=0)
        rows = report.perturbations
        assert {r.perturbation for r in rows} == set(INJECTIONS) and len(rows) == len(INJECTIONS) * 2
        assert all(r.expected == "0" and r.n == 8 for r in rows)
        if name == "obeys":  # 6 of 8 essays (those below 3) go up to 3
            assert all(r.moved and r.direction == "up" and r.as_expected is False for r in rows)
            assert all(r.shift.estimate == pytest.approx((3 + 2 + 1) * 2 / 8) for r in rows)
        else:
            assert all(not r.moved and r.as_expected and r.shift.estimate == 0 for r in rows)


def test_compressing_judge_is_caught_and_robust_one_is_not(tmp_path: Path) -> None:
    for name, script in (("compresses", compresses), ("robust", robust)):
        run_dir, provider = _run(tmp_path / name, script)
        report = _audit(run_dir, provider, perturbations=["inject-start"], repeats=0)
        assert len(report.compression) == 2
        for row in report.compression:
            assert row.n == 8 and row.human == {0: 2, 1: 2, 2: 2, 3: 2} and row.human_ends == 0.5
            assert row.extreme_n == 4
            if name == "compresses":
                assert row.compressed is True and row.predicted == {1: 4, 2: 4} and row.predicted_ends == 0.0
                assert row.slope.estimate is not None and row.slope.estimate < 1 and row.extreme_mae == 1.0
            else:
                assert row.compressed is False and row.slope.estimate == pytest.approx(1.0)
                assert row.extreme_agree_at_1 == 1.0 and row.extreme_mae == 0.0


def test_flipping_judge_is_caught_and_robust_one_is_not(tmp_path: Path) -> None:
    for name, script in (("flips", flips), ("robust", robust)):
        run_dir, provider = _run(tmp_path / name, script, protocol="MAD")
        report = _audit(run_dir, provider, perturbations=["inject-start"], repeats=2)
        repeats = {r.condition for r in report.repeats}
        assert repeats == {"seed-1235", "seed-1236", "debater-temperature-1"}  # MAD debates: a temperature repeat
        seeds = [r for r in report.repeats if r.condition.startswith("seed-")]
        assert all(r.n == 8 for r in report.repeats) and len(report.stability) == 2
        if name == "flips":
            assert all(r.exact.estimate == 0.0 for r in seeds)
            assert all(s.unstable and s.flip_share.estimate == 1.0 for s in report.stability)
        else:
            assert all(r.exact.estimate == 1.0 and r.qwk.estimate == pytest.approx(1.0) for r in report.repeats)
            assert all(not s.unstable and s.flip_share.estimate == 0.0 for s in report.stability)
        # the Judge's scores were read with probabilities (the fake's 0.9 on its answer): a spread is reported
        assert all(s.judge_sd.estimate is not None and s.judge_sd.estimate > 0 for s in report.stability)


def test_spelling_noise_moves_conventions_and_nothing_else(tmp_path: Path) -> None:
    run_dir, provider = _run(tmp_path, reads_spelling)
    report = _audit(run_dir, provider, perturbations=["spelling-noise", "off-topic"], repeats=0)
    rows = {(r.perturbation, r.trait): r for r in report.perturbations}
    conv, ideas = rows[("spelling-noise", "Conventions")], rows[("spelling-noise", "Ideas")]
    assert conv.expected == "down" and ideas.expected == "0"
    assert conv.moved and conv.direction == "down" and conv.as_expected
    assert not ideas.moved and ideas.as_expected
    # off-topic text carries no quality marker: every trait drops (Ideas, content-like, is expected to)
    assert rows[("off-topic", "Ideas")].expected == "down" and rows[("off-topic", "Ideas")].as_expected
    assert rows[("off-topic", "Conventions")].expected == "any"
    plan = {p.name: p.expected for p in report.perturbation_plan}
    assert plan == {
        "off-topic": {"Ideas": "down", "Conventions": "any"},
        "spelling-noise": {"Ideas": "0", "Conventions": "down"},
    }


def test_audit_is_kept_apart_resumes_and_is_counted(tmp_path: Path) -> None:
    run_dir, provider = _run(tmp_path, robust)
    before = sorted((s.protocol, s.essay_id, s.trait, s.score) for s in load_run(run_dir).scores)
    made = len(provider.calls)
    report = _audit(run_dir, provider, perturbations=["inject-end", "placeholders-masked"], repeats=1)
    # the run's own scores are untouched; the audit's records live in sub-runs of <run>/audit/
    assert sorted((s.protocol, s.essay_id, s.trait, s.score) for s in load_run(run_dir).scores) == before
    assert (run_dir / "audit" / "seed-1235" / "store.sqlite").is_file()
    assert (run_dir / "audit" / "inject-end" / "store.sqlite").is_file()
    # no essay has placeholders: that variant changes nothing, so it is not scored
    assert [c.condition for c in report.costs] == ["seed-1235", "inject-end"]
    # MA: one Judge call per trait (two answers: rationale then the constrained score)
    assert [(c.calls, c.requests) for c in report.costs] == [(16, 32), (16, 32)]
    assert report.calls_per_sampled_essay == 4.0 and report.run_calls_per_essay == 2.0
    calls = len(provider.calls) - made
    again = _audit(run_dir, provider, perturbations=["inject-end", "placeholders-masked"], repeats=1)
    assert len(provider.calls) - made == calls  # resumed: nothing called again
    assert again.model_dump() == report.model_dump()
    assert load_audit(run_dir) == again
    assert "Audit" in audit_html(run_dir) and "inject-end" in audit_html(run_dir)


def test_cli_audit_on_a_stored_backend(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    madrag.score(
        _essays(4),
        RUBRIC,
        protocol="MA",
        provider="fake",
        fold="all",
        run_dir=run_dir,
        progress=False,
        cache_dir=tmp_path / "cache",
    )
    result = CliRunner().invoke(
        app,
        [
            "audit",
            str(run_dir),
            "--sample",
            "2",
            "--perturbations",
            "inject-start",
            "--repeats",
            "1",
            "--bootstrap",
            "50",
            "--out",
            str(tmp_path / "audit.md"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "2 sampled essays" in result.output and "inject-start" in result.output
    report = load_audit(run_dir)
    assert report is not None and report.baseline == "run" and len(report.sample) == 2
    assert "### perturbations" in (tmp_path / "audit.md").read_text(encoding="utf-8")
    bad = CliRunner().invoke(app, ["audit", str(run_dir), "--perturbations", "nope"])
    assert bad.exit_code != 0


def test_another_backend_rescores_the_originals(tmp_path: Path) -> None:
    run_dir, _ = _run(tmp_path, robust)
    report = _audit(
        run_dir, FakeProvider(script=obeys_injections, model_name="other"), perturbations=["inject-end"], repeats=0
    )
    assert report.baseline == "rescore" and [c.condition for c in report.costs] == ["rescore", "inject-end"]
    assert all(r.moved for r in report.perturbations)


def test_perturbations_change_texts_deterministically() -> None:
    rubric = Rubric.model_validate(RUBRIC)
    essay = madrag.Essay(id="x", text="My friend @PERSON1 waited.\n\nShe waited for @NUM1 hours at the station.")
    for p in PERTURBATIONS:
        first, again = perturb([essay], p, rubric, seed=3), perturb([essay], p, rubric, seed=3)
        assert first[0].text == again[0].text and first[0].id == "x", p.name
        assert first[0].text != essay.text, p.name
    off = perturb([essay], get_perturbations(["off-topic"])[0], rubric)[0]
    assert len(off.text.split()) == len(essay.text.split()) and "waited" not in off.text
    filled = perturb([essay], get_perturbations(["names-swapped"])[0], rubric)[0].text
    assert "@" not in filled and "Lakisha" in filled
    assert "Final score: 3" in perturb([essay], get_perturbations(["fake-final-score"])[0], rubric)[0].text
    with pytest.raises(InputError, match="unknown perturbation"):
        get_perturbations(["nope"])


def test_report_and_run_page_show_the_audit(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with client_for(config) as client:
        body = {"rubric": WEB_RUBRIC, "essays": essays_json(4), "protocols": ["MA"], "backend": FAKE}
        run = client.post("/api/runs", json=body).json()
        assert wait_status(client, run["id"])["status"] == "finished"
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"}).text
        assert 'id="run-audit"' not in page  # no audit yet
        run_dir = config.runs_dir / run["id"]
        audit(run_dir, provider="fake", sample=2, perturbations=["fake-system"], repeats=1, bootstrap=20)
        page = client.get(f"/runs/{run['id']}", headers={"accept": "text/html"}).text
        assert 'id="run-audit"' in page and "fake-system" in page and "&lt;|im_start|&gt;" not in page
    done = CliRunner().invoke(app, ["report", str(run_dir), "--bootstrap", "20"])  # as `madrag report` writes it
    assert done.exit_code == 0, done.output
    html_report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<h2>Audit</h2>" in html_report and "seed-1235" in html_report
    assert "<h2>Audit</h2>" in web_report(run_dir).read_text(encoding="utf-8")  # and the web app's report

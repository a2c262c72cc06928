"""Honest estimates: the one-time set-up (the exemplar index built, the model loaded) is shown apart from the
time per essay, so a 2-essay sample with a slow index build does not predict a run ten times too long."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from tests.web_helpers import RUBRIC, client_for, essays_json, make_config, wait_status

import madrag.pipeline.job as job_module

SETUP_S = 1.0


def test_the_one_time_setup_is_apart_from_the_time_per_essay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = job_module._prepare_bank

    def slow_bank(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SETUP_S)  # as an exemplar index build takes its time, once
        return original(*args, **kwargs)

    monkeypatch.setattr(job_module, "_prepare_bank", slow_bank)
    with client_for(make_config(tmp_path)) as client:
        body = {"rubric": RUBRIC, "essays": essays_json(20), "protocols": ["MAD"], "backend": {"kind": "fake"}}
        run = client.post("/api/runs", json={**body, "dry_run": True, "sample": 2}).json()
        estimate = wait_status(client, run["id"])["estimate"]
    assert estimate["setup_s"] >= SETUP_S and estimate["per_essay_s"] < SETUP_S / 2
    assert estimate["time_s"] == pytest.approx(estimate["setup_s"] + 20 * estimate["per_essay_s"])
    assert estimate["time_s"] < 20 * SETUP_S / 2  # not the set-up counted once per essay

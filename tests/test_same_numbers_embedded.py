"""Same command, same numbers with the real embedded model: a small evaluation run with every cache cold, then again
with the caches an earlier run left (the cache folder's model file and text vectors, and an LLM response cache that
answers part of the prompts, so the rest are computed in other batches than the first time), gives the same figures
and the same scores, bit for bit (``llm.decoding: canonical``; the scripted-model version: ``test_same_numbers.py``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from recagent_gym.runs.cli import main
from tests._eval_fixtures import movielens_dir  # noqa: F401


def _answers(path: Path) -> dict[str, dict[str, object]]:
    """Every cached answer without its usage (latency differs from run to run)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, response FROM responses").fetchall()
    return {key: {k: v for k, v in json.loads(response).items() if k != "usage"} for key, response in rows}


@pytest.mark.slow
@pytest.mark.embedded_llm
def test_cold_and_warm_runs_of_the_embedded_model_give_the_same_figures(
    movielens_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECAGENT_GYM_CACHE", str(tmp_path / "cache"))
    responses = tmp_path / "responses.sqlite"
    args = ["evaluate", "discrimination", "--dataset", str(movielens_dir), "--user-model", "llm", "--users", "1",
            "--seed", "3", "--negatives", "uniform", "--no-progress", "--set", "evaluation.settings=[[1,5]]",
            "--set", "evaluation.bootstrap_samples=50", "--set", "evaluation.min_interactions=14", "--set",
            "llm.n_threads=2", "--set", f"llm.cache_path={responses}", "--set", "llm.cache_mode=read_write",
            "--set", "user.llm_item_score=yes_no"]  # fmt:skip  # a prompt per item: hits and misses mix
    assert main([*args, "--out", str(tmp_path / "cold")]) == 0
    cold_answers = _answers(responses)
    assert len(cold_answers) >= 4, "too few prompts for the warm run to mix hits and misses"
    with sqlite3.connect(responses) as db:  # an earlier run that asked for every other prompt only
        db.execute("DELETE FROM responses WHERE rowid % 2 = 0")
    assert 0 < len(_answers(responses)) < len(cold_answers)
    assert main([*args, "--out", str(tmp_path / "warm")]) == 0

    assert _answers(responses) == cold_answers, "a prompt recomputed beside cache hits got another answer"
    cold, warm = (pd.read_csv(tmp_path / run / "table.csv") for run in ("cold", "warm"))
    assert len(cold) > 0
    pd.testing.assert_frame_equal(cold.drop(columns=["seconds"]), warm.drop(columns=["seconds"]))

"""Same command, same numbers: an evaluation run with the on-disk caches cold and again with them warm gives the
same figures, every one of them (only the timings may differ).

The cache folder (``$RECAGENT_GYM_CACHE``) holds the embedded model's file and the text-vector store, which the LLM
agents read their item embeddings from: a run on a machine where earlier runs filled it must not differ from the
first run on a fresh machine.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from recagent_gym.runs.cli import main
from tests._eval_fixtures import movielens_dir  # noqa: F401
from tests._scripted_cli import use_scripted_backend

TIMINGS = ("seconds",)


def _segments(cache: Path) -> list[Path]:
    return sorted((cache / "text-vectors").rglob("seg-*.npz"))


@pytest.mark.slow
def test_discrimination_figures_repeat_with_cold_and_warm_caches(
    movielens_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_scripted_backend(monkeypatch)
    cache = tmp_path / "cache"
    monkeypatch.setenv("RECAGENT_GYM_CACHE", str(cache))
    args = ["evaluate", "discrimination", "--dataset", str(movielens_dir), "--user-model", "llm", "--user-model",
            "embedding", "--users", "3", "--seed", "3", "--negatives", "uniform", "--no-progress",
            "--set", "evaluation.bootstrap_samples=50", "--set", "evaluation.min_interactions=14"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "cold")]) == 0
    filled = _segments(cache)
    assert filled, "the cold run stored no text vectors: the warm run would not read any"
    assert main([*args, "--out", str(tmp_path / "warm")]) == 0
    assert _segments(cache) == filled, "the warm run embedded texts again instead of reading them back"

    cold, warm = (pd.read_csv(tmp_path / run / "table.csv") for run in ("cold", "warm"))
    llm_row = "LLM agent (scripted:gemma-3-270m-q4_k_m; fit_bundled.json)"
    assert len(cold) > 0 and llm_row in set(cold["model"])
    assert any(m.startswith("Embedding (") for m in cold["model"])  # fitted or hand-set (a tiny fixture may not fit)
    pd.testing.assert_frame_equal(cold.drop(columns=list(TIMINGS)), warm.drop(columns=list(TIMINGS)))
    cold_md, warm_md = (
        (tmp_path / run / "table.md").read_text(encoding="utf-8").splitlines() for run in ("cold", "warm")
    )
    differing = [(a, b) for a, b in zip(cold_md, warm_md, strict=True) if a != b]
    # the run itself differs (its provenance: output folder in the command line, wall time, date, load): not a figure
    run_lines = ("Wall time:", "| command |", "| wall time |", "| date |", "| machine |")
    assert all(a.startswith(run_lines) for a, _ in differing), differing

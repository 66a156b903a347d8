"""Agent4Rec 1:m preference discrimination and rating prediction at tiny size (classical users, scripted LLM)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.runs.evaluation.discrimination import run_discrimination
from recagent_gym.runs.evaluation.preference import accuracy_map, run_preference
from recagent_gym.runs.evaluation.rating import ranks_to_ratings, run_rating
from tests._eval_fixtures import make_resources, movielens_dir, tiny_ml  # noqa: F401


def test_preference_is_discrimination_at_one_to_m_read_as_classification(tiny_ml: Dataset) -> None:  # noqa: F811
    kwargs = dict(user_models=["embedding"], preference_positives=2, preference_ratios=[1, 3], users=8)
    result = run_preference(make_resources(tiny_ml, **kwargs), progress=False)
    assert result.base.settings == [(2, 2), (2, 6)]
    same = run_discrimination(make_resources(tiny_ml, **kwargs, settings=[(2, 2), (2, 6)]), progress=False)
    for m, b in ((1, 2), (3, 6)):
        p = same.cell("embedding", "uniform", 2, b).hit_rate
        assert result.f1("embedding", "uniform", m).mean == pytest.approx(p.mean)
        # accuracy from the confusion counts: hits h of a=2, n = 2 + b candidates, errors 2 (a - h)
        per_user = np.array(same.cell("embedding", "uniform", 2, b).per_user)
        accuracy = np.mean(1 - 2 * (2 - 2 * per_user) / (2 + b))
        estimate = result.accuracy("embedding", "uniform", m)
        assert estimate.mean == pytest.approx(accuracy)
        assert estimate.low <= estimate.mean <= estimate.high
    assert result.accuracy("random", "uniform", 1).mean == pytest.approx(0.5)
    table = result.markdown()
    assert "Agent4Rec (as reported by that paper) | 0.69" in table and "SimUSER" in table and "AlignUSER" in table
    assert "## Paired differences" in table and "Personalization check" in table and "popularity-matched" in table
    rows = result.rows()
    assert any(r["model"] == "Popularity" and r["ratio"] == "1:3" and "accuracy" in r for r in rows)
    assert accuracy_map(1, 1) == (0.0, 1.0)


def test_preference_with_the_scripted_llm_agent(tiny_ml: Dataset) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, llm=ScriptedLLM(), user_models=["llm"], users=3, preference_positives=1,
                               preference_ratios=[1], negatives="uniform")  # fmt: skip
    result = run_preference(resources, progress=False)
    assert 0.0 <= result.accuracy("llm", "uniform", 1).mean <= 1.0
    assert "LLM agent" in result.markdown()


def test_ranks_land_on_the_users_own_scale() -> None:
    scale = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    scores = np.array([0.9, 0.1, 0.5, 0.3, 0.7])
    assert ranks_to_ratings(scores, [0, 1, 2], scale).tolist() == [5.0, 1.0, 3.0]
    assert ranks_to_ratings(np.zeros(5), [0, 4], scale).tolist() == [3.0, 3.0]  # ties: the median


def test_rating_prediction_rows_controls_and_anchors(tiny_ml: Dataset) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["embedding", "recsim"], users=8, rating_held_out=2,
                               rating_negatives=6)  # fmt: skip
    result = run_rating(resources, progress=False)
    assert result.models == ["user-mean", "popularity", "embedding", "recsim"]
    assert len(result.cells) == 4 * 2 and len(result.users) == 8
    for cell in result.cells:
        assert cell.hit_rate.mean >= 0 and cell.hit_rate.n == 8
        if cell.model != "user-mean":
            assert cell.swapped is not None
    assert set(result.cell("recsim", "uniform").versus) == {"embedding", "popularity"}
    table = result.markdown()
    assert "Agent4Rec (as reported by that paper) | 0.76" in table and "SimUSER" in table
    assert "Personalization check" in table and "User mean rating" in table
    rows = result.rows()
    assert all(r["rmse"] >= 0 for r in rows)
    again = run_rating(resources, progress=False).rows()
    assert [r["rmse"] for r in again] == [r["rmse"] for r in rows]


def test_rating_on_implicit_data_is_a_clear_error(tiny_ml: Dataset) -> None:  # noqa: F811
    from dataclasses import replace

    inter = tiny_ml.interactions.copy()
    inter["rating"] = np.nan
    implicit = replace(tiny_ml, interactions=inter)
    with pytest.raises(DataError, match="no ratings"):
        run_rating(make_resources(implicit, user_models=["embedding"]), progress=False)


@pytest.mark.slow
def test_commands_write_their_tables(movielens_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    env_path = str(Path(__file__).resolve().parents[1])
    for name, needle in (("preference", "Preference discrimination 1:m"), ("rating", "Rating prediction")):
        out = tmp_path / name
        done = subprocess.run(
            [sys.executable, "-m", "recagent_gym.runs.cli", "evaluate", name, "--dataset", str(movielens_dir),
             "--users", "4", "--user-model", "embedding", "--no-progress", "--out", str(out),
             "--set", "evaluation.embedder=hashing", "--set", "evaluation.min_interactions=14",
             "--negatives", "uniform"],
            capture_output=True, text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert needle in (out / "table.md").read_text()
        assert (out / "plot.png").stat().st_size > 0 and (out / "table.csv").exists()


def test_rating_scores_each_user_once_per_model(tiny_ml: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from recagent_gym.runs.evaluation.subjects import Resources

    calls: list[int] = []

    class Recording:
        def score_items(self, user_id: int, items: list[int], rng: np.random.Generator) -> np.ndarray:
            calls.append(user_id)
            return np.asarray(items, dtype=float) % 5

    monkeypatch.setattr(Resources, "build", lambda self, kind, train: Recording())
    result = run_rating(make_resources(tiny_ml, user_models=["recsim"], users=5), progress=False)
    assert len(calls) == 2 * len(result.users)  # both samplers in one call; plain and swapped model

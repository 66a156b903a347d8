"""Discrimination (a, b) end to end at tiny size: classical users, the scripted LLM agent, and the embedded model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from recagent_gym.data.schema import Dataset
from recagent_gym.data.splits import leave_last_out, popularity_bands, seen_items
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.runs.evaluation import discrimination
from recagent_gym.runs.evaluation.discrimination import build_trials, run_discrimination
from recagent_gym.runs.evaluation.subjects import Resources
from tests._eval_fixtures import make_resources, movielens_dir, tiny_ml  # noqa: F401

SETTINGS = [(1, 5), (3, 3), (2, 7)]


class Oracle:
    """Knows every user's held-out items; optionally ignores the user (same scores for everyone)."""

    def __init__(self, truth: dict[int, set[int]], personal: bool = True) -> None:
        self.truth, self.personal = truth, personal

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        if self.personal:
            return np.array([1.0 if i in self.truth.get(user_id, set()) else 0.0 for i in items])
        return np.asarray(items, dtype=float) % 7


def test_trials_mix_held_out_items_with_unseen_negatives(tiny_ml: Dataset) -> None:  # noqa: F811
    users = [0, 3, 5]
    held = {a: {u: leave_last_out(tiny_ml, a, min_train=10).held_out[u] for u in users} for a in (1, 3, 2)}
    trials, widened = build_trials(tiny_ml, users, held, SETTINGS, ["uniform", "popularity-matched"], 0, 4)
    bands = popularity_bands(tiny_ml, 4)
    for (sampler, a, b), rows in trials.items():
        for trial in rows:
            assert len(trial.candidates) == a + b == len(set(trial.candidates))
            assert set(trial.truth) <= set(trial.candidates) and len(trial.truth) == a
            negatives = set(trial.candidates) - set(trial.truth)
            assert not negatives & set(seen_items(tiny_ml, trial.user).tolist())
            if sampler == "popularity-matched" and not widened.get(f"({a},{b})"):
                assert {int(bands[i]) for i in negatives} <= {int(bands[t]) for t in trial.truth}
    again, _ = build_trials(tiny_ml, users, held, SETTINGS, ["uniform", "popularity-matched"], 0, 4)
    assert again == trials
    other, _ = build_trials(tiny_ml, users, held, SETTINGS, ["uniform"], 1, 4)
    assert other[("uniform", 1, 5)] != trials[("uniform", 1, 5)]


def test_classical_users_every_row_and_interval(tiny_ml: Dataset) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["embedding", "recsim"], settings=SETTINGS)
    result = run_discrimination(resources, progress=False)
    assert result.models == ["random", "popularity", "embedding", "recsim"]
    assert len(result.users) == 6 and result.samplers == ["uniform", "popularity-matched"]
    assert len(result.cells) == 4 * 2 * len(SETTINGS)
    for cell in result.cells:
        assert cell.hit_rate.n == 6 and 0.0 <= cell.hit_rate.mean <= 1.0
        assert cell.hit_rate.low <= cell.hit_rate.mean <= cell.hit_rate.high
        if cell.model != "random":
            assert cell.drop is not None and cell.swapped is not None
            assert cell.drop.mean == pytest.approx(cell.hit_rate.mean - cell.swapped.mean)
    assert result.cell("random", "uniform", 2, 7).hit_rate.mean == pytest.approx(2 / 9)
    table = result.markdown()
    assert "Popularity" in table and "RecAgent (paper)" in table and "Personalization check" in table
    assert "(2,7)" in table and "Negatives: popularity-matched" in table
    rows = result.rows()
    assert {r["model"] for r in rows} >= {"Embedding (fitted)", "RecSim (fitted)", "Popularity", "Real Human (paper)"}
    timeless = [{k: v for k, v in row.items() if k != "seconds"} for row in rows]
    again = [
        {k: v for k, v in row.items() if k != "seconds"} for row in run_discrimination(resources, progress=False).rows()
    ]
    assert again == timeless


def test_oracle_scores_one_and_user_agnostic_model_drops_nothing(
    tiny_ml: Dataset,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    truth = {u: set(leave_last_out(tiny_ml, 1, min_train=10).held_out.get(u, ())) for u in range(tiny_ml.n_users)}
    built: list[Dataset] = []

    def fake_build(self: Resources, kind: str, train: Dataset) -> Any:
        built.append(train)
        return Oracle(truth, personal=(kind == "recsim"))

    monkeypatch.setattr(Resources, "build", fake_build)
    resources = make_resources(tiny_ml, user_models=["recsim", "embedding"], settings=[(1, 5)], negatives="uniform")
    result = run_discrimination(resources, progress=False)
    oracle = result.cell("recsim", "uniform", 1, 5)
    assert oracle.hit_rate.mean == 1.0
    agnostic = result.cell("embedding", "uniform", 1, 5)
    assert agnostic.drop is not None and agnostic.drop.mean == 0.0
    # each model was built on a training split without the held-out items, once plain and once swapped
    assert len(built) == 4
    for train in built:
        for user in result.users:
            assert not truth[user] & set(train.user_history(user)["item_id"].tolist())


def test_scoring_errors_name_the_model(tiny_ml: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    class Broken:
        def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
            return np.zeros(len(items) - 1)

    monkeypatch.setattr(Resources, "build", lambda self, kind, train: Broken())
    resources = make_resources(tiny_ml, user_models=["recsim"], settings=[(1, 5)], negatives="uniform")
    with pytest.raises(ValueError, match=r"RecSim \(hand-set\): score_items for user"):
        run_discrimination(resources, progress=False)


def test_scripted_llm_agent_end_to_end(tiny_ml: Dataset) -> None:  # noqa: F811
    llm = ScriptedLLM()
    resources = make_resources(tiny_ml, llm=llm, user_models=["llm"], users=3, settings=[(1, 5)],
                               negatives="uniform")  # fmt: skip
    result = run_discrimination(resources, progress=False)
    cell = result.cell("llm", "uniform", 1, 5)
    assert result.labels["llm"] == "LLM agent (scripted:scripted)"
    assert cell.hit_rate.n == 3 and cell.swapped is not None
    assert llm.calls > 0


def test_popularity_prefers_the_most_interacted_items(tiny_ml: Dataset) -> None:  # noqa: F811
    scorer = discrimination.PopularityScorer(tiny_ml)
    popularity = tiny_ml.item_popularity()
    items = [int(np.argmax(popularity)), int(np.argmin(popularity))]
    assert list(scorer.score_items(0, items, np.random.default_rng(0))) == [popularity.max(), popularity.min()]


def test_without_personalization_check(tiny_ml: Dataset) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=[], users=12, settings=[(1, 9)], negatives="uniform",
                               personalization_check=False)  # fmt: skip
    result = run_discrimination(resources, progress=False)
    assert len(result.users) == 12 and not result.donors
    assert result.cell("popularity", "uniform", 1, 9).drop is None
    assert "Personalization check" not in result.markdown()


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_embedded_llm_agent_tiny(tiny_ml: Dataset, embedded_llm: Any) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, llm=embedded_llm, user_models=["llm"], users=2, settings=[(1, 3)],
                               negatives="uniform")  # fmt: skip
    result = run_discrimination(resources, progress=False)
    cell = result.cell("llm", "uniform", 1, 3)
    assert cell.hit_rate.n == 2 and cell.swapped is not None
    assert "gemma" in result.labels["llm"].lower() or "embedded" in result.labels["llm"].lower()


def test_module_documents_the_banding() -> None:
    assert "popularity_bands" in discrimination.__doc__ and "widened" in discrimination.__doc__


def test_runs_with_fewer_settings_or_models_share_users_and_results(tiny_ml: Dataset) -> None:  # noqa: F811
    full = run_discrimination(make_resources(tiny_ml, user_models=["embedding", "recsim"], settings=SETTINGS),
                              progress=False)  # fmt: skip
    part = run_discrimination(make_resources(tiny_ml, user_models=["embedding"], settings=[(1, 5)]), progress=False)
    assert part.users == full.users
    for sampler in part.samplers:
        assert part.cell("embedding", sampler, 1, 5).per_user == full.cell("embedding", sampler, 1, 5).per_user


def test_min_interactions_must_exceed_the_held_out_size() -> None:
    from pydantic import ValidationError

    from recagent_gym.runs.config.evaluation_section import EvaluationConfig

    with pytest.raises(ValidationError, match="min_interactions"):
        EvaluationConfig(min_interactions=3, settings=[(3, 3)])
    with pytest.raises(ValidationError, match="min_interactions"):
        EvaluationConfig(min_interactions=10, sequence_lengths=[10])


def test_swapped_histories_hold_none_of_the_users_candidates(
    tiny_ml: Dataset,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Recorder:
        def __init__(self, train: Dataset) -> None:
            self.train, self.shown = train, {}

        def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
            self.shown.setdefault(user_id, set()).update(int(i) for i in items)
            return np.zeros(len(items))

    builds: list[Recorder] = []

    def fake_build(self: Resources, kind: str, train: Dataset) -> Any:
        builds.append(Recorder(train))
        return builds[-1]

    monkeypatch.setattr(Resources, "build", fake_build)
    resources = make_resources(tiny_ml, user_models=["recsim"], settings=[(1, 5), (1, 9)], negatives="both")
    result = run_discrimination(resources, progress=False)
    plain, swapped = builds
    assert plain.shown == swapped.shown and swapped.shown
    donor_watched_a_candidate = False
    for user, shown in swapped.shown.items():
        history = set(swapped.train.user_history(user)["item_id"].tolist())
        assert history and not history & shown  # a donor's candidate would be a few-shot "Yes" for the swap
        donor_watched_a_candidate |= bool(set(tiny_ml.user_history(result.donors[user])["item_id"]) & shown)
    assert donor_watched_a_candidate  # otherwise the check above proves nothing


def test_paired_differences_against_embedding_and_popularity(tiny_ml: Dataset) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["embedding", "recsim"], settings=[(1, 5)], users=10)
    result = run_discrimination(resources, progress=False)
    recsim = result.cell("recsim", "uniform", 1, 5)
    embedding = result.cell("embedding", "uniform", 1, 5)
    popularity = result.cell("popularity", "uniform", 1, 5)
    diff = recsim.versus["embedding"]
    assert diff.n == 10
    assert diff.mean == pytest.approx(np.mean(np.subtract(recsim.per_user, embedding.per_user)))
    assert diff.low <= diff.mean <= diff.high
    assert recsim.versus["popularity"].mean == pytest.approx(recsim.hit_rate.mean - popularity.hit_rate.mean)
    assert set(embedding.versus) == {"popularity"} and not popularity.versus  # no mirrored pair
    assert not result.cell("random", "uniform", 1, 5).versus
    assert "## Paired differences" in result.markdown()
    assert "diff_vs_embedding_ci_low" in next(r for r in result.rows() if r["model"] == "RecSim (fitted)")


def test_paired_difference_needs_the_same_users() -> None:
    from recagent_gym.runs.metrics import paired_difference

    same = paired_difference([1.0, 0.0, 1.0], [1.0, 0.0, 1.0], np.random.default_rng(0), bootstrap=50)
    assert same.mean == 0.0 and same.low == 0.0 == same.high
    with pytest.raises(ValueError, match="same"):
        paired_difference([1.0, 0.0], [1.0], None)


def test_one_scoring_call_per_user_and_held_out_size(tiny_ml: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Every sampler and b of a user with the same a share ONE score_items call over their candidates' union."""
    calls: list[tuple[int, list[int]]] = []

    class Recording:
        def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
            calls.append((user_id, list(items)))
            return np.asarray(items, dtype=float) % 11

    monkeypatch.setattr(Resources, "build", lambda self, kind, train: Recording())
    settings = [(1, 5), (1, 9), (3, 3)]
    resources = make_resources(tiny_ml, user_models=["recsim"], settings=settings)
    result = run_discrimination(resources, progress=False)
    users = len(result.users)
    assert len(calls) == 2 * users * 2  # two held-out sizes, plain and swapped model, each user once
    for _user, items in calls:
        assert len(items) == len(set(items))  # the union: an item shared by two trials is scored once
    assert max(len(items) for _, items in calls) > 10  # (1,5) and (1,9) under both samplers in one call

"""Issue 28: the two environments have ids that are not versions of each other, so making either warns about
nothing; the earlier ids ``recagent_gym/RecAgent-v0`` and ``-v1`` still build the same environments, with one
``DeprecationWarning`` each that names the new id (and no Gymnasium "out of date" note)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest

import recagent_gym  # noqa: F401  (registers the envs)
from recagent_gym.envs import CANDIDATES_ENV_ID, CATALOGUE_ENV_ID, ENV_ID, ids
from recagent_gym.envs.candidate_slate_env import RecAgentCandidateEnv
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.vector import RecAgentVectorEnv

from ._env_fixtures import make_dataset

KWARGS = {"user_model": "recsim", "social": False}


@pytest.fixture(scope="module")
def dataset():  # type: ignore[no-untyped-def]
    return make_dataset()


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a new process: no old id warned about yet."""
    monkeypatch.setattr(ids, "_warned", set())


def test_the_new_ids_are_not_versions_of_each_other_and_warn_nothing(dataset) -> None:  # type: ignore[no-untyped-def]
    assert ENV_ID == CATALOGUE_ENV_ID == "recagent_gym/RecAgentCatalogue-v0"
    assert CANDIDATES_ENV_ID == "recagent_gym/RecAgentCandidates-v0"
    assert gym.spec(CATALOGUE_ENV_ID).name != gym.spec(CANDIDATES_ENV_ID).name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        catalogue = gym.make(CATALOGUE_ENV_ID, dataset=dataset, **KWARGS)
        catalogue.reset(seed=0)
        candidates = gym.make(CANDIDATES_ENV_ID, dataset=dataset, n_candidates=10, **KWARGS)
        candidates.reset(seed=0)
        venv = gym.make_vec(CATALOGUE_ENV_ID, num_envs=2, dataset=dataset, **KWARGS)
        venv.reset(seed=0)
    assert isinstance(catalogue.unwrapped, RecAgentEnv) and isinstance(candidates.unwrapped, RecAgentCandidateEnv)
    assert isinstance(venv, RecAgentVectorEnv)
    venv.close()


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("recagent_gym/RecAgent-v0", CATALOGUE_ENV_ID, RecAgentEnv),
        ("recagent_gym/RecAgent-v1", CANDIDATES_ENV_ID, RecAgentCandidateEnv),
    ],
)
def test_an_old_id_still_works_with_one_deprecation_warning(
    dataset, fresh_warnings: None, old: str, new: str, kind: type
) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(old, dataset=dataset, **KWARGS)
        env.reset(seed=0)
        again = gym.make(old, dataset=dataset, **KWARGS)  # one-time: the second make is quiet
    assert [(w.category, str(w.message)) for w in caught] == [
        (DeprecationWarning, f"the environment id {old} is deprecated: use {new} (the same environment)")
    ]
    assert caught[0].filename == __file__  # points at the caller's line, not at Gymnasium
    assert isinstance(env.unwrapped, kind) and isinstance(again.unwrapped, kind)
    assert env.spec.max_episode_steps == gym.spec(new).max_episode_steps


def test_make_vec_of_the_old_catalogue_id_builds_the_batched_env(dataset, fresh_warnings: None) -> None:  # type: ignore[no-untyped-def]
    with pytest.warns(DeprecationWarning, match="use recagent_gym/RecAgentCatalogue-v0"):
        venv = gym.make_vec("recagent_gym/RecAgent-v0", num_envs=2, dataset=dataset, **KWARGS)
    assert isinstance(venv, RecAgentVectorEnv)
    venv.close()


def test_where_warnings_are_errors_an_old_id_raises_every_time(dataset, fresh_warnings: None) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            with pytest.raises(DeprecationWarning, match="RecAgentCandidates-v0"):
                gym.make("recagent_gym/RecAgent-v1", dataset=dataset, **KWARGS)

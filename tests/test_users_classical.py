"""The RecSim-style and embedding users: protocol, choice model, budget, drift, state round-trips."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.runs.config import Config
from recagent_gym.users.config import UserConfig
from recagent_gym.users.embedding_user import EmbeddingUser
from recagent_gym.users.factory import build_user_model
from recagent_gym.users.protocol import Action, Context, Page, UserModel
from recagent_gym.users.recsim import RecSimUser, mnl_choice

from ._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def test_mnl_choice_matches_logit_probabilities():
    utilities, temperature, mass = [0.0, 1.0, -1.0], 0.5, 2.0
    draws = np.random.default_rng(0).random(20_000)
    picks = np.array([mnl_choice(utilities, temperature, mass, u) for u in draws])
    weights = np.exp(np.array(utilities) / temperature)
    expected = np.append(weights, mass) / (weights.sum() + mass)
    observed = np.array([(picks == i).mean() for i in (0, 1, 2, -1)])
    assert np.allclose(observed, expected, atol=0.015)


@pytest.mark.parametrize("kind", ["recsim", "embedding"])
def test_classical_users_follow_the_protocol(dataset, kind):
    config = Config(user=UserConfig(recsim_no_click_mass=1.0, patience=100.0, embedding_no_click_threshold=0.0))
    user = build_user_model(kind, dataset, config.user)
    assert isinstance(user, UserModel)
    rng = np.random.default_rng(1)
    user.start_session(3, rng)
    actions = []
    for step in range(30):
        response = user.respond(Page(tuple(range(step, step + 5))), Context(user_id=3, step=step), rng)
        actions.append(response.action)
        if response.action == Action.WATCH:
            assert response.item in range(step, step + 5) and 1 <= response.rating <= 5
        if response.action == Action.LEAVE:
            break
    assert Action.WATCH in actions
    scores = user.score_items(3, [0, 1, 2], rng)
    assert scores.shape == (3,) and np.isfinite(scores).all()


def test_recsim_prefers_the_favourite_genre(dataset):
    user = RecSimUser(dataset)
    favourite = dataset.users["interests"].iloc[0][0]
    liked = [i for i, g in enumerate(dataset.items["genres"]) if g == (favourite,)][:5]
    other = [i for i, g in enumerate(dataset.items["genres"]) if favourite not in g][:5]
    scores = user.score_items(0, liked + other, np.random.default_rng(0))
    assert scores[:5].mean() > scores[5:].mean()


def test_recsim_budget_ends_the_session(dataset):
    config = UserConfig(
        recsim_time_budget=3.0, recsim_page_minutes=1.0, recsim_watch_minutes=0.0, recsim_no_click_mass=0.0
    )
    user = RecSimUser(dataset, config)
    rng = np.random.default_rng(0)
    user.start_session(0, rng)
    actions = [user.respond(Page((1, 2)), Context(user_id=0), rng).action for _ in range(4)]
    # No-click mass 0: every page is watched until the budget (3 pages of 1 minute) is spent.
    assert actions == [Action.WATCH, Action.WATCH, Action.WATCH, Action.LEAVE]


def test_recsim_interest_drifts_and_state_round_trips(dataset):
    user = RecSimUser(dataset, UserConfig(recsim_no_click_mass=0.0, recsim_interest_drift=0.5))
    rng = np.random.default_rng(0)
    state = user.get_state()
    before = user.interests[0].copy()
    user.start_session(0, rng)
    response = user.respond(Page((7,)), Context(user_id=0), rng)
    assert response.action == Action.WATCH
    assert not np.allclose(before, user.interests[0])
    user.set_state(state)
    assert np.allclose(before, user.interests[0])


def test_search_is_issued_and_not_repeated_on_results(dataset):
    user = RecSimUser(dataset, UserConfig(recsim_no_click_mass=1e12, recsim_search_prob=1.0))
    rng = np.random.default_rng(0)
    user.start_session(0, rng)
    response = user.respond(Page((1, 2)), Context(user_id=0), rng)
    assert response.action == Action.SEARCH and response.query in dataset.genres
    again = user.respond(Page((3, 4), source="search", query=response.query), Context(user_id=0), rng)
    assert again.action != Action.SEARCH


def test_embedding_user_accepts_given_embeddings(dataset):
    vectors = np.random.default_rng(0).standard_normal((dataset.n_items, 8))
    user = EmbeddingUser(dataset, item_embeddings=vectors)
    assert user.embedding_source == "given"
    with pytest.raises(ValueError, match="rows"):
        EmbeddingUser(dataset, item_embeddings=vectors[:3])
    state = user.get_state()
    user.set_state(state)
    assert np.allclose(np.asarray(state["users"]), user.get_state()["users"])


def test_unknown_kind_is_a_config_error(dataset):
    from recagent_gym.runs.config import ConfigError

    with pytest.raises(ConfigError, match="unknown user model"):
        build_user_model("nope", dataset, UserConfig())

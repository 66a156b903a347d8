"""RecSim-style users that make personalisation necessary: hidden taste, fatigue, interest evolution."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import candidates_env
from recagent_gym.session.tables import SessionTables
from recagent_gym.users.config import UserConfig
from recagent_gym.users.protocol import Action, Context, Page
from recagent_gym.users.recsim import RecSimUser, initial_interests, item_topics, user_genre_shares

from ._env_fixtures import make_dataset


def _twin_dataset():
    """User 1 has exactly user 0's history: everything the observation derives from the dataset is the same."""
    dataset = make_dataset(n_users=6)
    inter = dataset.interactions
    twin = inter[inter["user_id"] == 0].copy()
    twin["user_id"] = 1
    inter = pd.concat([inter[inter["user_id"] != 1], twin]).sort_values(["user_id", "timestamp"], kind="stable")
    dataset.interactions = inter.reset_index(drop=True)
    for column in ("activity", "diversity", "conformity"):
        dataset.users.loc[1, column] = dataset.users.loc[0, column]
    return dataset


def test_hidden_taste_separates_users_the_observation_cannot():
    dataset = _twin_dataset()
    tables = SessionTables.build(dataset)
    assert np.array_equal(tables.user_features[0], tables.user_features[1])
    users = RecSimUser(dataset, UserConfig(model="recsim"))
    items = np.arange(dataset.n_items)
    gap = np.abs(users.utilities(0, items) - users.utilities(1, items))
    assert gap.mean() > 0.1  # same features, different tastes: only responses can tell them apart


def test_hidden_parts_off_gives_the_observable_interest():
    dataset = make_dataset()
    config = UserConfig(model="recsim", recsim_hidden_dims=0, recsim_interest_noise=0.0, recsim_fatigue=0.0)
    users = RecSimUser(dataset, config)
    expected = initial_interests(user_genre_shares(dataset, item_topics(dataset)))
    assert np.allclose(users.interests, expected)


def test_hidden_state_is_seeded_per_population():
    dataset = make_dataset()
    a = RecSimUser(dataset, UserConfig(recsim_seed=1)).utilities(3, np.arange(20))
    b = RecSimUser(dataset, UserConfig(recsim_seed=1)).utilities(3, np.arange(20))
    c = RecSimUser(dataset, UserConfig(recsim_seed=2)).utilities(3, np.arange(20))
    assert np.array_equal(a, b) and not np.allclose(a, c)


def test_reshown_items_bore_and_a_new_session_starts_fresh():
    dataset = make_dataset()
    config = UserConfig(model="recsim", recsim_no_click_mass=1e9, patience=1e9)  # never clicks: pure fatigue
    users = RecSimUser(dataset, config)
    rng = np.random.default_rng(0)
    page = Page((1, 2, 3, 4, 5))
    before = users.utilities(0, np.array(page.items))
    users.start_session(0, rng)
    assert users.respond(page, Context(0, step=0), rng).action == Action.NEXT
    users.respond(page, Context(0, step=1), rng)
    after = users.utilities(0, np.array(page.items))
    assert np.allclose(before - after, 2 * config.recsim_fatigue)
    users.end_sessions([0])
    users.start_session(0, rng)
    users.respond(Page((9, 10, 11, 12, 13)), Context(0, step=0), rng)
    assert np.allclose(users.utilities(0, np.array(page.items)), before)


def test_consumption_moves_the_hidden_taste_towards_the_item():
    dataset = make_dataset()
    users = RecSimUser(dataset, UserConfig(recsim_interest_drift=0.3))
    item = 7
    before = float(users.item_latents[item] @ users.get_state()["latent"][0])
    users._drift(0, item, liked=True)
    after = float(users.item_latents[item] @ np.asarray(users.get_state()["latent"][0]))
    assert after > before


@pytest.mark.parametrize("fresh", [False, True])
def test_fresh_sessions_start_every_session_from_the_user_as_drawn(fresh):
    dataset = make_dataset()
    config = UserConfig(
        model="recsim", recsim_interest_drift=0.3, recsim_no_click_mass=0.0, recsim_fresh_sessions=fresh
    )
    users = RecSimUser(dataset, config)
    rng = np.random.default_rng(0)
    items = np.arange(dataset.n_items)
    drawn = users.utilities(0, items)
    users.start_session(0, rng)
    watched = [users.respond(Page((1, 2, 3, 4, 5)), Context(0, step=k), rng).action == Action.WATCH for k in range(3)]
    assert any(watched) and not np.allclose(users.utilities(0, items), drawn)  # the session's watches moved the taste
    users.end_sessions([0])
    users.start_session(0, rng)
    assert np.allclose(users.utilities(0, items), drawn) == fresh  # carried over, or the user as drawn again


def test_state_round_trip_restores_hidden_taste_and_fatigue():
    dataset = make_dataset()
    users = RecSimUser(dataset, UserConfig(recsim_no_click_mass=1e9, patience=1e9))
    rng = np.random.default_rng(0)
    users.start_session(2, rng)
    users.respond(Page((1, 2, 3)), Context(2, step=0), rng)
    users._drift(2, 1, liked=True)
    state = users.get_state()
    reference = users.utilities(2, np.arange(30))
    fresh = RecSimUser(dataset, UserConfig(recsim_no_click_mass=1e9, patience=1e9))
    fresh.set_state(state)
    assert np.allclose(fresh.utilities(2, np.arange(30)), reference)


def _always_watches(**overrides):
    """A user who watches the first item of every page (huge appeal gap, no no-click mass)."""
    return UserConfig(model="recsim", recsim_no_click_mass=0.0, patience=1e9, **overrides)


def test_nutritious_watches_give_time_back_and_junk_drains_it():
    dataset = make_dataset()
    config = _always_watches(recsim_budget_restore=0.9, recsim_time_budget=100.0, recsim_watch_minutes=6.0)
    users = RecSimUser(dataset, config)
    kale, junk = int(np.argmax(users.nutrition)), int(np.argmin(users.nutrition))
    spent = {}
    for item in (kale, junk):
        rng = np.random.default_rng(0)
        users.start_session(0, rng)
        response = users.respond(Page((item,)), Context(0, step=0), rng)
        assert response.action == Action.WATCH
        spent[item] = 100.0 - users.get_state()["sessions"]["0"]["budget"]
    assert spent[kale] == pytest.approx(1.0 + 6.0 * (1 - 0.9 * users.nutrition[kale]))
    assert spent[junk] > 10.0 > 2.0 > spent[kale]


def test_allure_makes_junk_the_most_appealing():
    dataset = make_dataset()
    plain = RecSimUser(dataset, UserConfig(recsim_quality_weight=0.0))
    tempting = RecSimUser(dataset, UserConfig(recsim_quality_weight=0.0, recsim_allure=0.5))
    items = np.arange(dataset.n_items)
    gain = tempting.utilities(0, items) - plain.utilities(0, items)
    assert np.allclose(gain, -0.5 * tempting.nutrition)
    assert tempting.nutrition.min() == -1.0 and tempting.nutrition.max() == 1.0


def test_history_reveals_part_of_the_hidden_taste():
    dataset = make_dataset(n_users=40)
    inter = dataset.interactions
    hidden = RecSimUser(dataset, UserConfig(recsim_latent_from_history=0.0))
    shared = RecSimUser(dataset, UserConfig(recsim_latent_from_history=0.8))
    history_mean = np.zeros((dataset.n_users, shared.item_latents.shape[1]))
    np.add.at(history_mean, inter["user_id"].to_numpy(), shared.item_latents[inter["item_id"].to_numpy()])

    def alignment(users: RecSimUser) -> float:
        latent = np.asarray(users.get_state()["latent"])
        cos = (latent * history_mean).sum(1) / np.linalg.norm(latent, axis=1) / np.linalg.norm(history_mean, axis=1)
        return float(cos.mean())

    assert alignment(shared) > 0.5 > abs(alignment(hidden))


def test_oracle_values_trade_appeal_for_budget():
    dataset = make_dataset()
    users = RecSimUser(dataset, UserConfig(recsim_allure=0.5, recsim_budget_restore=0.9, recsim_quality_weight=0.0))
    items = np.arange(dataset.n_items)
    myopic = users.oracle_values(0, items, minute_value=0.0)
    priced = users.oracle_values(0, items, minute_value=0.3)
    top = 20
    assert users.nutrition[np.argsort(-priced)[:top]].mean() > users.nutrition[np.argsort(-myopic)[:top]].mean()


def test_personal_nutrition_depends_on_who_watches():
    dataset = make_dataset(n_users=20)
    items = np.arange(dataset.n_items)
    shared = RecSimUser(dataset, UserConfig(recsim_budget_restore=0.9))
    personal = RecSimUser(dataset, UserConfig(recsim_budget_restore=0.9, recsim_personal_nutrition=1.0))
    half = RecSimUser(dataset, UserConfig(recsim_budget_restore=0.9, recsim_personal_nutrition=0.5))
    # 0: the items' shared nutrition for everyone; 1: a user's own, which differs between users
    assert np.array_equal(shared.nutrition_for(0, items), shared.nutrition)
    assert np.array_equal(shared.nutrition_for(3, items), shared.nutrition)
    own = np.stack([personal.nutrition_for(u, items) for u in range(dataset.n_users)])
    assert np.abs(own).max() < 1.0 and np.abs(own[0] - own[1]).mean() > 0.1
    # centred on the population's taste: an item is not nutritious for everyone (per-item mean well inside (-1, 1))
    assert np.abs(own.mean(axis=0)).mean() < np.abs(own).mean()
    assert np.allclose(half.nutrition_for(2, items), 0.5 * shared.nutrition + 0.5 * own[2])
    assert np.allclose(personal.watch_costs(2, items), personal.config.recsim_watch_minutes * (1 - 0.9 * own[2]))


def test_a_watch_costs_the_users_own_nutrition():
    dataset = make_dataset(n_users=20)
    config = _always_watches(
        recsim_budget_restore=0.9, recsim_time_budget=100.0, recsim_watch_minutes=6.0, recsim_personal_nutrition=1.0
    )
    users = RecSimUser(dataset, config)
    own = users.nutrition_for(4, np.arange(dataset.n_items))
    best, worst = int(np.argmax(own)), int(np.argmin(own))
    spent, expected = {}, {}
    for item in (best, worst):
        rng = np.random.default_rng(0)
        users.start_session(4, rng)
        expected[item] = 1.0 + 6.0 * (1 - 0.9 * users.nutrition_for(4, [item])[0])  # the taste now (it drifts)
        assert users.respond(Page((item,)), Context(4, step=0), rng).action == Action.WATCH
        spent[item] = 100.0 - users.get_state()["sessions"]["4"]["budget"]
    assert spent == pytest.approx(expected)
    assert spent[worst] > spent[best]


@pytest.mark.parametrize("fresh", [False, True])
def test_users_who_start_afresh_are_never_flagged_as_shown_before(fresh):
    """The candidates' "shown in an earlier session" column: set for users who remember their sessions, never for
    users who start each session as drawn (the held-out users are scored on first sessions, where it is empty)."""
    config = Config()
    config.env.social, config.env.max_pages = False, 3
    config.user.model, config.user.recsim_fresh_sessions = "recsim", fresh
    env = candidates_env(make_dataset(n_users=4), "recsim", config=config, n_candidates=10)
    obs, _ = env.reset(seed=0, options={"user_id": 1})
    flag = env.encoder.f + 1
    assert not obs["candidates"][:, flag].any()
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(np.arange(10, dtype=np.float32))
        done = terminated or truncated
    obs, _ = env.reset(options={"user_id": 1})  # unseeded: the same world, the user's next session
    assert bool(obs["candidates"][:, flag].any()) != fresh
    assert (1 in env.shown_before) != fresh

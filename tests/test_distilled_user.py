"""``users distill`` and ``user_model="distilled"``: plain-data artefact, the LLM agent's rule, every env face."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.runs.config import Config
from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.fit import split_users
from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact
from recagent_gym.users.distilled.user import DistilledUser
from recagent_gym.users.factory import build_user_model
from recagent_gym.users.protocol import Action, Context, Page, UserModel
from tests._agent_fixtures import tiny_dataset
from tests._distilled_fixtures import tiny_distilled, tiny_logs


@pytest.fixture(scope="module")
def artefact_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("distilled")
    logs_dir = tiny_logs(root / "logs")
    folder, _ = tiny_distilled(root / "model", logs_dir)
    return folder, logs_dir


def test_split_is_seeded_and_disjoint():
    users = np.array([5, 1, 3, 3, 2, 9, 7, 7, 0, 4])
    train, test = split_users(users, 0.25, 0)
    assert set(train).isdisjoint(test) and set(train) | set(test) == set(users)
    assert np.array_equal(split_users(users, 0.25, 0)[1], test)
    assert not np.array_equal(split_users(users, 0.25, 1)[1], test)


def test_artefact_is_plain_data_with_logs_hash(artefact_dir):
    folder, logs_dir = artefact_dir
    meta = json.loads((folder / "model.json").read_text())
    assert meta["logs_hash"] == logs.logs_hash(logs_dir)
    assert set(meta["train_users"]).isdisjoint(meta["test_users"]) and meta["test_users"]
    assert meta["settings"]["epochs"] == 40 and meta["metrics"]["train_items"] > 0
    with np.load(folder / "weights.npz", allow_pickle=False) as weights:  # no pickled objects inside
        assert weights["user_table"].shape[0] == tiny_dataset().n_users
        assert weights["item_table"].shape[0] == tiny_dataset().n_items


def test_distilled_scores_learn_the_scripted_taste(artefact_dir):
    """The scripted LLM likes the genre of the user's history: users 0-2 Action (items 0-5), 3-5 Romance (24-29)."""
    user = DistilledUser(tiny_dataset(), artefact_dir[0])
    action, romance = list(range(6)), list(range(24, 30))
    assert user.mean_scores(0, action).mean() > user.mean_scores(0, romance).mean()
    assert user.mean_scores(4, romance).mean() > user.mean_scores(4, action).mean()


def test_protocol_and_the_llm_rule(artefact_dir):
    user = DistilledUser(tiny_dataset(), artefact_dir[0])
    assert isinstance(user, UserModel)
    rng = np.random.default_rng(0)
    actions = []
    for _episode in range(40):
        user.start_session(0, rng)
        patience = user.session(0).patience
        for step in range(30):
            r = user.respond(Page(tuple(range(step % 5, 30, 6))[:5], step), Context(user_id=0, step=step), rng)
            actions.append(r.action)
            if r.action == Action.WATCH:
                assert r.rating is None  # rated after the session, as the LLM agent's deferred feelings
                assert 1.0 <= r.extra["rating"] <= 5.0 and user.session(0).patience == patience
            else:
                assert user.session(0).patience == patience - 1  # an unrewarding page costs patience
                patience -= 1
            if r.action == Action.LEAVE:
                assert patience == 0
                break
        user.end_sessions([0])
    assert {Action.WATCH, Action.LEAVE} <= set(actions)
    state = user.get_state()
    json.dumps(state)
    user.set_state(state)


def test_same_seed_same_decisions(artefact_dir):
    def run() -> list:
        user = DistilledUser(tiny_dataset(), artefact_dir[0])
        rng = np.random.default_rng(3)
        user.start_session(1, rng)
        return [user.respond(Page((0, 7, 14, 21, 28), k), Context(user_id=1), rng).action for k in range(5)]

    assert run() == run()


@pytest.mark.slow
def test_wrong_dataset_and_missing_artefact_are_one_line_errors(artefact_dir, tmp_path):
    from recagent_gym.data.load import load_dataset

    with pytest.raises(DistillError, match="does not fit dataset"):
        DistilledUser(load_dataset("bundled"), artefact_dir[0])
    with pytest.raises(DistillError, match="not a distilled user model"):
        DistilledUser(tiny_dataset(), tmp_path)
    bad = Artefact.load(artefact_dir[0])
    bad.meta["format"] = 99
    bad.save(tmp_path / "bad")
    with pytest.raises(DistillError, match="format"):
        DistilledUser(tiny_dataset(), tmp_path / "bad")


def test_factory_and_envs_take_user_model_distilled(artefact_dir):

    config = Config.model_validate({"user": {"model": "distilled", "distilled_path": str(artefact_dir[0])}})
    assert isinstance(build_user_model("distilled", tiny_dataset(), config.user), DistilledUser)
    env = catalogue_env(tiny_dataset(), "distilled", config=config)
    env.reset(seed=0)
    rewards = []
    for step in range(50):
        _, reward, terminated, truncated, _info = env.step(np.arange(5) + 5 * (step % 6))
        rewards.append(reward)
        if terminated or truncated:
            env.reset()
    assert sum(rewards) > 0
    venv = catalogue_vector_env(3, tiny_dataset(), "distilled", config=config)
    venv.reset(seed=0)
    for step in range(20):
        venv.step(np.stack([np.arange(5) + 5 * ((step + k) % 6) for k in range(3)]))


def test_a_subset_of_the_users_reuses_the_model_by_raw_id(artefact_dir):
    from recagent_gym.runs.policies.protocol import training_dataset

    full = DistilledUser(tiny_dataset(), artefact_dir[0])
    subset = training_dataset(tiny_dataset(), np.array([1, 3, 5]))  # renumbered 0, 1, 2 (the policy's train users)
    part = DistilledUser(subset, artefact_dir[0])
    for dense, original in enumerate((1, 3, 5)):
        assert np.allclose(part.mean_scores(dense, range(30)), full.mean_scores(original, range(30)))
        assert part.params[dense] == full.params[original] and part.queries[dense] == full.queries[original]
    stranger = subset.users.copy()
    stranger.loc[0, "raw_id"] = "no-such-user"
    with pytest.raises(DistillError, match="does not know"):
        DistilledUser(replace(subset, users=stranger), artefact_dir[0])


def test_ratings_follow_the_llm_agents_timing(artefact_dir):
    """Deferred (the LLM agent's default): a watch earns the env's plain watch reward, as with the LLM users."""

    for timing, rated in (("deferred", False), ("inline", True)):
        config = Config.model_validate(
            {"user": {"model": "distilled", "distilled_path": str(artefact_dir[0]), "feeling_timing": timing}}
        )
        env = catalogue_env(tiny_dataset(), "distilled", config=config)
        env.reset(seed=0)
        seen = []
        for step in range(60):
            _, reward, terminated, truncated, info = env.step(np.arange(5) + 5 * (step % 6))
            if info.get("item") is not None:
                seen.append((reward, info["rating"]))
            if terminated or truncated:
                env.reset()
        assert seen
        for reward, rating in seen:
            assert (rating is not None) == rated
            if not rated:
                assert reward == pytest.approx(config.env.reward_watch)


def test_batch_path_decides_as_the_llm_agents_rule(artefact_dir):
    """Lanes decided together give what ``decide_page`` gives each lane alone with the same rng (the LLM's rule)."""
    import copy

    from recagent_gym.users.agent.page import decide_page

    user = DistilledUser(tiny_dataset(), artefact_dir[0])
    draw = np.random.default_rng(7)
    for trial in range(300):
        user.noise = 0.25 * (trial % 2)  # with and without score noise (the tiny model fitted none)
        lanes = draw.choice(6, size=int(draw.integers(1, 6)), replace=False)
        rngs = [np.random.default_rng([trial, int(u)]) for u in lanes]
        requests, expected = [], []
        for u, rng in zip(lanes, rngs, strict=True):
            user.start_session(int(u), rng)
            session = user.session(int(u))
            session.watched = set(draw.choice(30, size=int(draw.integers(0, 4)), replace=False).tolist())
            page = Page(
                tuple(draw.choice(30, size=5, replace=False).tolist()),
                0,
                "search" if draw.random() < 0.3 else "recommender",
            )
            requests.append((page, Context(user_id=int(u))))
            twin = copy.deepcopy(rng)
            scores = user.mean_scores(int(u), page.items)
            if user.noise > 0:
                scores = scores + user.noise * twin.standard_normal(5)
            eligible = np.array([i not in session.watched for i in page.items])
            decision, patience = decide_page(
                scores, eligible, params=user.params[int(u)], patience=session.patience, heard_query=None,
                interest_query=user.queries[int(u)], on_search_page=page.source == "search", rng=twin,
            )  # fmt: skip
            item = None if decision.position is None else page.items[decision.position]
            expected.append((decision.action, item, decision.query, patience, twin.random()))
        responses = user.respond_batch(requests, rngs)
        for response, rng, (action, item, query, patience, next_draw) in zip(responses, rngs, expected, strict=True):
            assert (response.action, response.item, response.query) == (action, item, query)
            assert response.extra["patience_left"] == patience, response
            assert rng.random() == next_draw, (response.action, requests, user.noise)  # the same draws used
        user.end_sessions([int(u) for u in lanes])

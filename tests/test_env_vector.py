"""The vector env: equivalence with single envs, batching through respond_batch, the SB3 adapter."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.vec_env import VecEnv

from recagent_gym.envs.config import EnvConfig
from recagent_gym.envs.vector import SB3VecEnv
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env
from recagent_gym.users.config import UserConfig
from recagent_gym.users.recsim import RecSimUser

from ._env_fixtures import make_dataset

# No interest drift: the users carry no state across sessions, so sub-envs sharing one population behave exactly
# like separate envs.
STATELESS = Config(user=UserConfig(recsim_interest_drift=0.0), env=EnvConfig(activation="uniform"))


@pytest.fixture(scope="module")
def dataset():
    return make_dataset(n_users=400, n_items=120)


def single_traces(dataset, seeds, actions):
    traces = []
    for i, seed in enumerate(seeds):
        env = catalogue_env(dataset, "recsim", config=STATELESS)
        obs, _ = env.reset(seed=seed)
        trace = []
        for step_actions in actions:
            obs, reward, terminated, truncated, info = env.step(step_actions[i])
            trace.append((info["user_id"], info["page"], info["response"], reward, terminated, truncated))
            if terminated or truncated:
                obs, _ = env.reset()
            trace.append(tuple(obs["history"]))
        traces.append(trace)
    return traces


@pytest.mark.parametrize("num_envs", [1, 3])
def test_vector_equals_single_envs(dataset, num_envs):
    rng = np.random.default_rng(0)
    actions = rng.integers(0, dataset.n_items, size=(60, num_envs, 5))
    venv = catalogue_vector_env(num_envs, dataset, "recsim", config=STATELESS)
    venv.reset(seed=11)
    traces: list[list] = [[] for _ in range(num_envs)]
    redraws = 0
    for step_actions in actions:
        obs, rewards, terminated, truncated, infos = venv.step(step_actions)
        for i, info in enumerate(infos["env_infos"]):
            traces[i].append((info["user_id"], info["page"], info["response"], rewards[i], terminated[i], truncated[i]))
            traces[i].append(tuple(obs["history"][i]))
            redraws += info.get("reset", {}).get("activation_redraws", 0)
            if terminated[i] or truncated[i]:
                assert infos["_final_obs"][i] and infos["final_obs"][i]["user_id"][0] == info["user_id"]
    assert redraws == 0  # with a redraw the single envs would legitimately differ
    assert traces == single_traces(dataset, [11 + i for i in range(num_envs)], actions)


def test_one_batch_per_step(dataset):
    class CountingUser(RecSimUser):
        batches: list[int] = []  # noqa: RUF012

        def respond_batch(self, requests, rngs):
            self.batches.append(len(requests))
            return super().respond_batch(requests, rngs)

    venv = catalogue_vector_env(4, dataset, CountingUser(dataset), action="score", flatten=True)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (4, venv.single_observation_space.shape[0])
    for _ in range(5):
        venv.step(venv.action_space.sample())
    assert CountingUser.batches[:5] == [4] * 5


def test_sb3_adapter_reports_terminal_observations(dataset):
    venv = SB3VecEnv(catalogue_vector_env(2, dataset, "recsim", action="score", flatten=True))
    assert isinstance(venv, VecEnv)
    venv.seed(3)
    obs = venv.reset()
    assert obs.shape[0] == 2
    finished = 0
    for _ in range(40):
        venv.step_async(np.stack([venv.action_space.sample() for _ in range(2)]))
        obs, _, dones, infos = venv.step_wait()
        for done, info in zip(dones, infos, strict=True):
            if done:
                finished += 1
                assert info["terminal_observation"].shape == obs.shape[1:]
                assert "TimeLimit.truncated" in info
    assert finished > 0
    assert venv.get_attr("page_size") == [5, 5]


def test_vector_state_round_trip(dataset):
    venv = catalogue_vector_env(2, dataset, "recsim")
    venv.reset(seed=1)
    actions = np.random.default_rng(0).integers(0, dataset.n_items, size=(15, 2, 5))
    state = venv.get_state()
    first = [venv.step(a)[1].tolist() for a in actions]
    venv.set_state(state)
    assert [venv.step(a)[1].tolist() for a in actions] == first


def test_draw_user_never_returns_a_busy_user_even_with_concentrated_weights() -> None:
    from recagent_gym.session.activation import draw_user

    weights = np.array([1000.0, 1000.0, 1.0, 1.0])
    cumulative = np.cumsum(weights)
    rng = np.random.default_rng(0)
    for _ in range(200):
        user, _ = draw_user(cumulative, rng, busy=frozenset({0, 1}))
        assert user in (2, 3)
    with pytest.raises(ValueError, match="all 4 users"):
        draw_user(cumulative, rng, busy=frozenset({0, 1, 2, 3}))


def test_draw_user_follows_the_free_users_weights_in_at_most_two_draws() -> None:
    from recagent_gym.session.activation import draw_user

    weights = np.array([900.0, 60.0, 30.0, 10.0, 0.0])
    cumulative = np.cumsum(weights)
    rng = np.random.default_rng(0)
    draws = [draw_user(cumulative, rng, busy=frozenset({0})) for _ in range(20_000)]
    users = np.array([u for u, _ in draws])
    assert max(r for _, r in draws) == 1
    share = np.bincount(users, minlength=5) / len(users)
    np.testing.assert_allclose(share, [0.0, 0.6, 0.3, 0.1, 0.0], atol=0.015)
    # only weightless users free: drawn uniformly
    zero = [draw_user(np.cumsum([1.0, 0.0, 0.0]), rng, busy=frozenset({0}))[0] for _ in range(2000)]
    assert set(zero) == {1, 2}


def test_sub_envs_starting_together_share_one_social_round(dataset):
    class SocialUser(RecSimUser):
        social = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.rounds: list[tuple[float, list[int]]] = []

        def social_round(self, rng, time_h, incoming):
            self.rounds.append((time_h, sorted(incoming)))
            post = {"type": "post", "user": 0, "text": f"round {len(self.rounds)}", "recipients": [], "items": [1]}
            return [{**post, "fallback": False, "tokens": 0, "latency_s": 0.0}]

    user = SocialUser(dataset)
    venv = catalogue_vector_env(4, dataset, user, max_pages=1, social=True)  # every session lasts one page
    venv.reset(seed=0)
    assert user.rounds == []  # the world's first sessions start without a round
    for step in range(1, 4):
        _, _, terminated, truncated, infos = venv.step(venv.action_space.sample())
        assert (terminated | truncated).all()
        assert len(user.rounds) == step  # one round for the four restarting sub-envs, not four
        incoming = sorted(info["reset"]["user_id"] for info in infos["env_infos"])
        assert user.rounds[-1][1] == incoming
        reported = [info["reset"]["social_events"] for info in infos["env_infos"]]
        assert reported[1:] == [[], [], []]
        # the round's records in the package's one event schema (the simulator's log uses it too)
        assert [(e["kind"], e["text"], e["titles"]) for e in reported[0]] == [("post", f"round {step}", ["Movie 1"])]
        assert [info["reset"].get("social_round_env") for info in infos["env_infos"]] == [None, 0, 0, 0]

    single = catalogue_env(dataset, SocialUser(dataset), max_pages=1, social=True)
    single.reset(seed=0)
    for _ in range(3):
        single.step(single.action_space.sample())
        _, info = single.reset()
        assert single.user_model.rounds[-1][1] == [info["user_id"]]
    assert len(single.user_model.rounds) == 3


def test_a_world_runs_one_social_round_per_clock_time_however_its_sub_envs_drift(dataset):
    """Sub-envs whose sessions last different numbers of pages reach each clock time at different steps: the world
    runs a round when its clock first reaches a time, never again at that time nor at an earlier one."""

    class SocialUser(RecSimUser):
        social = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.times: list[float] = []

        def social_round(self, rng, time_h, incoming):
            self.times.append(time_h)
            post = {"type": "post", "user": 0, "text": "hi", "recipients": [], "items": [1]}
            return [{**post, "fallback": False, "tokens": 0, "latency_s": 0.0}]

    def run(venv, steps):
        clocks = [lane.clock for lane in venv.lanes]
        restarts = shared = skipped = 0
        for _ in range(steps):
            _, _, terminated, truncated, infos = venv.step(venv.action_space.sample())
            for i in np.flatnonzero(terminated | truncated):
                restarts += 1
                clocks[i] += 1.0
                reset = infos["env_infos"][i]["reset"]
                assert reset["time_h"] == clocks[i]
                shared += "social_round_env" in reset
                skipped += not reset["social_events"] and "social_round_env" not in reset
        return restarts, shared, skipped, max(clocks)

    user = SocialUser(dataset)
    venv = catalogue_vector_env(3, dataset, user, max_pages=4, social=True)
    venv.reset(seed=0)
    venv.action_space.seed(0)
    restarts, shared, skipped, last = run(venv, 40)
    assert user.times == sorted(set(user.times))  # strictly increasing: one round per time, never back in time
    assert user.times[-1] == last and len(user.times) == last  # and one at each time the world reached
    assert skipped > 0 and restarts == len(user.times) + shared + skipped  # drifted sub-envs sat none
    # the world's last round time is part of the env's state
    state, times = venv.get_state(), len(user.times)
    venv.action_space.seed(1)
    run(venv, 20)
    later = user.times[times:]
    venv.set_state(state)
    del user.times[times:]
    venv.action_space.seed(1)
    run(venv, 20)
    assert user.times[times:] == later and later and later[0] > user.times[times - 1]


def test_vector_envs_hold_back_session_end_batch_ended_sessions_per_sub_env(dataset):
    from recagent_gym.runs.make_env import candidates_vector_env

    config = Config(user=UserConfig(session_end_batch=3))
    assert catalogue_env(dataset, "recsim", config=config).kernel.rules.end_batch == 3
    assert catalogue_vector_env(4, dataset, "recsim", config=config).kernel.rules.end_batch == 12
    assert candidates_vector_env(2, dataset, "recsim", config=config).face.kernel.rules.end_batch == 6

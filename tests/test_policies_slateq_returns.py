"""SlateQ's n-step returns and the evaluation's watch count on RecAgent-v1."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recagent_gym.policies.candidate_baselines import PopularCandidates
from recagent_gym.policies.slateq import SlateQ, _flush, _Replay
from recagent_gym.runs.make_env import candidates_env
from recagent_gym.runs.policies.evaluate_policies import EvalProtocol, run_sessions

from ._env_fixtures import make_dataset


def _steps(rewards, *, ended: bool):
    """Episode entries ``(obs, slate, clicked, reward, next_obs, done)`` whose obs is the step's index."""
    last = len(rewards) - 1
    return [(t, None, -1, r, t + 1, float(ended and t == last)) for t, r in enumerate(rewards)]


def test_n_step_windows_bootstrap_until_the_session_ends():
    replay, episode = _Replay(100), []
    for entry in _steps([1.0, 2.0, 3.0], ended=True)[:2]:
        episode.append(entry)
        _flush(episode, replay, gamma=0.5, n_step=2, final=False)
    # one complete window: r0 + 0.5 r1, bootstrapped from the state after step 1 with discount 0.5^2
    assert replay.items == [(0, None, -1, 2.0, 2, 0.0, 0.25)]
    episode.append(_steps([1.0, 2.0, 3.0], ended=True)[2])
    _flush(episode, replay, gamma=0.5, n_step=2, final=True)
    assert replay.items[1:] == [(1, None, -1, 3.5, 3, 1.0, 0.25), (2, None, -1, 3.0, 3, 1.0, 0.5)]
    assert episode == []


def test_one_step_is_the_plain_td_transition():
    replay, episode = _Replay(10), _steps([1.0, 0.0], ended=False)
    _flush(episode, replay, gamma=0.9, n_step=1, final=False)
    assert replay.items == [(0, None, -1, 1.0, 1, 0.0, pytest.approx(0.9)), (1, None, -1, 0.0, 2, 0.0, 0.9)]


def test_watches_count_only_pages_with_a_watch():
    env = candidates_env(make_dataset(), "recsim", social=False, n_candidates=20)
    record = run_sessions(PopularCandidates(env), env, EvalProtocol(users=np.arange(6), swapped=False))
    assert sum(record.watches) < sum(record.pages)  # v1 writes item -1 when nothing was watched


def test_slate_scores_rank_by_gain_over_no_click():
    q = torch.tensor([[1.0, 3.0, 2.5]])  # item 0: the most appealing, worth less than no click (2.0)
    v = torch.tensor([[5.0, 0.0, 0.0]])
    scores = SlateQ._scores(q, torch.tensor([2.0]), v, torch.ones(1, 3))
    assert scores[0, 0] < 0 < scores[0, 2] < scores[0, 1]

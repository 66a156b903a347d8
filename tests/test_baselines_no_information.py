"""The no-information rows are what they say: their pages do not depend on the retrieval order or on who the user is;
the retriever does not order any block by the hidden quality."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.policies.candidate_baselines import (
    MFCandidates,
    PopularCandidates,
    QualityCandidates,
    RandomCandidates,
)
from recagent_gym.runs.make_env import candidates_env

from ._env_fixtures import make_dataset

NO_INFORMATION = {
    "random": lambda env: RandomCandidates(env, seed=3),
    "popularity": lambda env: PopularCandidates(env, seed=3),
    "quality": lambda env: QualityCandidates(env, seed=3),
}


@pytest.fixture(scope="module")
def env():
    return candidates_env(
        make_dataset(), "recsim", social=False, n_candidates=20, config={"env": {"hide_quality": True}}
    )


def _page(recommender, env, obs) -> list[int]:
    action, _ = recommender.predict(obs)
    slate, _ = env.unwrapped.slate(action)
    return sorted(int(i) for i in np.asarray(env.unwrapped.candidate_ids)[slate])


def _permuted(env, obs, order: np.ndarray, other_user: int) -> dict[str, np.ndarray]:
    """The same candidates in another retrieval order, and another user's encoding."""
    stream = env.unwrapped._slate_stream
    stream.candidates = stream.candidates[order]
    other = env.unwrapped.tables.user_features[other_user]
    history = np.roll(obs["history"], 1, axis=0)
    return dict(obs, candidates=obs["candidates"][order], candidate_mask=obs["candidate_mask"][order], user=other,
                history=history)  # fmt: skip


@pytest.mark.parametrize("name", sorted(NO_INFORMATION))
def test_no_information_rows_show_the_same_pages_whatever_the_order_and_the_encoding(env, name):
    rng = np.random.default_rng(0)
    for user in range(4):
        obs, _ = env.reset(seed=user, options={"user_id": user})
        mine, theirs = NO_INFORMATION[name](env), NO_INFORMATION[name](env)
        own = _page(mine, env, obs)
        ids = np.asarray(env.unwrapped.candidate_ids).copy()
        permuted = _permuted(env, obs, rng.permutation(len(ids)), other_user=(user + 5) % 20)
        assert _page(theirs, env, permuted) == own, f"{name}: the page moved with the retrieval order"


def test_the_quality_row_with_hidden_quality_is_not_the_retrieval_order(env):
    """Quality hidden: every candidate ties; the page is a seeded random one, not the first five retrieved (MF's)."""
    heads = 0
    for user in range(10):
        obs, _ = env.reset(seed=user, options={"user_id": user})
        assert np.ptp(obs["candidates"][:, env.unwrapped.tables.n_genres + 2]) == 0  # the column is constant
        action, _ = QualityCandidates(env, seed=user).predict(obs)
        slate, _ = env.unwrapped.slate(action)
        heads += sorted(slate.tolist()) == list(range(5))
    assert heads <= 1


def test_mf_reads_the_encoding_but_not_the_order(env):
    obs, _ = env.reset(seed=0, options={"user_id": 0})
    own = _page(MFCandidates(env), env, obs)
    order = np.random.default_rng(1).permutation(len(env.unwrapped.candidate_ids))
    stream = env.unwrapped._slate_stream
    stream.candidates = stream.candidates[order]
    moved = dict(obs, candidates=obs["candidates"][order], candidate_mask=obs["candidate_mask"][order])
    assert _page(MFCandidates(env), env, moved) == own


def test_the_genre_block_is_ordered_by_public_popularity_not_hidden_quality(env):
    retriever = env.unwrapped.retriever
    tables = env.unwrapped.tables
    for order in retriever._genre_order:
        if len(order) > 1:
            assert np.all(np.diff(tables.popularity[order]) <= 0)

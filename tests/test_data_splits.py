"""Leave-last-out splits (no leak) and negative sampling (never seen, seeded, popularity-matched)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import DataError
from recagent_gym.data.splits import (
    SeenIndex,
    leave_last_out,
    popularity_bands,
    sample_negatives,
    sample_negatives_popularity_matched,
    seen_items,
)

GOLDEN_DRAWS, GOLDEN_WIDENED = "aee9928bef9cefdb", 1556
"""``_draws_digest`` of the samplers as they were when the results pages were made (numpy's PCG64 streams)."""


@pytest.fixture(scope="module")
def bundled():
    return load_dataset("bundled", min_user_interactions=5)


@pytest.mark.slow
def test_leave_last_out_holds_out_the_latest_and_does_not_leak(bundled):
    split = leave_last_out(bundled, a=3)
    assert len(split.train.interactions) + 3 * len(split.held_out) == len(bundled.interactions)
    for user in list(split.held_out)[:50]:
        history = bundled.user_history(user)
        train = split.train.user_history(user)
        held = split.held_out[user]
        assert held == tuple(history["item_id"].to_numpy()[-3:])
        assert train["timestamp"].max() <= history["timestamp"].to_numpy()[-3:].min()
        # The held-out rows are gone from train (counting duplicates of the same item).
        assert len(train) == len(history) - 3
    assert split.train.users["activity"].between(0, 1).all()
    split.train.validate()


def test_short_histories_are_not_evaluated(tmp_path):
    from tests import _data_fixtures as fx

    ds = load_dataset(str(fx.ml_1m(tmp_path)))  # users with 3, 2 and 0 interactions
    split = leave_last_out(ds, a=2, min_train=1)
    assert set(split.held_out) == {0}
    assert len(split.train.interactions) == len(ds.interactions) - 2
    with pytest.raises(ValueError):
        leave_last_out(ds, a=0)


def test_negatives_never_seen_and_seeded(bundled):
    for user in range(0, bundled.n_users, 61):
        seen = set(seen_items(bundled, user))
        exclude = [0, 1, 2]
        negatives = sample_negatives(bundled, user, 20, np.random.default_rng(user), exclude=exclude)
        assert len(set(negatives)) == 20
        assert not (set(negatives) & seen) and not (set(negatives) & set(exclude))
        again = sample_negatives(bundled, user, 20, np.random.default_rng(user), exclude=exclude)
        assert np.array_equal(negatives, again)
    with pytest.raises(DataError, match="cannot sample"):
        sample_negatives(bundled, 0, bundled.n_items, np.random.default_rng(0))


def test_popularity_matched_negatives_share_the_band(bundled):
    bands = popularity_bands(bundled)
    sizes = np.bincount(bands)
    assert len(sizes) == 10 and sizes.max() - sizes.min() <= 1
    pop = bundled.item_popularity()
    assert pop[bands == 9].min() >= pop[bands == 0].max()
    split = leave_last_out(bundled, a=3)
    user = next(iter(split.held_out))
    positives = split.held_out[user]
    sample = sample_negatives_popularity_matched(bundled, user, positives, 5, np.random.default_rng(1))
    seen = set(seen_items(bundled, user))
    drawn = np.concatenate(list(sample.negatives.values()))
    assert len(set(drawn)) == len(drawn) == 5 * len(set(positives))
    assert not set(drawn) & seen
    outside = sum(int((bands[neg] != bands[pos]).sum()) for pos, neg in sample.negatives.items())
    assert outside == sample.widened
    assert outside < len(drawn)  # the bundled bands hold hundreds of unseen items each


def _draws_digest(dataset, split, index=None) -> tuple[str, int]:
    digest, widened = hashlib.sha256(), 0
    for user in sorted(split.held_out)[::25]:
        n = 1200 if user == min(split.held_out) else 5  # one call that runs its band dry and widens
        sample = sample_negatives_popularity_matched(
            dataset, user, split.held_out[user], n, np.random.default_rng(user), index=index
        )
        widened += sample.widened
        for positive in sorted(sample.negatives):
            digest.update(np.asarray(sample.negatives[positive], np.int64).tobytes())
        uniform = sample_negatives(dataset, user, 7, np.random.default_rng(user), index=index)
        digest.update(np.asarray(uniform).tobytes())
    return digest.hexdigest()[:16], widened


def test_negative_draws_are_the_ones_the_results_were_made_with(bundled):
    """The samplers' draws for a seed must not change (the committed results pages were made with them, before the
    samplers read a SeenIndex); with the index they are the same draws."""
    split = leave_last_out(bundled, a=3)
    expected = _draws_digest(bundled, split)
    assert expected == (GOLDEN_DRAWS, GOLDEN_WIDENED)
    assert _draws_digest(bundled, split, SeenIndex.of(bundled)) == expected

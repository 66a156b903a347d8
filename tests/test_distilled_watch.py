"""The distilled users' real "watch" target (``users distill --real-target watch``): pages of never-seen negatives
on which the real user watches nothing, fitted beside the real items under the rule's choice model with the
user's threshold (scripted LLM, tiny data: each user's last item is its real choice)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.data.splits import popularity_bands
from recagent_gym.runs.distill.real_choices import SAMPLERS, leave_pages, temporal_split
from recagent_gym.users.distilled.errors import DistillError
from tests._agent_fixtures import tiny_dataset
from tests._distilled_fixtures import fit_tiny, tiny_logs

TINY = {"real_choices": 1, "real_min_history": 1, "split": "own", "test_fraction": 0.34, "collab_dims": 0}


def test_leave_pages_hold_never_seen_negatives_drawn_as_the_real_items_are():
    dataset = tiny_dataset()
    _, real = temporal_split(dataset, 1, 1)
    pages = leave_pages(dataset, real, range(6), page_size=5, seed=0)
    assert len(pages) == 6 * len(SAMPLERS) and pages.items.shape == (12, 5)
    assert np.all(pages.label == 5)  # "watch nothing"
    bands = popularity_bands(dataset)
    distance = {name: [] for name in SAMPLERS}
    for user, items, sampler in zip(pages.user, pages.items, pages.sampler, strict=True):
        seen = set(dataset.user_history(int(user))["item_id"])
        assert len(set(items)) == 5 and not seen & {int(i) for i in items}
        distance[SAMPLERS[sampler]] += np.abs(bands[items] - bands[real[int(user)][0]]).tolist()
    # popularity-matched: from the real item's band or the nearest ones, closer than uniform draws
    assert np.mean(distance["popularity-matched"]) < np.mean(distance["uniform"]) - 1
    again = leave_pages(dataset, real, range(6), page_size=5, seed=0)
    assert np.array_equal(again.items, pages.items)
    assert not np.array_equal(leave_pages(dataset, real, range(6), page_size=5, seed=1).items, pages.items)


def test_the_watch_target_lowers_the_watch_on_pages_without_a_real_item(tmp_path):
    logs_dir = tiny_logs(tmp_path / "logs")
    order = fit_tiny(tmp_path / "order", logs_dir, 30, real_weight=2.0, **TINY)
    watch = fit_tiny(tmp_path / "watch", logs_dir, 30, real_weight=2.0, real_target="watch", **TINY)
    assert order.meta["settings"]["real_target"] == "order" and watch.meta["settings"]["real_target"] == "watch"
    before, after = order.meta["metrics"], watch.meta["metrics"]
    for m in (before, after):
        assert 0.0 < m["real_test_watch_p_leave"] < 1.0 and 0.0 < m["real_test_watch_p_real"] < 1.0
    # fitted to watch nothing where real users watch nothing: the held-out leave pages are watched less
    assert after["real_test_watch_p_leave"] < before["real_test_watch_p_leave"] - 0.05
    gap = after["real_test_watch_p_real"] - after["real_test_watch_p_leave"]
    assert gap > before["real_test_watch_p_real"] - before["real_test_watch_p_leave"]


def test_an_unknown_real_target_is_refused(tmp_path):
    with pytest.raises(DistillError, match="real_target"):
        fit_tiny(tmp_path / "bad", tiny_logs(tmp_path / "logs"), 2, real_target="level", **TINY)

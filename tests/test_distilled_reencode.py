"""A distilled model's tables re-encoded from a training split: the same network, no look at the held-out items."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recagent_gym.data.splits import leave_last_out
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.config import load_config
from recagent_gym.runs.distill.features import item_features, user_features
from recagent_gym.runs.distill.network import TwoTower
from recagent_gym.runs.distill.objective import population_profiles
from recagent_gym.runs.distill.reencode import reencoded
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact
from tests._eval_fixtures import movielens_dir, tiny_ml  # noqa: F401


def _artefact(dataset, config, text):
    torch.manual_seed(0)
    users_x = user_features(dataset, text, population_profiles(dataset, config), config.user.history_shots)
    items_x = item_features(dataset, text)
    net = TwoTower(users_x.shape[1], items_x.shape[1], text_dim=text.shape[1], alpha=0.5, hidden=8, dim=4)
    user_table, item_table, offset = net.tables(users_x, items_x)
    zeros = np.zeros(dataset.n_users)
    arrays = {"user_table": user_table.astype(np.float16), "item_table": item_table.astype(np.float16),
              "item_offset": offset, "threshold": zeros, "search_interest": zeros,
              **{f"net.{k}": v.detach().numpy() for k, v in net.state_dict().items()}}  # fmt: skip
    meta = {"n_items": dataset.n_items, "n_users": dataset.n_users, "dataset": dataset.name,
            "user_raw_ids": [str(r) for r in dataset.users["raw_id"]], "settings": {"hidden": 8, "dim": 4}}  # fmt: skip
    return Artefact(arrays, meta)


def test_reencoding_reproduces_the_tables_and_forgets_the_held_out_items(tiny_ml):  # noqa: F811
    config = load_config()
    text = HashingEmbedder(32)([tiny_ml.item_text(i) for i in range(tiny_ml.n_items)])
    artefact = _artefact(tiny_ml, config, text)
    same = reencoded(artefact, tiny_ml, config, text=text)
    for key in ("user_table", "item_table", "item_offset"):
        assert np.allclose(same.arrays[key].astype(np.float32), artefact.arrays[key].astype(np.float32), atol=2e-3)
    split = leave_last_out(tiny_ml, 4, min_train=10)
    history = reencoded(artefact, split.train, config, text=text)
    held = sorted(split.held_out)
    moved = np.abs(history.arrays["user_table"][held].astype(np.float32)
                   - artefact.arrays["user_table"][held].astype(np.float32)).max(axis=1)  # fmt: skip
    assert (moved > 1e-3).all()  # every held-out user's encoding came from its history alone
    assert history.meta["reencoded_on"] == split.train.name


def test_reencoding_refuses_other_users_or_no_network(tiny_ml):  # noqa: F811
    config = load_config()
    text = HashingEmbedder(32)([tiny_ml.item_text(i) for i in range(tiny_ml.n_items)])
    artefact = _artefact(tiny_ml, config, text)
    other = Artefact(artefact.arrays, {**artefact.meta, "user_raw_ids": list(reversed(artefact.meta["user_raw_ids"]))})
    with pytest.raises(DistillError, match="same order"):
        reencoded(other, tiny_ml, config, text=text)
    bare = Artefact({k: v for k, v in artefact.arrays.items() if not k.startswith("net.")}, artefact.meta)
    with pytest.raises(DistillError, match="network weights"):
        reencoded(bare, tiny_ml, config, text=text)

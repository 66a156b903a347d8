"""The distilled users' collaborative part (``users distill --collab-dims``): item vectors of the history before the
real choices, the user's collaborative taste, a direct affinity term, and a re-encoding that reuses the stored
vectors (scripted LLM, tiny data)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.data.splits import leave_last_out
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.distill import fit as fit_module
from recagent_gym.runs.distill.features import collaborative_taste, model_features
from recagent_gym.runs.distill.fit import text_vectors
from recagent_gym.runs.distill.objective import FitSettings, population_profiles
from recagent_gym.runs.distill.real_choices import temporal_split
from recagent_gym.runs.distill.reencode import reencoded
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact
from tests._agent_fixtures import make_config, tiny_dataset
from tests._distilled_fixtures import fit_tiny, tiny_logs

TINY = {"real_choices": 1, "real_min_history": 1, "split": "own", "test_fraction": 0.34, "real_weight": 1.0}


def _fit(tmp_path, name, logs_dir, **settings):
    return fit_tiny(tmp_path / name, logs_dir, 20, **{**TINY, **settings})


@pytest.mark.slow
def test_collaborative_vectors_come_from_the_history_and_travel_with_the_model(tmp_path, monkeypatch):
    logs_dir = tiny_logs(tmp_path / "logs")
    plain = _fit(tmp_path, "plain", logs_dir, collab_dims=0)
    svd, seen = fit_module.collaborative_item_latents, []
    monkeypatch.setattr(fit_module, "collaborative_item_latents", lambda data, *a: seen.append(data) or svd(data, *a))
    model = _fit(tmp_path, "collab", logs_dir, collab_dims=3)
    assert "collab_items" not in plain.arrays and "net.beta" not in plain.arrays
    assert model.meta["settings"]["collab_dims"] == 3
    dataset, config = tiny_dataset(), make_config()
    collab = model.arrays["collab_items"]
    assert collab.shape == (dataset.n_items, 3)
    # the SVD of the history before each user's real choice, not of the whole dataset
    history, _ = temporal_split(dataset, 1, 1)
    assert len(seen) == 1 and seen[0].interactions.equals(history.interactions)
    assert "net.beta" in model.arrays
    # the tables hold the term: width = towers + text + collaborative, and the score is the table's dot product
    assert model.arrays["user_table"].shape[1] == plain.arrays["user_table"].shape[1] + 3
    text = text_vectors(dataset, HashingEmbedder(32))
    users_x, _ = model_features(dataset, text, population_profiles(dataset, config), config.user.history_shots,
                                      collab)  # fmt: skip
    assert np.allclose(users_x[:, -3:], collaborative_taste(dataset, collab), atol=1e-6)
    same = reencoded(model, dataset, config, text=text)
    for key in ("user_table", "item_table", "item_offset"):
        assert np.allclose(same.arrays[key].astype(np.float32), model.arrays[key].astype(np.float32), atol=2e-3)
    # a re-encoding reads the stored vectors (an SVD of another dataset would have another basis)
    other = np.random.default_rng(1).standard_normal(collab.shape).astype(np.float32)
    swapped = Artefact({**model.arrays, "collab_items": other}, model.meta)
    split = leave_last_out(dataset, 1, min_train=1)
    moved = reencoded(swapped, split.train, config, text=text)
    assert np.allclose(moved.arrays["item_table"][:, -3:].astype(np.float32), other, atol=2e-2)
    assert moved.arrays["user_table"].shape == model.arrays["user_table"].shape


def test_negative_collab_dims_are_refused_and_the_cli_passes_them(tmp_path, monkeypatch):
    with pytest.raises(DistillError, match="collab_dims"):
        _fit(tmp_path, "bad", tiny_logs(tmp_path / "logs"), collab_dims=-1)
    from recagent_gym.runs.cli import main
    from recagent_gym.runs.commands import users as commands

    seen = []
    monkeypatch.setattr(commands, "_config_and_dataset", lambda args: (make_config(), tiny_dataset()))
    monkeypatch.setattr(fit_module, "distill", lambda *a, settings, **k: seen.append(settings) or "ok")
    assert main(["users", "distill", "--logs", "x", "--out", "y", "--collab-dims", "4"]) == 0
    assert main(["users", "distill", "--logs", "x", "--out", "y"]) == 0
    assert seen[0].collab_dims == 4 and seen[1].collab_dims == FitSettings().collab_dims


def test_the_affinity_term_is_in_the_score_and_in_the_tables():
    import torch

    from recagent_gym.runs.distill.network import TwoTower

    torch.manual_seed(0)
    users, items = torch.randn(7, 12), torch.randn(7, 10)
    net = TwoTower(12, 10, text_dim=4, alpha=0.5, hidden=8, dim=3, collab_dim=2)
    with torch.no_grad():
        before = net(users, items)
        net.beta.fill_(1.5)
        after = net(users, items)
        assert torch.allclose(after - before, 1.5 * (users[:, -2:] * items[:, -2:]).sum(-1), atol=1e-5)
    user_table, item_table, offset = net.tables(users.numpy(), items.numpy())
    assert user_table.shape[1] == 3 + 4 + 2
    assert np.allclose((user_table * item_table).sum(1) + offset, after.numpy(), atol=1e-5)

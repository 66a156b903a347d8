"""The distilled users' real-choice objective (``users distill --real-weight``) and the real held-out table of
``users fidelity`` (scripted LLM, tiny data: each user's last item is its real choice)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.distill import fit as fit_module
from recagent_gym.runs.distill.objective import FitSettings
from recagent_gym.runs.distill.real_choices import SAMPLERS, RealPages, real_pages, temporal_split
from recagent_gym.runs.distill.real_fidelity import held_out_table
from tests._agent_fixtures import make_config, make_model, tiny_dataset
from tests._distilled_fixtures import fit_tiny, tiny_logs

TINY = {"real_choices": 1, "real_min_history": 1, "split": "own", "test_fraction": 0.34, "collab_dims": 0}
"""Tiny users hold 3 items: the last is the real choice, the two before it the history. No collaborative part: on
so few items the SVD's singular values tie and its basis is not unique (``test_distilled_collab`` covers it)."""


def test_real_pages_hold_each_real_item_among_never_seen_negatives():
    dataset = tiny_dataset()
    history, real = temporal_split(dataset, 1, 1)
    assert len(history.interactions) == len(dataset.interactions) - dataset.n_users
    pages = real_pages(dataset, real, range(6), page_size=5, seed=0)
    assert len(pages) == 6 * len(SAMPLERS) and pages.items.shape == (12, 5)
    assert sorted(set(pages.sampler.tolist())) == [0, 1]
    for user, items, label in zip(pages.user, pages.items, pages.label, strict=True):
        assert items[label] == real[int(user)][0]
        seen = set(dataset.user_history(int(user))["item_id"])
        negatives = [int(i) for k, i in enumerate(items) if k != label]
        assert len(set(items)) == 5 and not seen & set(negatives)
    again = real_pages(dataset, real, range(6), page_size=5, seed=0)
    assert np.array_equal(again.items, pages.items) and np.array_equal(again.label, pages.label)
    assert len(set(pages.label.tolist())) > 1  # the real item's position says nothing


def _fit(tmp_path, name, logs_dir, **settings):
    return fit_tiny(tmp_path / name, logs_dir, 30, **{**TINY, **settings})


def test_weight_zero_is_the_llm_only_fit_and_a_weight_raises_the_real_items_probability(tmp_path, monkeypatch):
    logs_dir = tiny_logs(tmp_path / "logs")
    zero = _fit(tmp_path, "zero", logs_dir, real_weight=0.0)
    assert zero.meta["settings"]["real_weight"] == 0.0 and zero.meta["metrics"]["real_train_pages"] == 12 - 4
    # the fit with no real pages at all: the same weights, draw for draw
    build = fit_module.RealTarget.build

    def empty(*args, **kwargs):
        target = build(*args, **kwargs)
        none = RealPages(*(a[:0] for a in (target.train.user, target.train.items, target.train.label,
                                             target.train.sampler)))  # fmt: skip
        return fit_module.RealTarget(target.users_x, target.items_x, none, target.test)

    monkeypatch.setattr(fit_module.RealTarget, "build", empty)
    alone = _fit(tmp_path, "alone", logs_dir, real_weight=1.0)
    for key in ("user_table", "item_table", "item_offset"):
        assert np.array_equal(zero.arrays[key], alone.arrays[key])
    monkeypatch.setattr(fit_module.RealTarget, "build", build)
    weighted = _fit(tmp_path, "weighted", logs_dir, real_weight=2.0)
    before, after = zero.meta["metrics"], weighted.meta["metrics"]
    assert after["real_train_choice_p"] > before["real_train_choice_p"] + 0.1
    assert after["real_train_hit"] >= before["real_train_hit"]
    assert weighted.meta["settings"]["real_weight"] == 2.0


def test_a_negative_weight_is_refused(tmp_path):
    from recagent_gym.users.distilled.errors import DistillError

    with pytest.raises(DistillError, match="real_weight"):
        _fit(tmp_path, "bad", tiny_logs(tmp_path / "logs"), real_weight=-1.0)


def test_held_out_table_rows_and_chance(tmp_path):
    logs_dir = tiny_logs(tmp_path / "logs")
    artefact = _fit(tmp_path, "m", logs_dir, real_weight=1.0)
    from recagent_gym.runs.distill.fit import text_vectors

    vectors = text_vectors(tiny_dataset(), HashingEmbedder(32))
    users = artefact.meta["test_users"]
    table = held_out_table(tiny_dataset(), make_config(), artefact, vectors, users, llm_users=1, llm_model=make_model(),
                           bootstrap=50, choices=1, min_history=1)  # fmt: skip
    assert set(table["users"]) == {"distilled", "popularity", "chance", "LLM"}
    assert set(table["negatives"]) == set(SAMPLERS)
    chance = table[table["users"] == "chance"]
    assert np.allclose(chance["hit"], 0.2) and np.allclose(chance["choice_p"], 0.2)
    assert (table.loc[table["users"] == "LLM", "n_users"] == 1).all()
    assert (table.loc[table["users"] == "distilled", "n_users"] == len(users)).all()
    assert table["hit"].between(0, 1).all() and (table["hit_low"] <= table["hit"] + 1e-12).all()
    assert table.loc[table["users"] == "popularity", "choice_p"].isna().all()


def test_cli_passes_the_real_weight_and_target_and_defaults_to_the_settings_ones(monkeypatch):
    from recagent_gym.runs.cli import main
    from recagent_gym.runs.commands import users as commands

    seen = []
    monkeypatch.setattr(commands, "_config_and_dataset", lambda args: (make_config(), tiny_dataset()))
    monkeypatch.setattr(fit_module, "distill", lambda *a, settings, **k: seen.append(settings) or "ok")
    assert (
        main(["users", "distill", "--logs", "x", "--out", "y", "--real-weight", "0.5", "--real-target", "watch",
              "--real-users", "7"]) == 0
    )  # fmt: skip
    assert main(["users", "distill", "--logs", "x", "--out", "y"]) == 0
    assert seen[0].real_weight == 0.5 and seen[1].real_weight == FitSettings().real_weight == 0.3  # as --help says
    assert seen[0].real_target == "watch" and seen[1].real_target == FitSettings().real_target == "order"
    assert seen[0].real_users == 7 and seen[1].real_users == FitSettings().real_users == 0


def test_real_users_beyond_the_logged_ones_are_fitted_and_counted_as_fitted_users(tmp_path):
    from recagent_gym.runs.distill import logs
    from recagent_gym.users.distilled.errors import DistillError

    logs_dir = tiny_logs(tmp_path / "logs", sessions=3)
    logged = set(logs.read_logs(logs_dir)["user_id"].tolist())
    pool = sorted(set(range(tiny_dataset().n_users)) - logged)
    assert pool, "the tiny logs must leave users unlogged for this test"
    base = _fit(tmp_path, "base", logs_dir, real_weight=1.0)
    more = _fit(tmp_path, "more", logs_dir, real_weight=1.0, real_users=len(pool))
    # the unlogged users' real choices are fitted, and every evaluation leaves them out as fitted users
    assert set(more.meta["train_users"]) == set(base.meta["train_users"]) | set(pool)
    assert more.meta["real_only_users"] == len(pool) and base.meta["real_only_users"] == 0
    assert more.meta["test_users"] == base.meta["test_users"]
    per_user = base.meta["metrics"]["real_train_pages"] / len(base.meta["train_users"])
    assert more.meta["metrics"]["real_train_pages"] == base.meta["metrics"]["real_train_pages"] + per_user * len(pool)
    assert not np.array_equal(np.asarray(more.arrays["item_offset"]), np.asarray(base.arrays["item_offset"]))
    # a seeded draw: the same users again, and never a logged or held-out one
    settings = FitSettings(**{**TINY, "real_users": 1})
    drawn = fit_module.real_only_users(tiny_dataset(), settings, exclude=logged)
    assert len(drawn) == 1 and int(drawn[0]) in pool
    assert np.array_equal(drawn, fit_module.real_only_users(tiny_dataset(), settings, exclude=logged))
    with pytest.raises(DistillError, match="only"):
        _fit(tmp_path, "too-many", logs_dir, real_users=len(pool) + 1)
    with pytest.raises(DistillError, match=">= 0"):
        _fit(tmp_path, "negative", logs_dir, real_users=-1)

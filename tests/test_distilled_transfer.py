"""``recagent-gym users transfer``: PPO trained on distilled users, evaluated with intervals against the baselines."""

from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.data.load import load_dataset
from recagent_gym.runs.cli import main
from recagent_gym.runs.comparisons.transfer import POLICY, held_out_users, verdict
from recagent_gym.runs.config import load_config


@pytest.fixture(scope="module")
def item_cache(tmp_path_factory) -> str:
    """One MiniLM item-embedding cache for every transfer run of the session (the real side's distilled item table
    re-encodes from the catalogue's text vectors: about 50 s per run otherwise); shared by xdist's workers."""
    return str(tmp_path_factory.getbasetemp().parent / "item-embeddings")


@pytest.mark.slow
def test_held_out_users_are_unseen_by_the_policy_and_the_distilled_model():
    from recagent_gym.runs.policies.protocol import split_users
    from recagent_gym.users.distilled.saved_model import Artefact
    from recagent_gym.users.distilled.user import BUNDLED_DIR

    dataset, config = load_dataset("bundled"), load_config("quickstart")
    users = held_out_users(dataset, config, 0)
    split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed)
    assert len(users) > 16 and set(users) <= set(split.test.tolist())
    assert set(users).isdisjoint(Artefact.load(BUNDLED_DIR).meta["train_users"])
    assert np.array_equal(held_out_users(dataset, config, 5), users[:5])


@pytest.mark.parametrize("env", ["v1", "v0"])
@pytest.mark.slow
def test_transfer_command_writes_table_csv_and_plot(tmp_path, capsys, env, item_cache):
    code = main(
        ["users", "transfer", "--config", "quickstart", "--out", str(tmp_path), "--users", "6", "--seeds", "0,1",
         "--user-models", "distilled", "--no-progress", "--set", "train.total_timesteps=64",
         "--set", "train.n_steps=16", "--set", "train.batch_size=16", "--set", f"train.transfer_env={env}",
         "--set", f"evaluation.embedding_cache_dir={item_cache}"]
    )  # fmt: skip
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "transfer.csv").open()))
    baselines = ["random", "popularity", "quality-greedy", "mf"] if env == "v1" else ["random", "popularity", "mf"]
    assert [r["recommender"] for r in rows] == [*baselines, POLICY]  # quality-greedy reads v1's candidate features
    for row in rows:
        assert row["users"] == "distilled" and row["n_users"] == "6"
        assert float(row["ci_low"]) <= float(row["mean_return"]) <= float(row["ci_high"])
    policy = rows[-1]
    assert policy["seeds"] == "2" and policy["sessions"] == "12" and policy["diff"] == ""
    assert all(r["diff"] != "" for r in rows[:-1])
    for name in ("transfer.md", "transfer.png", "policy-seed0/policy.zip", "policy-seed1/policy.zip"):
        assert (tmp_path / name).is_file(), name
    out = capsys.readouterr().out
    assert "distilled-trained policy" in out and "written:" in out
    # an already trained policy is evaluated as it is (no training), on other user models too
    again = tmp_path / "again"
    policy = str(tmp_path / "policy-seed0" / "policy.zip")
    code = main(["users", "transfer", "--config", "quickstart", "--out", str(again), "--users", "3", "--policy", policy,
                 "--user-models", "recsim,distilled", "--no-progress",
                 "--set", f"train.transfer_env={env}",
                 "--set", f"evaluation.embedding_cache_dir={item_cache}"])  # fmt: skip
    assert code == 0 and not (again / "policy-seed0").exists()
    rows = list(csv.DictReader((again / "transfer.csv").open()))
    assert [r["users"] for r in rows] == ["recsim"] * (len(baselines) + 1) + ["distilled"] * (len(baselines) + 1)
    title = (again / "transfer.md").read_text()
    assert "trained 64 steps on distilled users" in title  # one rollout of 4 envs x 16 steps
    assert ("RecAgent-v1 (candidates)" if env == "v1" else "RecAgent-v0") in title


def test_verdict_reads_the_paired_intervals():
    from recagent_gym.runs.comparisons.transfer import TransferRow

    def row(name: str, low: float, high: float) -> TransferRow:
        return TransferRow("llm", name, 1.0, 0.5, 1.5, 20, 20, 1, (low + high) / 2, low, high, 0, 1.0)

    nan = float("nan")
    rows = [row("random", 0.1, 0.9), row("popularity", -0.2, 0.3), row("mf", -0.9, -0.1), row(POLICY, nan, nan)]
    text = verdict(rows)
    assert "beats random" in text and "beaten by mf" in text and "not separable from popularity" in text
    assert "20 held-out LLM users" in text


def test_ranking_compares_every_user_model_with_the_llm_users():
    from recagent_gym.runs.comparisons.transfer import TransferRow, ranking

    def row(users: str, name: str, mean: float) -> TransferRow:
        return TransferRow(users, name, mean, mean, mean, 8, 8, 1, 0.0, 0.0, 0.0, 0, 1.0)

    names = ("random", "popularity", "mf", POLICY)
    rows = [row("distilled", n, m) for n, m in zip(names, (1, 2, 3, 4), strict=True)]
    rows += [row("recsim", n, m) for n, m in zip(names, (4, 3, 2, 1), strict=True)]
    rows += [row("llm", n, m) for n, m in zip(names, (1, 2, 3, 4), strict=True)]
    table = ranking(rows).splitlines()
    assert table[2] == f"| distilled | {POLICY} > mf > popularity > random | yes | +1.00 |"
    assert table[3] == f"| recsim | random > popularity > mf > {POLICY} | no | -1.00 |"
    assert table[4].startswith("| llm |") and table[4].endswith("|  |  |")


@pytest.mark.slow
def test_v1_transfer_trains_item_scoring_ppo_and_shares_the_observation(tmp_path, item_cache):
    """``train.transfer_env: v1``: the item-scoring PPO on distilled users' candidate pages; the baselines choose
    among the same candidates; every user model's env describes items as the distilled env does."""
    from recagent_gym.runs.comparisons.transfer import run_transfer
    from recagent_gym.runs.make_env import SharedCandidates

    dataset, config = load_dataset("bundled"), load_config("quickstart")
    config.train.transfer_env = "v1"
    config.train.candidate_mix = {"random": 1.0}
    config.train.total_timesteps, config.train.n_envs, config.train.n_steps, config.train.batch_size = 64, 2, 32, 32
    config.evaluation.embedding_cache_dir = item_cache
    rows = run_transfer(config, tmp_path, n_users=4, seeds=[0], user_models=("distilled", "recsim"), progress=False,
                        say=lambda line: None, dataset=dataset)  # fmt: skip
    assert [(r.users, r.recommender) for r in rows] == [
        (m, name) for m in ("distilled", "recsim") for name in ("random", "popularity", "quality-greedy", "mf", POLICY)
    ]
    assert (tmp_path / "policy-seed0" / "policy.zip").is_file()
    # sim2real: each recommender's real offline metric on the same held-out users, the same in every user model's row
    assert all(0.0 <= r.real_hit <= 1.0 for r in rows)
    assert {r.recommender: r.real_hit for r in rows if r.users == "distilled"} == {
        r.recommender: r.real_hit for r in rows if r.users == "recsim"
    }
    assert "real hit rate" in (tmp_path / "transfer.md").read_text()
    # the policy's real hit rate minus each baseline's, paired over the same users (none for the policy's own row)
    hits = {r.recommender: r.real_hit for r in rows if r.users == "distilled"}
    for r in rows:
        if r.recommender == POLICY:
            assert np.isnan(r.real_diff)
        else:
            assert r.real_diff == pytest.approx(hits[POLICY] - hits[r.recommender])
            assert r.real_diff_low <= r.real_diff <= r.real_diff_high
    assert "On the real users' future items the policy's pages" in (tmp_path / "transfer.md").read_text()
    assert '"env": "RecAgent-v1"' in (tmp_path / "policy-seed0" / "policy.json").read_text()
    assert "RecAgent-v1 (candidates)" in (tmp_path / "transfer.md").read_text()
    shared = SharedCandidates(config, dataset, held_out_users(dataset, config, 4))
    assert shared.env.latent_source == "distilled_items"  # the distilled users' learned item table, projected
    recsim_env = shared.make_env(config, dataset, held_out_users(dataset, config, 4), "recsim")
    assert recsim_env.latent_source == "distilled_items"
    assert np.array_equal(recsim_env.item_features, shared.env.item_features)

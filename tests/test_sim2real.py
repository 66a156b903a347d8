"""``evaluate sim2real``: several simulators' RL comparisons at the same env seeds, judged by what each one's shipped
learner does on the held-out users' real next items."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.runs.comparisons import sim2real
from tests._eval_fixtures import cli_exit_code, write_movielens


def _folder(root: Path, config: str, seed: int, returns: dict[str, float], hits: dict[str, dict[int, float]]) -> None:
    """An ``env_seed_<seed>`` folder as the RL comparison writes it (the columns the report reads)."""
    here = root / config / f"env_seed_{seed}"
    here.mkdir(parents=True)
    with (here / "policies.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["recommender", "mean_return"])
        writer.writerows(returns.items())
    (here / "config.yaml").write_text(
        "user:\n  model: recsim\ntrain:\n  n_candidates: 50\nenv:\n  page_size: 5\nevaluation:\n  agreement_pages: 4\n"
        "  agreement_future: 10\n  agreement_min_history: 5\n  agreement_split: temporal\n  seed: 0\n"
    )
    with (here / "real_hits.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sampler", "recommender", "user", "hit"])
        for sampler in sim2real.SAMPLERS:
            for name, per_user in hits.items():
                writer.writerows([sampler, name, u, h] for u, h in per_user.items())


def _runs(root: Path) -> dict[str, list[sim2real.SeedRun]]:
    users = range(20)
    rng = np.random.default_rng(0)
    base = {u: float(rng.uniform(0.3, 0.6)) for u in users}
    history = {
        "popularity": base,
        "mf": {u: base[u] + 0.10 for u in users},
        "itemknn": {u: base[u] + 0.05 for u in users},
    }
    # simulator A ships ppo (best simulated return) at both seeds, whose pages hold the real items more than MF's;
    # simulator B ships bc_ppo at seed 0 and ppo at seed 1, both below MF on real behaviour
    _folder(root, "a", 0, {"mf": 8.0, "ppo": 9.0, "bc": 8.5}, {**history, "ppo": {u: base[u] + 0.2 for u in users},
                                                                "bc": {u: base[u] for u in users}})  # fmt: skip
    _folder(root, "a", 1, {"mf": 8.0, "ppo": 9.0}, {**history, "ppo": {u: base[u] + 0.2 for u in users}})
    b0 = {**history, "ppo": {u: base[u] + 0.3 for u in users}, "bc_ppo": {u: base[u] - 0.1 for u in users}}
    _folder(root, "b", 0, {"mf": 8.0, "ppo": 8.1, "bc_ppo": 8.9}, b0)
    _folder(root, "b", 1, {"mf": 8.0, "ppo": 8.6}, {**history, "ppo": {u: base[u] for u in users}})
    return {c: [sim2real.read_seed_run(c, s, root / c / f"env_seed_{s}") for s in (0, 1)] for c in "ab"}


def test_the_shipped_learner_is_chosen_on_validation_users_not_on_the_held_out_ones(tmp_path):
    _runs(tmp_path)
    here = tmp_path / "a" / "env_seed_0"
    for name, values in {"ppo": (8.0, 8.2), "bc": (8.9, 8.1), "bc_ppo": (9.5, 9.6)}.items():
        (here / f"{name}_0").mkdir()
        (here / f"{name}_0" / "validation.csv").write_text(
            f"step,validation_return,n_users,kept\n0,{values[0]},60,1\n100,{values[1]},60,0\n"
        )
    run = sim2real.read_seed_run("a", 0, here)
    # bc_ppo's folder (no row in this run) is not bc's; ppo is best on held-out users (9.0), bc on validation users
    assert run.validation == {"ppo": 8.0, "bc": 8.9} and run.shipped == "bc"


def test_each_simulator_is_judged_by_the_learner_with_its_best_simulated_return(tmp_path):
    runs = _runs(tmp_path)
    assert [r.shipped for r in runs["a"]] == ["ppo", "ppo"] and [r.shipped for r in runs["b"]] == ["bc_ppo", "ppo"]
    rows = {(r.config, r.env_seed, r.sampler): r for r in sim2real.rows_for(runs, n_boot=200)}
    a = rows[("a", "pooled", "uniform")]
    assert a.history == "mf" and a.vs_history == pytest.approx(0.1) and a.vs_popularity == pytest.approx(0.2)
    assert a.n_units == 40 and a.n_users == 20 and a.real_ci_low <= a.real_hit <= a.real_ci_high
    # b's ppo at seed 0 holds more real hits, but b ships bc_ppo there (its best simulated return): judged by that
    b0 = rows[("b", "0", "popularity-matched")]
    assert b0.learner == "bc_ppo" and b0.vs_history == pytest.approx(-0.2) and b0.vs_history_high < 0
    assert rows[("b", "pooled", "uniform")].learner == "bc_ppo/ppo"
    verdict = sim2real.best_transfer(runs, "uniform", n_boot=200)
    assert "`a`" in verdict.split("minus")[0] and "`b`'s" in verdict and "40 (env seed, user) units" in verdict
    assert "above it" in verdict


def test_the_learners_are_the_rl_comparisons():
    from recagent_gym.runs.comparisons.rl_comparison import LEARNERS

    assert sim2real.LEARNER_NAMES == LEARNERS


def test_report_table_csv_and_plot(tmp_path):
    runs = _runs(tmp_path)
    rows = sim2real.rows_for(runs, n_boot=100)
    report = sim2real.write(rows, sim2real.verdicts(runs, n_boot=100), tmp_path, "intro")
    text = report.read_text()
    assert "| a | recsim | 50 | **pooled** | uniform | ppo (9.00) |" in text and "mf: +0.100 [" in text
    assert "With uniform negatives the shipped learners of `a`" in text and "popularity-matched negatives" in text
    saved = list(csv.DictReader((tmp_path / "sim2real.csv").open()))
    assert len(saved) == 2 * 2 * 3 and {r["env_seed"] for r in saved} == {"0", "1", "pooled"}
    assert (tmp_path / "sim2real.png").stat().st_size > 0


def test_simulators_whose_real_side_is_played_otherwise_are_not_ranked_together(tmp_path):
    runs = _runs(tmp_path)
    other = (tmp_path / "b" / "env_seed_1" / "config.yaml").read_text().replace("n_candidates: 50", "n_candidates: 200")
    for seed in (0, 1):
        (tmp_path / "b" / f"env_seed_{seed}" / "config.yaml").write_text(other)
    runs["b"] = [sim2real.read_seed_run("b", s, tmp_path / "b" / f"env_seed_{s}") for s in (0, 1)]
    lines = sim2real.verdicts(runs, n_boot=100)
    assert len(lines) == 2 and all("unlike the others'" in line for line in lines)
    assert "`b`'s real side is played with train.n_candidates 200, unlike" in lines[1]


def _config_file(folder: Path, name: str, model: str) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"user:\n  model: {model}\nenv:\n  social: false\n  page_size: 3\n  max_pages: 4\n"
        "train:\n  total_timesteps: 64\n  n_envs: 2\n  n_steps: 32\n  batch_size: 32\n  seeds: [0]\n"
        "  n_candidates: 15\n  test_fraction: 0.25\n  eval_every: 0\n  eval_curve_users: 2\n  n_bootstrap: 100\n"
        "  validation_users: 0\n  compare: [random, popularity, mf, bandit]\n",
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.slow
def test_command_runs_each_simulator_once_and_refuses_a_folder_of_another_configuration(tmp_path, capsys):
    data = write_movielens(tmp_path / "ml", n_users=24, per_user=30)
    configs = f"{_config_file(tmp_path, 'rs', 'recsim')},{_config_file(tmp_path, 'emb', 'embedding')}"
    out = tmp_path / "out"
    argv = ["evaluate", "sim2real", "--configs", configs, "--env-seeds", "0,1", "--output-dir", str(out),
            "--set", f"data.dataset={data}"]  # fmt: skip
    assert cli_exit_code(argv) == 0
    rows = list(csv.DictReader((out / "sim2real.csv").open()))
    assert {r["config"] for r in rows} == {"rs", "emb"} and {r["learner"] for r in rows} == {"bandit"}
    assert all(float(r["real_ci_low"]) <= float(r["real_hit"]) <= float(r["real_ci_high"]) for r in rows)
    # the same held-out users at an env seed in both simulators: the bandit's rows pair with the same baselines
    users = {
        c: {r["user"] for r in csv.DictReader((out / c / "env_seed_0" / "real_hits.csv").open())} for c in ("rs", "emb")
    }
    assert users["rs"] == users["emb"] and users["rs"]
    stamp = (out / "rs" / "env_seed_0" / "policies.csv").stat().st_mtime_ns
    assert cli_exit_code(argv) == 0  # read again, not run again
    assert (out / "rs" / "env_seed_0" / "policies.csv").stat().st_mtime_ns == stamp
    assert "read from its folder" in (out / "sim2real.md").read_text()
    capsys.readouterr()
    assert cli_exit_code([*argv, "--set", "train.n_candidates=12"]) == 2
    assert "train.n_candidates" in capsys.readouterr().err


def test_validation_curves_average_the_seeds_per_step_and_keep_every_seeds_point(tmp_path):
    from recagent_gym.runs.policies.validation_file import validation_curves

    def write(folder: str, rows: list[tuple[int, float, int]]) -> None:
        (tmp_path / folder).mkdir()
        lines = ["step,validation_return,n_users,kept", *(f"{s},{v},60,{k}" for s, v, k in rows)]
        (tmp_path / folder / "validation.csv").write_text("\n".join(lines) + "\n")

    write("bc_0", [(0, 7.0, 1)])
    write("bc_ppo_0", [(0, 7.0, 0), (100, 8.0, 1)])
    write("bc_ppo_1", [(0, 6.0, 1), (100, 7.0, 0)])
    curves = validation_curves(tmp_path, ["bc", "bc_ppo", "ppo"])
    assert set(curves) == {"bc", "bc_ppo"}  # ppo has none; bc is not mixed up with bc_ppo's folders
    assert curves["bc"] == ([(0, 7.0)], [(0, 7.0)])
    assert curves["bc_ppo"] == ([(0, 6.5), (100, 7.5)], [(100, 8.0), (0, 6.0)])

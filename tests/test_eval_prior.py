"""Calibrating the behavioural prior on train users, and its ablation rows (prior only, LLM + prior)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.runs.evaluation.calibrate import ChoiceSet, fit_logit, run_calibration, write_calibration
from recagent_gym.runs.evaluation.discrimination import run_discrimination
from recagent_gym.runs.evaluation.subjects import child_rng, sample_users
from recagent_gym.users.agent.prior import FEATURES, load_weights
from tests._eval_fixtures import cli_exit_code, make_resources, write_movielens

SETTINGS = [(1, 5)]


@pytest.fixture
def ml40(tmp_path: Path) -> Dataset:
    from recagent_gym.data.load import load_dataset

    return load_dataset(str(write_movielens(tmp_path / "ml40", n_users=40)))


def test_fit_recovers_the_weights_of_simulated_choices() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([1.5, -1.0])
    sets = []
    for _ in range(600):
        x = rng.normal(size=(6, 2))
        p = np.exp(x @ truth)
        sets.append(ChoiceSet(x, int(rng.choice(6, p=p / p.sum()))))
    fit = fit_logit(sets, [0, 1], ["a", "b"], l2=0.0)
    assert fit.weights["a"] == pytest.approx(1.5, abs=0.25) and fit.weights["b"] == pytest.approx(-1.0, abs=0.25)
    assert fit.accuracy > 1 / 6


@pytest.mark.slow
def test_calibration_uses_train_users_only_and_writes_a_weights_file(ml40: Dataset, tmp_path: Path) -> None:
    resources = make_resources(ml40, llm=ScriptedLLM(), users=6)
    result = run_calibration(resources, users=10, exclude=6, progress=False)
    evaluated = sample_users(ml40, 6, 14, child_rng(0, "users"))
    raw = ml40.users["raw_id"].astype(str).to_numpy()
    assert len(result.users_raw) == 10 and not {raw[u] for u in evaluated} & set(result.users_raw)
    assert result.choice_sets == 20  # each user's real choice under both samplers
    assert result.both is not None and set(result.both.weights) == {"llm", *FEATURES}
    paths = write_calibration(result, tmp_path / "cal")
    both, prior_only = load_weights(paths["prior.json"]), load_weights(paths["prior.json"], which="prior_only")
    assert both.llm == result.both.weights["llm"] and prior_only.llm == 0.0
    assert "top-1 accuracy" in paths["calibration.md"].read_text()
    assert json.loads(paths["prior.json"].read_text())["users_raw"] == result.users_raw
    # the LLM's score and the embedding term fitted apart, reported beside the fits the agents use
    assert set(result.parts) == {"parts", "llm_score_only", "embedding_only"}
    assert set(result.parts["parts"].weights) == {"llm_score", "embedding", *FEATURES}
    assert result.parts["parts"].log_likelihood >= result.parts["llm_score_only"].log_likelihood - 1e-6
    saved = json.loads(paths["prior.json"].read_text())["parts_fits"]
    assert saved["embedding_only"]["weights"]["embedding"] == result.parts["embedding_only"].weights["embedding"]
    assert "taken apart" in paths["calibration.md"].read_text()


@pytest.mark.slow
def test_ablation_rows_reuse_the_llm_scores_and_refuse_calibration_users(ml40: Dataset, tmp_path: Path) -> None:
    calibration = run_calibration(make_resources(ml40, users=6), users=10, exclude=6, use_llm=False,
                                  progress=False)  # fmt: skip
    data = {**calibration.to_json(), "both": {"llm": 1.0, "popularity": 0.5}}
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(data))
    plain_llm = ScriptedLLM()
    plain = make_resources(ml40, llm=plain_llm, users=6, user_models=["llm"], settings=SETTINGS)
    run_discrimination(plain, progress=False)
    llm = ScriptedLLM()
    resources = make_resources(ml40, llm=llm, users=6, user_models=["llm", "prior", "llm+prior"], settings=SETTINGS)
    resources.config.user.prior_weights = str(path)
    result = run_discrimination(resources, progress=False)
    assert llm.calls == plain_llm.calls  # llm+prior scored from the llm row's scores: no second LLM call
    assert result.labels["prior"] == "Behavioural prior" and result.labels["llm+prior"] == "LLM agent + prior"
    for kind in ("prior", "llm+prior"):
        cell = result.cell(kind, "popularity-matched", 1, 5)
        assert set(cell.versus) == {"embedding", "popularity", "llm"} - {"embedding"}
    assert "| Behavioural prior | LLM agent" in result.markdown()
    assert "Behavioural prior weights" in result.markdown() and result.prior["both"]["popularity"] == 0.5
    from recagent_gym.runs.evaluation.report import write_outputs

    written = write_outputs(tmp_path / "run", result, resources.config, resources.eval)
    assert json.loads(written["prior.json"].read_text())["prior_only"] == calibration.prior_only.weights | {"llm": 0.0}
    data["users_raw"] = [str(ml40.users["raw_id"].iat[result.users[0]])]
    path.write_text(json.dumps(data))
    again = run_discrimination(resources, progress=False)
    assert again.users == result.users[1:] and again.left_out == 1 and "1 sampled users left out" in again.markdown()
    resources.config.user.prior_weights = None
    with pytest.raises(DataError, match=r"user\.prior_weights"):
        run_discrimination(resources, progress=False)


@pytest.mark.slow
def test_parts_row_scores_the_fitted_parts_from_the_llm_rows_call(ml40: Dataset, tmp_path: Path) -> None:
    """``llm+prior-parts``: the file's ``parts`` fit on the LLM agent's two parts, from the ``llm`` row's call; with
    the LLM's score weighted 0 and the embedding term 1 (no features) it ranks as the embedding term alone."""
    result = run_calibration(make_resources(ml40, llm=ScriptedLLM(), users=6), users=10, exclude=6, progress=False)
    data = result.to_json()
    data["parts_fits"]["parts"]["weights"] = {"llm_score": 0.0, "embedding": 1.0}
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(data))
    llm = ScriptedLLM()
    models = ["llm", "llm+prior", "llm+prior-parts"]
    resources = make_resources(ml40, llm=llm, users=6, user_models=models, settings=SETTINGS)
    resources.config.user.prior_weights = str(path)
    got = run_discrimination(resources, progress=False)
    plain_llm = ScriptedLLM()
    plain = make_resources(ml40, llm=plain_llm, users=6, user_models=["llm"], settings=SETTINGS)
    plain.config.user.prior_weights = str(path)  # the same calibration users left out
    plain.config.user.score_llm_weight = 0.0  # the embedding term alone
    alone = run_discrimination(plain, progress=False)
    assert got.users == alone.users and llm.calls == plain_llm.calls  # the parts row made no call of its own
    assert got.labels["llm+prior-parts"] == "LLM agent + prior (parts fit)"
    for sampler in ("uniform", "popularity-matched"):
        assert got.cell("llm+prior-parts", sampler, 1, 5).per_user == alone.cell("llm", sampler, 1, 5).per_user
    assert got.prior["parts"] == {"llm_score": 0.0, "embedding": 1.0} | dict.fromkeys(FEATURES, 0.0)
    assert "LLM agent + prior (parts fit): llm_score +0.000, embedding +1.000" in got.markdown()


@pytest.mark.slow
def test_calibrate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_movielens(tmp_path / "ml40", n_users=40)
    env_path = str(Path(__file__).resolve().parents[1])
    out = tmp_path / "cal"
    command = [sys.executable, "-m", "recagent_gym.runs.cli", "calibrate", "--dataset", str(folder), "--users", "8",
               "--exclude-users", "6", "--no-llm", "--out", str(out), "--no-progress",
               "--set", "evaluation.min_interactions=14"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env={"PYTHONPATH": env_path}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "prior only" in done.stdout and (out / "prior.json").is_file()
    capsys.readouterr()
    code = cli_exit_code([*command[3:7], "0", *command[8:]])  # refused before any work: in process
    err = capsys.readouterr().err
    assert code == 2 and "--users" in err and "Traceback" not in err


def test_rating_and_preference_take_the_prior_rows(ml40: Dataset, tmp_path: Path) -> None:
    from recagent_gym.runs.evaluation.preference import run_preference
    from recagent_gym.runs.evaluation.rating import run_rating

    calibration = run_calibration(make_resources(ml40, users=6), users=10, exclude=6, use_llm=False,
                                  progress=False)  # fmt: skip
    path = write_calibration(calibration, tmp_path / "cal")["prior.json"]
    resources = make_resources(ml40, users=6, user_models=["embedding", "prior"], preference_ratios=[1])
    resources.config.user.prior_weights = str(path)
    rating = run_rating(resources, progress=False)
    assert "Behavioural prior" in rating.markdown() and rating.cell("prior", "uniform").hit_rate.n == 6
    preference = run_preference(resources, progress=False)
    assert preference.accuracy("prior", "popularity-matched", 1).n == 6


def test_a_shipped_prior_file_is_named_relative_to_the_checkout(tmp_path):
    from recagent_gym.runs.provenance import shown_path

    shipped = Path(__file__).resolve().parents[1] / "recagent_gym" / "users" / "prior_bundled.json"
    assert shown_path(shipped) == "recagent_gym/users/prior_bundled.json"
    assert shown_path(tmp_path / "prior.json") == str(tmp_path / "prior.json")

"""``user.prior_weights: auto``: the page-decision fit shipped for the bundled data, on where it applies (its model;
another dataset only for a fit without prior terms but portable ones), off elsewhere."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from recagent_gym.runs.config import Config
from recagent_gym.settings_section import ConfigError
from recagent_gym.users import prior_default
from recagent_gym.users.config import UserConfig
from recagent_gym.users.prior_default import (
    BUNDLED_FIT,
    BUNDLED_PRIOR,
    bundled_prior,
    configured_llm_name,
    keep_weights,
    resolve_prior,
)
from recagent_gym.users.prior_file import PORTABLE_FEATURES

EMBEDDED = configured_llm_name(Config().llm)


@pytest.fixture(autouse=True)
def _fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the module's once-only messages anew."""
    monkeypatch.setattr(prior_default, "_said", set())


def fitted_on() -> SimpleNamespace:
    """A stand-in with the name and size of the dataset the shipped calibration was fitted on."""
    meta = bundled_prior().meta
    return SimpleNamespace(name=meta["dataset"], n_users=meta["n_users"], n_items=meta["n_items"])


def test_the_shipped_fit_is_valid_for_the_embedded_model_on_the_bundled_data() -> None:
    meta = bundled_prior().meta
    assert meta["llm"] == EMBEDDED == "embedded:gemma-3-270m-q4_k_m"
    assert meta["dataset"] == "ml-latest-small (bundled)" and meta["llm_item_score"] in ("yes_no", "continuation")
    assert BUNDLED_FIT in bundled_prior().fits and len(meta["users_raw"]) >= 40
    assert meta["made_by"] == "recagent-gym users fit-agreement" and BUNDLED_PRIOR == prior_default.BUNDLED_FIT_FILE


def test_auto_is_the_default_and_uses_the_shipped_file_with_its_item_score_and_fit() -> None:
    user = UserConfig()
    assert user.prior_weights == "auto"
    resolved = resolve_prior(user, fitted_on(), EMBEDDED)
    assert resolved.prior_weights == str(BUNDLED_PRIOR) and resolved.prior_fit == BUNDLED_FIT
    assert resolved.llm_item_score == bundled_prior().meta["llm_item_score"]
    assert resolve_prior(resolved, fitted_on(), EMBEDDED) == resolved  # resolving again changes nothing
    # only what it resolved counts as set: the RecSim fit's defaults still apply to the same section
    assert resolved.model_fields_set <= {"prior_weights", "prior_fit", "llm_item_score"}
    from recagent_gym.users.recsim_features import FittedWeights, apply_fit

    fitted = apply_fit(resolved.model_copy(update={"recsim_fitted": "bundled"}))
    assert all(getattr(fitted, k) == v for k, v in FittedWeights.load("bundled").values.items())


def test_settings_given_explicitly_win_over_the_files_defaults(caplog: pytest.LogCaptureFixture) -> None:
    other = "yes_no" if bundled_prior().meta["llm_item_score"] == "continuation" else "continuation"
    user = UserConfig(prior_fit="both", llm_item_score=other)
    with caplog.at_level(logging.WARNING, logger="recagent_gym.users.prior_default"):
        resolved = resolve_prior(user, fitted_on(), EMBEDDED)
    assert (resolved.prior_fit, resolved.llm_item_score) == ("both", other)
    assert "were fitted on" in caplog.text  # the mismatch between the score and the weights is said


@pytest.mark.parametrize(
    "dataset, llm, strategy, why",
    [
        (None, "openai:gpt-4o-mini", "auto", "the agents run openai:gpt-4o-mini"),
        (None, None, "auto", "another model"),
        (None, EMBEDDED, "direct", "direct"),
    ],
)
def test_auto_is_off_where_the_fit_does_not_apply_and_says_why(
    dataset, llm, strategy, why, caplog: pytest.LogCaptureFixture
) -> None:
    user = UserConfig(decision_strategy=strategy)
    with caplog.at_level(logging.INFO, logger="recagent_gym.users.prior_default"):
        resolved = resolve_prior(user, dataset or fitted_on(), llm)
    assert resolved.prior_weights is None and resolved.llm_item_score == user.llm_item_score
    assert why in caplog.text and "does not apply" in caplog.text
    with pytest.raises((ConfigError, ValueError), match=r"does not apply here|does not produce"):  # direct: at load
        resolve_prior(UserConfig(prior_weights="bundled", decision_strategy=strategy), dataset or fitted_on(), llm)


OTHER = SimpleNamespace(name="ml-1m", n_users=6040, n_items=3706)
SUBSET = SimpleNamespace(name="ml-latest-small (bundled)", n_users=100, n_items=9742)


@pytest.mark.parametrize("dataset", [OTHER, SUBSET])
def test_a_fit_with_portable_terms_only_applies_on_another_dataset_and_one_with_others_does_not(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    shipped = bundled_prior().meta  # the shipped fit: the LLM's score, embedding, collaborative affinity, intercept
    assert set(shipped["prior_terms"]) <= PORTABLE_FEATURES
    resolved = resolve_prior(UserConfig(), dataset, EMBEDDED)
    assert resolved.prior_weights == str(BUNDLED_PRIOR) and resolved.prior_fit == BUNDLED_FIT
    document = json.loads(BUNDLED_PRIOR.read_text(encoding="utf-8"))
    document["prior_used"], document["prior_terms"] = True, ["affinity", "popularity"]
    with_prior = tmp_path / "fit.json"
    with_prior.write_text(json.dumps(document), encoding="utf-8")
    monkeypatch.setattr(prior_default, "BUNDLED_PRIOR", with_prior)
    monkeypatch.setattr(prior_default, "bundled_prior", lambda: prior_default.read_prior_file(with_prior))
    with caplog.at_level(logging.INFO, logger="recagent_gym.users.prior_default"):
        assert resolve_prior(UserConfig(), dataset, EMBEDDED).prior_weights is None
    # a subset of the same dataset keeps its name: the sizes say why the prior terms do not apply
    assert f"not on {dataset.name!r} ({dataset.n_users} users" in caplog.text
    assert resolve_prior(UserConfig(), fitted_on(), EMBEDDED).prior_weights == str(with_prior)


def test_the_llm_fit_row_takes_a_dataset_s_own_fit_not_the_shipped_one_auto_transfers(tmp_path: Path) -> None:
    from recagent_gym.runs.evaluation.agreement.evaluate import own_fit

    shipped = str(BUNDLED_PRIOR)
    assert own_fit("auto", fitted_on(), EMBEDDED) == shipped and own_fit("auto", OTHER, EMBEDDED) is None
    copy = tmp_path / "fit.json"
    copy.write_bytes(BUNDLED_PRIOR.read_bytes())
    assert own_fit(str(copy), OTHER, None) == str(copy)  # named explicitly: used as given, on any dataset
    calibration = str(prior_default.BUNDLED_CALIBRATION)  # not a fit: the shipped fit where it applies
    assert own_fit(calibration, fitted_on(), EMBEDDED) == shipped and own_fit(None, OTHER, EMBEDDED) is None


def test_null_turns_the_prior_off_and_a_path_brings_its_item_score(tmp_path: Path) -> None:
    assert resolve_prior(UserConfig(prior_weights=None), fitted_on(), EMBEDDED).prior_weights is None
    document = json.loads(prior_default.BUNDLED_CALIBRATION.read_text(encoding="utf-8"))
    document["llm_item_score"] = "yes_no"
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    resolved = resolve_prior(UserConfig(prior_weights=str(path), llm_item_score="continuation"), fitted_on(), None)
    assert resolved.prior_weights == str(path) and resolved.llm_item_score == "continuation"  # set: kept
    resolved = resolve_prior(UserConfig(prior_weights=str(path)), SimpleNamespace(name="x", n_users=1, n_items=1), None)
    assert resolved.llm_item_score == "yes_no" and resolved.prior_fit == "both"  # a path: as calibrated, any dataset
    fit = resolve_prior(UserConfig(prior_weights=str(BUNDLED_PRIOR)), SimpleNamespace(name="x", n_users=1, n_items=1),
                        None)  # fmt: skip
    assert fit.prior_fit == BUNDLED_FIT  # a fit file's one fit
    both = UserConfig(prior_weights=str(BUNDLED_PRIOR), prior_fit="both")  # as a resumed run's config may say
    assert resolve_prior(both, OTHER, None).prior_fit == BUNDLED_FIT


def test_the_run_folder_keeps_the_weights_the_agents_use(tmp_path: Path) -> None:
    config = Config()
    assert keep_weights(config, fitted_on(), tmp_path / "run") == str(BUNDLED_PRIOR)
    assert (tmp_path / "run" / "prior.json").read_bytes() == BUNDLED_PRIOR.read_bytes()
    assert keep_weights(config, OTHER, tmp_path / "other") == str(BUNDLED_PRIOR)  # a fit without prior terms
    config.user.decision_strategy = "direct"
    assert keep_weights(config, OTHER, tmp_path / "off") is None and not (tmp_path / "off").exists()
    config.user.decision_strategy = "auto"
    # the model the agents were given decides, not the one the configuration names (a scripted model: no prior)
    scripted = SimpleNamespace(name="scripted")
    assert keep_weights(config, fitted_on(), tmp_path / "given", llm=scripted) is None


@pytest.mark.slow
def test_the_agents_take_the_shipped_prior_on_the_bundled_data_only() -> None:
    from recagent_gym.data.load import load_dataset
    from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
    from recagent_gym.users.agent import LLMUserModel

    bundled = load_dataset("bundled")

    class Named(ScriptedLLM):  # the agents read the model's name, nothing else, to decide
        name = EMBEDDED

    agents = LLMUserModel(bundled, UserConfig(), Named(), HashingEmbedder())
    assert agents.config.prior_weights == str(BUNDLED_PRIOR) and agents._pages.prior is not None
    scripted = LLMUserModel(bundled, UserConfig(), ScriptedLLM(), HashingEmbedder())
    assert scripted.config.prior_weights is None and scripted._pages.prior is None


@pytest.mark.slow
def test_calibration_and_default_evaluations_share_no_user(tmp_path: Path) -> None:
    """The shipped calibration's users are none of the policy split's held-out users (the RL comparisons' and the
    quickstart's) and none of the users the default evaluations sample (200 and 20 at seed 0)."""
    from recagent_gym.data.load import load_dataset
    from recagent_gym.runs.comparisons.transfer import held_out_users
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation.subjects import child_rng, sample_users
    from recagent_gym.runs.policies.protocol import split_users

    dataset, config = load_dataset("bundled"), load_config("quickstart")
    raw = dataset.users["raw_id"].astype(str).to_numpy()
    fitted = {str(u) for u in bundled_prior().meta["users_raw"]}
    split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed)
    assert not fitted & {raw[u] for u in split.test}
    for size in (200, 20):
        sampled = sample_users(dataset, size, config.evaluation.min_interactions, child_rng(0, "users"))
        assert not fitted & {raw[u] for u in sampled}
    # a calibration that did fit some of them: the transfer's held-out users leave those out
    users = held_out_users(dataset, config, 0)
    document = json.loads(BUNDLED_PRIOR.read_text(encoding="utf-8"))
    document["users_raw"] = [str(raw[u]) for u in users[:3]]
    (tmp_path / "prior.json").write_text(json.dumps(document), encoding="utf-8")
    config.user.prior_weights = str(tmp_path / "prior.json")
    assert np.array_equal(held_out_users(dataset, config, 0), users[3:])


def test_which_fits_price_one_catalogue() -> None:
    from recagent_gym.users.prior_default import catalogue_bound

    assert catalogue_bound({}) and catalogue_bound({"prior_used": True})  # a calibration; an old fit with terms
    assert not catalogue_bound({"prior_used": False})  # an old fit without prior terms
    assert not catalogue_bound({"prior_used": True, "prior_terms": ["affinity"]})
    assert catalogue_bound({"prior_used": True, "prior_terms": ["affinity", "trend"]})

"""The per-item evaluations (discrimination, preference, rating) never score a user with a model made on that user:
the users of the ``llm`` row's page-decision fit (the default users read ``users/fit_bundled.json``, made on 80
train users of the bundled data) are left out beside the prior's calibration users and the distilled users'."""

from __future__ import annotations

from types import SimpleNamespace

from recagent_gym.data.load import load_dataset
from recagent_gym.runs.evaluation.distilled_row import left_out_why, without_fitted_users
from recagent_gym.runs.evaluation.prior_ablation import made_on_users
from recagent_gym.users.prior_default import BUNDLED_FIT_FILE


def _resources(models: list[str], fit: str | None) -> SimpleNamespace:
    return SimpleNamespace(
        dataset=load_dataset("bundled"),
        eval=SimpleNamespace(user_models=models),
        config=SimpleNamespace(user=SimpleNamespace(prior_weights=fit)),
        calibration=None,
        distilled_artefact=lambda: None,
    )


def test_the_llm_rows_fit_users_are_never_evaluated() -> None:
    resources = _resources(["embedding", "llm"], str(BUNDLED_FIT_FILE))
    everyone = list(range(resources.dataset.n_users))
    fitted = made_on_users(resources.dataset, BUNDLED_FIT_FILE)
    kept = without_fitted_users(resources, everyone)
    assert len(fitted) == 80 and not fitted & set(kept)
    assert len(kept) == len(everyone) - len(fitted)
    assert "page decision was fitted on them" in left_out_why(["llm"], str(BUNDLED_FIT_FILE))


def test_without_an_llm_row_or_a_fit_nobody_is_left_out() -> None:
    for models, fit in ((["embedding", "recsim"], str(BUNDLED_FIT_FILE)), (["llm"], None)):
        resources = _resources(models, fit)
        everyone = list(range(resources.dataset.n_users))
        assert without_fitted_users(resources, everyone) == everyone

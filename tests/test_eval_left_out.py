"""No evaluation scores a user with a model made on that user, and which users are left out does not depend on the
rows asked for: the per-item evaluations (discrimination, preference, rating) and ``evaluate agreement`` leave out
the same users, those of every model artefact for the dataset (the page-decision fit ``users/fit_bundled.json``, the
shipped calibration, the distilled users' training users)."""

from __future__ import annotations

from types import SimpleNamespace

from recagent_gym.data.load import load_dataset
from recagent_gym.runs.evaluation.distilled_row import artefact_users, fitting_artefact, without_fitted_users
from recagent_gym.runs.evaluation.prior_ablation import made_on_users
from recagent_gym.users.prior_default import BUNDLED_CALIBRATION, BUNDLED_FIT_FILE


def _resources(models: list[str], prior_weights: str | None) -> SimpleNamespace:
    return SimpleNamespace(
        dataset=load_dataset("bundled"),
        eval=SimpleNamespace(user_models=models),
        config=SimpleNamespace(user=SimpleNamespace(prior_weights=prior_weights, distilled_path=None)),
        calibration=str(BUNDLED_CALIBRATION),
    )


def test_every_artefacts_users_are_left_out_whichever_rows_run() -> None:
    kept = {}
    for models, setting in ((["embedding", "llm"], "auto"), (["recsim"], None), (["distilled", "prior"], "auto")):
        resources = _resources(models, setting)
        everyone = list(range(resources.dataset.n_users))
        kept[tuple(models)] = without_fitted_users(resources, everyone)
    assert len({tuple(k) for k in kept.values()}) == 1  # the same users whatever the rows
    resources = _resources(["llm"], "auto")
    dataset = resources.dataset
    fit, calibration = made_on_users(dataset, BUNDLED_FIT_FILE), made_on_users(dataset, BUNDLED_CALIBRATION)
    artefact, _ = fitting_artefact(dataset, resources.config)
    distilled = {int(u) for u in artefact.meta["train_users"]} if artefact is not None else set()
    assert len(fit) == 80 and calibration  # the fit's 80 train users; the calibration's (120 in the shipped file)
    left_out = fit | calibration | distilled
    assert artefact_users(dataset, resources.config, resources.calibration, artefact) == left_out
    survivors = set(next(iter(kept.values())))
    assert not survivors & left_out and len(survivors) == dataset.n_users - len(left_out)


def test_a_configured_fit_files_users_are_left_out_too(tmp_path) -> None:
    import json

    resources = _resources(["llm"], None)
    dataset = resources.dataset
    raw = dataset.users["raw_id"].astype(str).tolist()
    document = json.loads(BUNDLED_FIT_FILE.read_text(encoding="utf-8"))
    document["users_raw"] = raw[:3]  # a fit made on the first three users
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    before = set(without_fitted_users(resources, range(dataset.n_users)))
    after = set(without_fitted_users(_resources(["llm"], str(path)), range(dataset.n_users)))
    assert not {0, 1, 2} & after and after == before - {0, 1, 2}

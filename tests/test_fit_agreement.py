"""``users fit-agreement``: the LLM agents' page decision fitted to real outcomes, the fit file, the ``llm+fit`` row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recagent_gym.data.schema import DataError
from recagent_gym.users.agent.page_fit import PageRecords, fit_page_weights, watch_probability
from recagent_gym.users.agent.prior import combine_parts, load_weights
from recagent_gym.users.prior_file import FEATURES, INTERCEPT, PARTS, read_prior_file


def _records(n: int = 3000, k: int = 5, seed: int = 0, signal: int = 0) -> PageRecords:
    """Pages whose real outcome follows column ``signal`` of the items' scores (0: the LLM score)."""
    rng = np.random.default_rng(seed)
    scores = np.zeros((n, k, len(PARTS) + len(FEATURES)))
    scores[:, :, :-1] = rng.normal(size=(n, k, len(PARTS) + len(FEATURES) - 1))  # the affinity column stays 0
    p = 1.0 / (1.0 + np.exp(-(2.0 * scores[:, :, signal].max(axis=1) - 3.0)))
    hit = (rng.random(n) < p).astype(float)
    recommender = rng.integers(0, 4, size=n)
    return PageRecords(scores, np.ones((n, k), bool), np.full(n, 1.5), hit, recommender, rng.integers(0, 50, n),
                       ("a", "b", "c", "d"))  # fmt: skip


def test_the_fit_finds_the_score_that_carries_the_real_outcome_and_matches_its_rate():
    records = _records()
    start = {PARTS[0]: 1.0, PARTS[1]: 1.0}
    fit = fit_page_weights(records, start=start, temperature=1.0, prior_terms=(), rank_rows=np.arange(4))
    assert fit.weights[PARTS[0]] > 1.0 and fit.weights[PARTS[0]] > 2 * abs(fit.weights[PARTS[1]])
    assert all(fit.weights[f] == 0.0 for f in FEATURES)  # no prior: its weights stay at zero
    p = watch_probability(records, fit, 1.0)
    assert abs(p.mean() - records.hit.mean()) < 0.03
    assert p[records.hit > 0].mean() - p[records.hit == 0].mean() > 0.2  # it responds to the real outcome
    unfitted = watch_probability(records, type(fit)({**start, INTERCEPT: 0.0}, 0.0), 1.0)
    assert abs(unfitted.mean() - records.hit.mean()) > 0.1  # the start was far off: the fit did the work


def test_the_prior_variant_picks_up_a_feature_that_carries_the_outcome():
    records = _records(signal=len(PARTS) + 2)  # the trend feature decides
    common = {"start": {PARTS[0]: 1.0, PARTS[1]: 1.0}, "temperature": 1.0, "rank_rows": np.arange(4)}
    with_prior = fit_page_weights(records, prior_terms=FEATURES, **common)
    without = fit_page_weights(records, prior_terms=(), **common)
    assert with_prior.weights["trend"] > 0.5 and with_prior.loss < without.loss


def _spread_records(n: int = 4000, k: int = 5, seed: int = 1) -> PageRecords:
    """Pages whose recommenders differ in real hit rate by more than their scores explain (recommender ``r``'s items
    score 0.2 r higher, its real rate rises by a logit of r)."""
    rng = np.random.default_rng(seed)
    recommender = rng.integers(0, 4, size=n)
    scores = np.zeros((n, k, len(PARTS) + len(FEATURES)))
    scores[:, :, 0] = rng.normal(size=(n, k)) + 0.2 * recommender[:, None]
    p = 1.0 / (1.0 + np.exp(-(scores[:, :, 0].max(axis=1) - 1.5 + (recommender - 1.5))))
    hit = (rng.random(n) < p).astype(float)
    return PageRecords(scores, np.ones((n, k), bool), np.full(n, 1.5), hit, recommender, rng.integers(0, 50, n),
                       ("a", "b", "c", "d"))  # fmt: skip


def test_a_larger_rank_weight_matches_the_real_spread_and_sharpens_the_response():
    records = _spread_records()
    common = {"start": {PARTS[0]: 1.0, PARTS[1]: 1.0}, "temperature": 1.0, "rank_rows": np.arange(4), "prior_terms": ()}
    real = np.array([records.hit[records.recommender == r].mean() for r in range(4)])

    def mismatch_and_response(weight: float) -> tuple[float, float]:
        p = watch_probability(records, fit_page_weights(records, rank_weight=weight, **common), 1.0)
        sim = np.array([p[records.recommender == r].mean() for r in range(4)])
        return float(((sim - real) ** 2).sum()), float(p[records.hit > 0].mean() - p[records.hit == 0].mean())

    (loose, loose_response), (tight, tight_response) = mismatch_and_response(0.0), mismatch_and_response(100.0)
    assert tight < 0.5 * loose and tight_response > loose_response


def test_the_choice_is_the_best_held_out_tau_and_equals_go_to_fewer_terms_and_the_smaller_weight():
    from recagent_gym.runs.evaluation.agreement.fit import VARIANTS, choose_fit

    records = _spread_records()
    choice = choose_fit(records, np.arange(25), start={PARTS[0]: 1.0, PARTS[1]: 1.0}, temperature=1.0,
                        rank_rows=np.arange(4), rank_weights=(1.0, 30.0))  # fmt: skip
    assert [(r["variant"], r["rank_weight"]) for r in choice.rows] == [(v, w) for v in VARIANTS for w in (1.0, 30.0)]
    best = max(r["tau_b"] for r in choice.rows)
    assert choice.best["tau_b"] == best
    first = next(r for r in choice.rows if r["tau_b"] == best)  # the affinity column is 0: equal variants exist
    assert (choice.variant, choice.rank_weight) == (first["variant"], first["rank_weight"])
    assert set(choice.final.weights) >= set(PARTS)


def test_records_round_trip(tmp_path):
    records = _records(n=20)
    records.save(tmp_path / "pages.npz")
    again = PageRecords.load(tmp_path / "pages.npz")
    assert np.array_equal(again.scores, records.scores) and again.names == records.names


def test_a_fit_files_intercept_shifts_every_choice_score(tmp_path):
    path = tmp_path / "prior.json"
    weights = {"llm_score": 1.0, "embedding": 0.5, "popularity": 0.0, INTERCEPT: -0.75}
    path.write_text(json.dumps({"parts_fits": {"parts": {"weights": weights}}, "window_days": 180.0}))
    loaded = load_weights(path, which="parts")
    assert loaded.intercept == -0.75 and loaded.to_dict()[INTERCEPT] == -0.75
    out = combine_parts(np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.zeros((2, len(FEATURES))), loaded)
    assert np.allclose(out, [0.25, 0.25])
    weights[INTERCEPT] = float("nan")
    path.write_text(json.dumps({"parts_fits": {"parts": {"weights": weights}}}).replace("NaN", '"nan"'))
    with pytest.raises(DataError, match="intercept"):
        read_prior_file(path)


@pytest.mark.slow
def test_fit_agreement_end_to_end_and_the_llm_fit_row(tiny_ml, tmp_path):  # noqa: F811
    from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
    from recagent_gym.runs.evaluation.agreement.fit import VARIANTS, fit_markdown, run_fit_agreement, write_fit
    from recagent_gym.users.agent.page_fit import PageRecords
    from tests.test_eval_agreement import _config, _resources

    config = _config(agreement_recommenders="[random,popularity,mf,oracle]", negatives="uniform")
    config.user.score_cache = True
    result = run_fit_agreement(config, tiny_ml, out=tmp_path / "fit", users=6, seed=0, rank_weight=1.0,
                               play=run_agreement, progress=False)  # fmt: skip
    assert result.pages > 0 and [r["variant"] for r in result.validation] == list(VARIANTS)
    assert {r["rank_weight"] for r in result.validation} == {1.0} and result.meta["rank_weight_chosen"] is False
    # the logged pages carry the shown items, and fit again without a play (no LLM): the same pages, the same choice
    pages = PageRecords.load(tmp_path / "fit" / "pages.npz")
    assert pages.items is not None and pages.items.shape == pages.eligible.shape
    assert ((pages.items >= 0) == pages.eligible).all() and pages.items.max() < tiny_ml.n_items

    def no_play(*args, **kwargs):
        raise AssertionError("--pages must not play the zoo")

    again = run_fit_agreement(config, tiny_ml, out=tmp_path / "again", users=6, seed=0, rank_weight=1.0,
                              play=no_play, progress=False, pages=tmp_path / "fit" / "pages.npz")  # fmt: skip
    assert again.validation == result.validation and again.weights.weights == result.weights.weights
    forced = run_fit_agreement(config, tiny_ml, out=tmp_path / "forced", users=6, seed=0, rank_weight=1.0,
                               play=no_play, progress=False, pages=tmp_path / "fit" / "pages.npz",
                               variant="affinity+popularity")  # fmt: skip
    assert [r["variant"] for r in forced.validation] == ["affinity+popularity"] and not forced.meta["variant_chosen"]
    assert forced.weights.weights["trend"] == 0.0 and "given on the command line" in fit_markdown(forced)
    with pytest.raises(DataError, match="fit users"):  # pages of other users
        run_fit_agreement(config, tiny_ml, out=tmp_path / "other", users=6, seed=1, play=no_play, progress=False,
                          pages=tmp_path / "fit" / "pages.npz")  # fmt: skip
    with pytest.raises(DataError, match="variant"):
        run_fit_agreement(config, tiny_ml, out=tmp_path / "bad", users=6, seed=0, play=no_play, progress=False,
                          pages=tmp_path / "fit" / "pages.npz", variant="everything")  # fmt: skip
    path = write_fit(result, tmp_path / "fit", "scripted")
    meta = read_prior_file(path).meta
    assert meta["made_by"] == "recagent-gym users fit-agreement" and len(meta["users_raw"]) == 6
    assert (tmp_path / "fit" / "pages.npz").exists() and "Chosen:" in (tmp_path / "fit" / "fit.md").read_text()
    config.user.prior_weights = str(path)
    config.evaluation.agreement_user_models = ["llm", "llm+fit"]
    run = run_agreement(config, tiny_ml, out=tmp_path / "run", resources=_resources(tiny_ml, config), progress=False)
    assert run.prior["fit_file"] == str(path) and not run.prior["fitted_here"]
    raw = tiny_ml.users["raw_id"].astype(str).to_numpy()
    assert not {raw[u] for u in run.users} & set(meta["users_raw"])  # no fit user is evaluated
    assert "llm+fit" in run.user_models
    # the same fit given by name (as another dataset's fit is, for the transfer): a row of its own, its weights in
    # the run, its users still left out (made on this dataset)
    config.evaluation.agreement_user_models = ["llm"]
    named = run_agreement(config, tiny_ml, out=tmp_path / "named", fits={"same": path},
                          resources=_resources(tiny_ml, config), progress=False)  # fmt: skip
    assert "llm+fit:same" in named.user_models and named.prior["other_fits"]["same"]["file"] == str(path)
    assert list(named.users) == list(run.users)
    # the evaluated users do not depend on the rows asked for: without any fit row the fit's users are still left out
    alone = run_agreement(config, tiny_ml, out=tmp_path / "alone", resources=_resources(tiny_ml, config),
                          progress=False)  # fmt: skip
    assert list(alone.users) == list(run.users) and "llm+fit" not in alone.user_models
    assert named.prior["other_fits"]["same"]["weights"] == run.prior["fit_weights"]


def test_leaving_a_user_out_of_the_draw_replaces_that_user_only():
    from recagent_gym.runs.evaluation.agreement.fit import sample_users

    eligible = np.arange(100)
    base = sample_users(eligible, 10, seed=3)
    left = sample_users(eligible, 10, seed=3, left_out={int(base[0])})
    assert len(left) == 10 and int(base[0]) not in left
    assert len(set(base.tolist()) & set(left.tolist())) == 9  # the other nine stay
    assert list(sample_users(eligible, 10, seed=3, left_out={1000})) == list(base)  # not eligible: no change


from tests._eval_fixtures import movielens_dir, tiny_ml  # noqa: E402, F401


def test_logged_pages_that_are_missing_or_not_pages_get_a_clear_error(tmp_path):
    from recagent_gym.data.schema import DataError
    from recagent_gym.users.agent.page_fit import PageRecords

    with pytest.raises(DataError, match="no such file"):
        PageRecords.load(tmp_path / "nan")
    bad = tmp_path / "pages.npz"
    bad.write_text("not an archive")
    with pytest.raises(DataError, match="not the logged pages"):
        PageRecords.load(bad)

"""The distilled users as a row of discrimination and rating: re-encoded on the training split, never evaluated on
the users they were fitted on, refused with a clear message where no distilled model fits the dataset."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.config import load_config
from recagent_gym.runs.evaluation.discrimination import run_discrimination
from recagent_gym.runs.evaluation.rating import run_rating
from recagent_gym.users.distilled.saved_model import Artefact
from recagent_gym.users.distilled.user import BUNDLED_DIR
from tests._eval_fixtures import make_resources, movielens_dir, tiny_ml  # noqa: F401
from tests.test_distilled_reencode import _artefact


@pytest.fixture
def distilled_dir(tiny_ml: Dataset, tmp_path):  # noqa: F811
    text = HashingEmbedder()([tiny_ml.item_text(i) for i in range(tiny_ml.n_items)])  # what the evaluation embeds
    artefact = _artefact(tiny_ml, load_config(), text)
    artefact.arrays["threshold"] = np.full(tiny_ml.n_users, -5.0)  # these users watch: scores decide
    shipped = Artefact.load(BUNDLED_DIR).meta
    artefact.meta.update(
        format=shipped["format"],
        rule=shipped["rule"],
        interest_queries=[""] * tiny_ml.n_users,
        test_users=[],
        train_users=list(range(0, tiny_ml.n_users, 2)),
    )  # even users: "distilled on"
    artefact.save(tmp_path / "model")
    return tmp_path / "model"


def test_discrimination_scores_the_distilled_row_on_users_it_was_not_fitted_on(tiny_ml, distilled_dir) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["distilled"], users=12, settings=[(1, 5)],
                               config_overrides=[f"user.distilled_path={distilled_dir}"])  # fmt: skip
    result = run_discrimination(resources, progress=False)
    assert result.users and all(u % 2 == 1 for u in result.users)
    assert result.left_out > 0 and "distilled users were fitted on them" in result.markdown()
    cells = [c for c in result.cells if c.model == "distilled"]
    assert len(cells) == 2 and all(0.0 <= c.hit_rate.mean <= 1.0 for c in cells)  # both samplers
    assert "Distilled" in result.markdown()


def test_rating_with_the_distilled_row_says_who_was_left_out(tiny_ml, distilled_dir) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["distilled"], users=12, negatives="uniform",
                               config_overrides=[f"user.distilled_path={distilled_dir}"])  # fmt: skip
    result = run_rating(resources, progress=False)
    assert all(u % 2 == 1 for u in result.users) and result.left_out > 0
    assert "distilled users were fitted on them" in result.markdown()


def test_a_distilled_model_of_another_dataset_is_refused_with_how_to_run_without_it(tiny_ml) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["distilled"], settings=[(1, 5)])  # the shipped (bundled) model
    with pytest.raises(DataError, match=r"not this dataset.*leave the distilled row out"):
        run_discrimination(resources, progress=False)

"""RecAgent-v1's latent item columns: a PCA of their own for a table, or the basis of the table a policy trained on."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.envs.encoding import project


def _own_pca(vectors: np.ndarray, dim: int) -> np.ndarray:
    centred = vectors - vectors.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    out = centred @ vt[:dim].T
    return out / np.abs(out).max()


def test_default_projection_is_the_tables_own_pca():
    vectors = np.random.default_rng(0).normal(size=(200, 12)) * np.linspace(3, 0.5, 12)
    assert np.array_equal(project(vectors, 4), _own_pca(vectors, 4))
    assert np.abs(project(vectors, 4)).max() == pytest.approx(1.0)


def test_a_reencoded_table_keeps_the_training_tables_columns_in_its_basis():
    rng = np.random.default_rng(1)
    shipped = rng.normal(size=(300, 10)) * np.array([3.0, 3.0, 2.0, 2.0, 1.5, 1.0, 0.8, 0.6, 0.4, 0.2])  # near ties
    reencoded = shipped + rng.normal(scale=0.3, size=shipped.shape)  # the same model encoded on a history split
    trained_on = project(shipped, 6)
    own = project(reencoded, 6)
    kept = project(reencoded, 6, basis_from=shipped)
    corr = [np.corrcoef(trained_on[:, j], kept[:, j])[0, 1] for j in range(6)]
    assert min(corr) > 0.9  # every column still means what it meant to the policy
    own_corr = [np.corrcoef(trained_on[:, j], own[:, j])[0, 1] for j in range(6)]
    assert min(own_corr) < 0.9  # its own PCA flips or rotates near-tied components (the bug this guards against)
    assert np.array_equal(project(shipped, 6, basis_from=shipped), trained_on)


def test_a_basis_of_another_width_is_an_error():
    with pytest.raises(ValueError, match="width"):
        project(np.zeros((5, 3)), 2, basis_from=np.zeros((5, 4)))

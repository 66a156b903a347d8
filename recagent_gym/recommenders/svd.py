"""A plain matrix factorisation of who watched what: the randomised SVD that the candidate retriever and the
history scorers share."""

from __future__ import annotations

import numpy as np

from recagent_gym.data.schema import Dataset


def svd_factors(dataset: Dataset, dim: int, *, power_iterations: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``(user_factors, item_factors)`` of a rank-``dim`` SVD of the binary user x item matrix (a plain MF).

    Randomised SVD (Halko et al. 2011, fixed seed): a full LAPACK SVD of the matrix takes tens of seconds on a
    busy CPU, this a fraction of a second.
    """
    matrix = np.zeros((dataset.n_users, dataset.n_items), dtype=np.float32)
    inter = dataset.interactions
    matrix[inter["user_id"].to_numpy(), inter["item_id"].to_numpy()] = 1.0
    dim = min(dim, *matrix.shape)
    probe = np.random.default_rng(0).standard_normal((matrix.shape[1], min(dim + 10, matrix.shape[1])))
    basis, _ = np.linalg.qr(matrix @ probe.astype(np.float32))
    for _ in range(power_iterations):
        basis, _ = np.linalg.qr(matrix @ (matrix.T @ basis))
    u, s, vt = np.linalg.svd(basis.T @ matrix, full_matrices=False)
    u = basis @ u
    return (u[:, :dim] * s[:dim]).astype(np.float32), vt[:dim].T.astype(np.float32)

"""A distilled model's tables re-encoded from another dataset's users and items (e.g. a training split).

The shipped tables encode every user from the whole dataset: a user's features include its most recent items, so on
a temporal split (``evaluate agreement``) the stored table would describe the very items held out as the user's
future. The network's weights travel with the tables (``net.*`` in ``weights.npz``), so the tables can be computed
again from the history alone: the same model, with no look at what is being predicted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact


def reencoded(artefact: Artefact, dataset: Dataset, config: Any, *, text: np.ndarray) -> Artefact:
    """``artefact`` with its tables computed from ``dataset`` (same items, same users by raw id).

    ``text``: the item text embeddings the model was fitted with (``users.distilled.fit.text_vectors``). The
    dataset must hold the users the artefact was distilled on, in the same order (a split of that dataset does).
    """
    import torch

    from recagent_gym.runs.distill.features import model_features
    from recagent_gym.runs.distill.network import TwoTower
    from recagent_gym.runs.distill.objective import population_profiles

    state = {k[4:]: torch.from_numpy(np.asarray(v)) for k, v in artefact.arrays.items() if k.startswith("net.")}
    if not state:
        raise DistillError("this distilled model has no network weights (net.*): its tables cannot be re-encoded")
    if artefact.meta["n_items"] != dataset.n_items:
        raise DistillError(f"distilled model of {artefact.meta['n_items']} items, dataset of {dataset.n_items}")
    if artefact.meta.get("user_raw_ids") != [str(r) for r in dataset.users["raw_id"]]:
        raise DistillError("re-encoding needs the users the model was distilled on, in the same order")
    settings = artefact.meta["settings"]
    profiles = population_profiles(dataset, config)
    collab = artefact.arrays.get("collab_items")  # the vectors it was fitted with, not an SVD of this dataset
    users_x, items_x = model_features(dataset, text, profiles, config.user.history_shots, collab)
    net = TwoTower(
        users_x.shape[1], items_x.shape[1], text_dim=text.shape[1], hidden=settings["hidden"], dim=settings["dim"],
        collab_dim=0 if collab is None else collab.shape[1],
    )  # fmt: skip
    try:
        net.load_state_dict(state)
    except RuntimeError as error:
        raise DistillError(f"the distilled network does not fit this dataset's features: {error}") from None
    user_table, item_table, item_offset = net.tables(users_x, items_x)
    arrays = {
        **artefact.arrays,
        "user_table": user_table.astype(np.float16),
        "item_table": item_table.astype(np.float16),
        "item_offset": item_offset,
    }  # the decision rule's per-user threshold and search odds come from the profile: kept as fitted
    meta = {
        **artefact.meta,
        "reencoded_on": dataset.name,
    }
    return Artefact(arrays, meta)

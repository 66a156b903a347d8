"""How much of the RecSim-style users' hidden nutrition do the public item features and the retriever's order carry?

    python benchmarks/probe_hidden_nutrition.py [--config rl_recsim] [--users 200] [--env-seed 0] [--folds 5]

``rl_recsim``'s users hide the items' quality (``env.hide_quality``): what a watch gives back to the time budget,
the nutrition (RecSim's "kale"), follows it. This probe takes the first ``--users`` TRAINING users of the config's
split at ``--env-seed`` (``user.recsim_seed = train.split_seed``, as ``evaluate rl-comparison --env-seeds`` sets
them), the candidates of their first page, and prints:

* the out-of-sample R2 (``--folds``-fold cross-validation over the items offered) of ridge regression of the shared
  nutrition on the public item features (the observation's item columns: genres, year, popularity, the constant
  quality, the latent block), linear and quadratic (every product of two columns added), and of popularity alone;
  then per candidate offered (items counted as often as offered), the features with and without the retrieval block
  and position: what the retriever's order adds to what the policy observes;
* the mean nutrition (shared, and the user's own with the personal share) by retrieval block and by position.

A probe, not a timed benchmark: under a minute on 2 cores at the defaults.
"""

from __future__ import annotations

import argparse

import numpy as np

from recagent_gym.data.load import load_dataset_from_config
from recagent_gym.runs.config import load_config
from recagent_gym.runs.make_env import make_candidate_env
from recagent_gym.runs.policies.protocol import split_users

BLOCKS = ("mf", "genre", "popular", "friends", "random")


def quadratic(x: np.ndarray) -> np.ndarray:
    """``x`` with every product of two of its columns (squares included) appended."""
    rows, cols = np.triu_indices(x.shape[1])
    return np.concatenate([x, x[:, rows] * x[:, cols]], axis=1)


def ridge_r2(x: np.ndarray, y: np.ndarray, *, folds: int, alpha: float = 1.0, seed: int = 0) -> float:
    """Out-of-sample R2 of ridge regression (columns standardised on the training fold, intercept unpenalised)."""
    order = np.random.default_rng(seed).permutation(len(y))
    predicted = np.empty(len(y))
    for part in np.array_split(order, folds):
        train = np.setdiff1d(order, part)
        mean, scale = x[train].mean(0), x[train].std(0)
        scale[scale == 0] = 1.0
        a, b = (x[train] - mean) / scale, (x[part] - mean) / scale
        weights = np.linalg.solve(a.T @ a + alpha * np.eye(a.shape[1]), a.T @ (y[train] - y[train].mean()))
        predicted[part] = b @ weights + y[train].mean()
    return float(1.0 - np.sum((y - predicted) ** 2) / np.sum((y - y.mean()) ** 2))


def offered(env, users: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """Per candidate of each user's first page: the item, its position, its source, the user's own nutrition."""
    inner = env.unwrapped
    items, positions, sources, own = [], [], [], []
    for k, user in enumerate(users.tolist()):
        env.reset(seed=k, options={"user_id": int(user)})
        labels: list[str] = []
        ids = inner.retriever.retrieve(int(user), inner.seen_mask, np.random.default_rng(k), sources=labels)
        items.append(ids)
        positions.append(np.arange(len(ids)))
        sources += labels
        mine = getattr(inner.user_model, "nutrition_for", None)
        own.append(mine(int(user), ids) if mine is not None else np.full(len(ids), np.nan))
    return np.concatenate(items), np.concatenate(positions), sources, np.concatenate(own)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="rl_recsim")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--env-seed", type=int, default=0)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    seed = args.env_seed
    config = load_config(args.config, [f"user.recsim_seed={seed}", f"train.split_seed={seed}"])
    dataset = load_dataset_from_config(config.data)
    split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=seed)
    users = split.train[: args.users]
    env = make_candidate_env(config, dataset, users)
    shared = getattr(env.unwrapped.user_model, "nutrition", None)
    if shared is None:
        raise SystemExit(f"{config.user.model} users have no nutrition: nothing to probe")
    shared = np.asarray(shared, dtype=np.float64)
    items, positions, sources, own = offered(env, users)
    unique = np.unique(items)
    features = np.asarray(env.unwrapped.item_features, dtype=np.float64)[unique]
    y = shared[unique]
    n_genres = env.unwrapped.tables.n_genres
    print(f"{args.config}, env seed {seed}: {len(users)} training users, {len(items)} candidates offered "
          f"({len(unique)} distinct items), hide_quality={config.env.hide_quality}")  # fmt: skip
    for name, x in (
        ("linear, all public item features", features),
        ("quadratic, all public item features", quadratic(features)),
        ("linear, popularity alone", features[:, n_genres + 1 : n_genres + 2]),
        ("linear, latent block alone", features[:, n_genres + 3 :]),
    ):
        print(f"  out-of-sample R2 of nutrition ({name}): {ridge_r2(x, y, folds=args.folds):.3f}")
    labels = np.asarray(sources)
    per_candidate = np.asarray(env.unwrapped.item_features, dtype=np.float64)[items]
    order = np.concatenate([np.stack([labels == b for b in BLOCKS], 1), np.eye(int(positions.max()) + 1)[positions]], 1)
    for name, x in (
        ("features", per_candidate),
        ("features + block + position", np.concatenate([per_candidate, order], 1)),
    ):
        r2 = ridge_r2(x, shared[items], folds=args.folds)
        print(f"  out-of-sample R2 of nutrition per candidate offered (linear, {name}): {r2:.3f}")
    print("  mean nutrition by retrieval block (shared / the user's own):")
    for block in BLOCKS:
        chosen = labels == block
        if chosen.any():
            print(
                f"    {block:8s} n={chosen.sum():6d}  {shared[items[chosen]].mean():+.3f} / {own[chosen].mean():+.3f}"
            )
    print("  mean nutrition by retrieval position (shared / the user's own):")
    for start in range(0, int(positions.max()) + 1, 10):
        chosen = (positions >= start) & (positions < start + 10)
        print(f"    {start:2d}-{start + 9:2d}  {shared[items[chosen]].mean():+.3f} / {own[chosen].mean():+.3f}")


if __name__ == "__main__":
    main()

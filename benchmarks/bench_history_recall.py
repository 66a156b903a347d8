"""Are the agreement test's history recommenders adequately trained? Full-ranking recall@k and NDCG@k.

    python benchmarks/bench_history_recall.py [--dataset bundled] [--future 10] [--k 20] [--validation]

Splits the dataset as ``evaluate agreement`` does (each user's last ``--future`` items held out, users with at least
``--min-history`` items of history), fits every recommender of :data:`recagent_gym.recommenders.history_zoo.
HISTORY_MODELS` (and popularity) on the history, ranks ALL items the user has not interacted with in the history,
and prints recall@k and NDCG@k against the held-out items with 95% bootstrap intervals over users, the number of
users and each model's fitting seconds. ``--validation`` does the same one level down (the history's own last
``--future`` items held out, the held-out futures never read): the split the zoo's settings are chosen on.
``--users N`` scores a sample of N users (the fits still read every user's history).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from recagent_gym.data.load import load_dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.recommenders.history_scorers import interaction_matrix
from recagent_gym.recommenders.history_zoo import HISTORY_MODELS, Popularity
from recagent_gym.runs.metrics import summarize


def full_ranking(model, history, held_out, users, k):
    """Per user: recall@k and NDCG@k of ``model``'s ranking of every item outside the user's history."""
    seen = interaction_matrix(history).tolil().rows
    every = np.arange(history.n_items)
    discount = 1.0 / np.log2(np.arange(k) + 2.0)
    recall, ndcg = [], []
    for user in users:
        scores = np.asarray(model.scores(int(user), every), np.float64).copy()
        scores[seen[int(user)]] = -np.inf
        top = np.argpartition(-scores, k)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        future = set(held_out[int(user)])
        hits = np.array([int(i) in future for i in top], np.float64)
        recall.append(hits.sum() / min(len(future), k))
        ndcg.append(float(hits @ discount) / float(discount[: min(len(future), k)].sum()))
    return np.array(recall), np.array(ndcg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="bundled", help="'bundled' or a MovieLens folder")
    parser.add_argument("--future", type=int, default=10)
    parser.add_argument("--min-history", type=int, default=10)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--models", default=",".join(["popularity", *HISTORY_MODELS]))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validation", action="store_true", help="score on the history's own last items")
    parser.add_argument("--users", type=int, default=0, help="score a seeded sample of this many users (0: all)")
    args = parser.parse_args()

    dataset = load_dataset(args.dataset)
    split = leave_last_out(dataset, args.future, min_train=args.min_history)
    history, held_out = split.train, split.held_out
    if args.validation:
        inner = leave_last_out(history, args.future, min_train=args.min_history)
        history, held_out = inner.train, inner.held_out
    users = np.array(sorted(held_out), np.int64)
    if 0 < args.users < len(users):
        users = np.sort(np.random.default_rng(args.seed).choice(users, size=args.users, replace=False))
    print(f"{dataset.name}{' (validation: the history split again)' if args.validation else ''}: {len(users)} users, "
          f"{len(history.interactions)} history interactions, {args.future} held out each, full ranking of "
          f"{history.n_items} items, k = {args.k}")  # fmt: skip
    print(f"| model | recall@{args.k} [95% CI] | NDCG@{args.k} [95% CI] | fit s |")
    print("|---|---|---|---|")
    for name in args.models.split(","):
        started = time.perf_counter()
        model = Popularity(history) if name == "popularity" else HISTORY_MODELS[name](history, args.seed)
        fit = time.perf_counter() - started
        recall, ndcg = full_ranking(model, history, held_out, users, args.k)
        r = summarize(recall, np.random.default_rng(0))
        n = summarize(ndcg, np.random.default_rng(0))
        print(f"| {name} | {r.mean:.3f} [{r.low:.3f}, {r.high:.3f}] | {n.mean:.3f} [{n.low:.3f}, {n.high:.3f}] | "
              f"{fit:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""How many factors should the collaborative affinity have? Held-out AUC of the affinity per number of factors.

    python benchmarks/bench_affinity_dims.py [--dataset bundled] [--dims 8,16,32,64] [--users 300] [--test]

The behavioural prior's ``affinity`` (:data:`recagent_gym.users.agent.prior.AFFINITY_DIMS` factors of a truncated SVD
of the history, the item's factors against the direction of the user's history) is scored by how well it tells a
user's held-out next items from negatives: per user, the AUC of the held-out items against ``--negatives`` items the
user has not seen, drawn uniformly and, separately, matched in popularity (each negative the nearest unseen item in
the history's popularity order to a held-out item), with the history's popularity as the reference. The mean AUC over
users comes with its 95% bootstrap interval and the number of users.

By default the split is the history's own (``evaluate agreement``'s split, then each user's last ``--future``
history items held out again): the held-out futures are never read, so the factor count is chosen without the users
the agreement test scores. ``--test`` scores the agreement split itself (to report, never to choose).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from recagent_gym.data.load import load_dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.recommenders.history_scorers import interaction_matrix
from recagent_gym.runs.metrics import summarize
from recagent_gym.users.recsim_features import collaborative_item_latents, history_directions


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(positive > negative), ties counted half."""
    diff = positive[:, None] - negative[None, :]
    return float((diff > 0).mean() + 0.5 * (diff == 0).mean())


def negatives(rng: np.random.Generator, seen: set[int], future: list[int], order: np.ndarray, rank: np.ndarray,
              n: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(uniform, popularity-matched)`` unseen negatives for one user."""
    banned = seen | set(future)
    pool = rng.permutation(len(order))
    uniform = np.array([i for i in pool[: 4 * n + len(banned)] if int(i) not in banned][:n], np.int64)
    matched: list[int] = []
    for m in range(n):
        anchor = rank[future[m % len(future)]]
        for step in range(1, len(order)):
            for j in (anchor - step, anchor + step):
                if 0 <= j < len(order) and int(order[j]) not in banned and int(order[j]) not in matched:
                    matched.append(int(order[j]))
                    break
            else:
                continue
            break
    return uniform, np.array(matched, np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="bundled", help="'bundled' or a MovieLens folder")
    parser.add_argument("--dims", default="8,16,32,64", help="factor counts to score (comma-separated)")
    parser.add_argument("--future", type=int, default=10)
    parser.add_argument("--min-history", type=int, default=10)
    parser.add_argument("--negatives", type=int, default=40, help="negatives per user and sampler")
    parser.add_argument("--users", type=int, default=300, help="a seeded sample of this many users (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test", action="store_true", help="score the agreement split's futures (report only)")
    args = parser.parse_args()

    dataset = load_dataset(args.dataset)
    split = leave_last_out(dataset, args.future, min_train=args.min_history)
    history, held_out = split.train, split.held_out
    if not args.test:
        inner = leave_last_out(history, args.future, min_train=args.min_history)
        history, held_out = inner.train, inner.held_out
    users = np.array(sorted(held_out), np.int64)
    rng = np.random.default_rng(args.seed)
    if 0 < args.users < len(users):
        users = np.sort(rng.choice(users, size=args.users, replace=False))
    matrix = interaction_matrix(history)
    seen_rows = matrix.tolil().rows
    popularity = np.asarray((matrix > 0).sum(axis=0), np.float64).ravel()
    order = np.argsort(popularity, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    drawn = {}
    for user in users.tolist():
        future = [int(i) for i in held_out[user] if int(i) < history.n_items]
        if future:
            drawn[user] = (future, *negatives(rng, set(seen_rows[user]), future, order, rank, args.negatives))
    split_name = "the agreement split (test: report only)" if args.test else "the history's own split (validation)"
    print(f"{dataset.name}, {split_name}: {len(drawn)} distinct users, {args.future} held out each, "
          f"{args.negatives} negatives per user and sampler")  # fmt: skip
    print("| score | factors | AUC, uniform negatives [95% CI] | AUC, popularity-matched [95% CI] | s |")
    print("|---|---|---|---|---|")

    def row(name: str, dims: str, score_of: Callable[[int], np.ndarray], seconds: float) -> None:
        uniform, matched = [], []
        for user, (future, neg_u, neg_p) in drawn.items():
            score = score_of(user)
            uniform.append(auc(score[future], score[neg_u]))
            matched.append(auc(score[future], score[neg_p]))
        u, p = (
            summarize(np.array(uniform), np.random.default_rng(0)),
            summarize(np.array(matched), np.random.default_rng(0)),
        )
        print(f"| {name} | {dims} | {u.mean:.3f} [{u.low:.3f}, {u.high:.3f}] | {p.mean:.3f} [{p.low:.3f}, "
              f"{p.high:.3f}] | {seconds:.1f} |", flush=True)  # fmt: skip

    row("popularity", "–", lambda user: popularity, 0.0)
    for dims in [int(d) for d in args.dims.split(",")]:
        started = time.perf_counter()
        items = collaborative_item_latents(history, dims, args.seed)
        directions = history_directions(history, items)
        row("affinity", str(dims), lambda user, i=items, d=directions: i @ d[user], time.perf_counter() - started)


if __name__ == "__main__":
    main()

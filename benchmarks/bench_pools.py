"""Seconds to build the candidate pools of real choices among never-seen negatives, both samplers, as the RecSim-style
and Embedding fits at start build them (each user's last 10 items never read, the 10 before them the real choices,
pools of 50) and as ``evaluate agreement`` builds its own.

python benchmarks/bench_pools.py [--dataset bundled] [--users 0 (all)] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from recagent_gym.data.load import load_dataset
from recagent_gym.data.pools import build_pools
from recagent_gym.users.recsim_fit import choice_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bundled")
    parser.add_argument("--users", type=int, default=0, help="the first N users with a future (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ds = load_dataset(args.dataset)
    split = choice_split(ds, holdout=10, choices=10, min_history=10)
    users = sorted(split.held_out)[: args.users or None]
    print(f"{ds.name}: {len(users)} users, {ds.n_items} items, {len(ds.interactions)} interactions")
    for sampler in ("uniform", "popularity-matched"):
        start = time.perf_counter()
        pools = build_pools(split.train, split, users, sampler=sampler, size=50, seed=args.seed)
        seconds = time.perf_counter() - start
        print(f"{sampler}: {seconds:.2f} s for {len(pools)} pools ({1000 * seconds / max(len(pools), 1):.2f} ms each)")


if __name__ == "__main__":
    main()

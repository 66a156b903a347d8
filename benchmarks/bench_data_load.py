"""Seconds to load a dataset (default: the bundled MovieLens latest-small), warm and cold imports apart.

python benchmarks/bench_data_load.py [--dataset bundled] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from recagent_gym.data.load import load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bundled")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    ds = load_dataset(args.dataset)
    first = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        load_dataset(args.dataset)
        times.append(time.perf_counter() - start)
    print(f"{ds.name}: {ds.n_users} users, {ds.n_items} items, {len(ds.interactions)} interactions")
    print(f"first load (imports, page cache): {first:.2f} s")
    print(f"warm load: median {statistics.median(times):.2f} s, min {min(times):.2f} s over {args.repeats}")


if __name__ == "__main__":
    main()

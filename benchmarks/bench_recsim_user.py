"""The RecSim-style user's own per-step cost: ``respond`` on 5-item pages, sessions restarted when the user leaves.

    python benchmarks/bench_recsim_user.py --calls 30000 [--config rl_recsim]

Prints microseconds per ``respond`` (choice, budget, drift included, plus building the ``Context``; no env around
it); not a timed test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from recagent_gym.envs.resolve import resolve_dataset
from recagent_gym.runs.config import load_config
from recagent_gym.runs.config.named import find_config
from recagent_gym.users.protocol import Action, Context, Page
from recagent_gym.users.recsim import RecSimUser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=30_000)
    parser.add_argument("--config", default="rl_recsim")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = load_config(str(find_config(args.config)))
    dataset = resolve_dataset(None, config)
    users = RecSimUser(dataset, config.user)
    rng = np.random.default_rng(0)
    pages = [Page(tuple(int(i) for i in rng.choice(dataset.n_items, 5, replace=False))) for _ in range(2000)]
    max_steps = 200
    best = float("inf")
    for _ in range(args.repeats):
        users.set_state({**users.get_state(), "sessions": {}, "shown": {}})
        user, step, sessions = 0, 0, 0
        users.start_session(user, rng)
        start = time.perf_counter()
        for k in range(args.calls):
            response = users.respond(pages[k % len(pages)], Context(user, step=step), rng)
            step += 1
            if response.action == Action.LEAVE or step >= max_steps:
                users.end_sessions([user])
                user, step, sessions = (user + 1) % dataset.n_users, 0, sessions + 1
                users.start_session(user, rng)
        best = min(best, (time.perf_counter() - start) / args.calls)
    print(
        f"RecSimUser.respond: {best * 1e6:.1f} us per call (best of {args.repeats} x {args.calls} calls, {args.config})"
    )


if __name__ == "__main__":
    main()

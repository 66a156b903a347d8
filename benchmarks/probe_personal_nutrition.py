"""Which share of the RecSim-style users' nutrition should be personal? Chosen on training users against real choices.

    python benchmarks/probe_personal_nutrition.py [--shares 0,0.25,0.5,0.75,1] [--users 200] [--env-seeds 0,1,2]
        [--set user.recsim_allure=0 ...]

Per env seed ``s`` (``user.recsim_seed = train.split_seed = s``, as ``evaluate rl-comparison --env-seeds`` sets them)
it takes the first ``--users`` TRAINING users of ``rl_recsim``'s split (never the held-out users the RL table
evaluates) and measures six arms: random, popularity, MF and item-kNN among the env's candidates, and MF and item-kNN
reading another user's encoding (a fixed derangement). Real side: the same users' real hit@5 in pools of 50 with
popularity-matched negatives, as popular as the env's candidates (``evaluate agreement``'s real side,
``evaluation.agreement_swapped``). Simulated side, per share ``p`` (``user.recsim_personal_nutrition``): each arm's
mean session return with ``rl_recsim``'s users (``--set KEY=VALUE``, repeatable: further overrides of those users'
config, the same at every share and seed). It prints Kendall tau between the two over the six arms, per seed and
on average, and the candidates' popularity beside the two samplers' negatives. A probe, not a timed benchmark: about
15 minutes on 2 cores at the defaults.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np
from scipy.stats import kendalltau

from recagent_gym.data.load import load_dataset_from_config
from recagent_gym.envs.encoding import ENCODING_KEYS
from recagent_gym.policies.candidate_baselines import (
    ItemKNNCandidates,
    MFCandidates,
    PopularCandidates,
    RandomCandidates,
)
from recagent_gym.runs.config import load_config
from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
from recagent_gym.runs.evaluation.agreement.pools import build_pools, temporal_split
from recagent_gym.runs.evaluation.agreement.run import REAL
from recagent_gym.runs.make_env import make_candidate_env
from recagent_gym.runs.policies.evaluate_policies import EvalProtocol, evaluate_recommenders
from recagent_gym.runs.policies.protocol import split_users

ARMS = ("random", "popularity", "mf", "itemknn", "mf~swapped", "itemknn~swapped")
SAMPLER = "popularity-matched"


def real_hits(config, dataset, users: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    cfg = config.model_copy(deep=True)
    ev = cfg.evaluation
    ev.agreement_user_models, ev.negatives = [], SAMPLER
    ev.agreement_recommenders, ev.agreement_swapped = ["random", "popularity", "mf", "itemknn"], ["mf", "itemknn"]
    ev.agreement_users, ev.agreement_pool, ev.agreement_future = len(users), 50, 10
    run = run_agreement(cfg, dataset, out=tempfile.mkdtemp(), only_users=users, progress=False)
    return np.asarray(run.users), {arm: float(run.arm(SAMPLER, REAL, arm).hit.mean()) for arm in ARMS}


def simulated(dataset, users: np.ndarray, share: str, seed: int, overrides: list[str]) -> dict[str, float]:
    config = load_config("rl_recsim", [f"user.recsim_personal_nutrition={share}", f"user.recsim_seed={seed}",
                                       f"train.split_seed={seed}", *overrides])  # fmt: skip
    env = make_candidate_env(config, dataset, users)
    recommenders = {"random": RandomCandidates(env, seed=0), "popularity": PopularCandidates(env),
                    "mf": MFCandidates(env), "itemknn": ItemKNNCandidates(env)}  # fmt: skip
    protocol = EvalProtocol(users=users, sessions_per_user=1, seed=seed, n_boot=200, swapped=True,
                            encoding_keys=ENCODING_KEYS)  # fmt: skip
    rows = {r.recommender: r for r in evaluate_recommenders(recommenders, env, protocol)}
    out = {name: rows[name].mean_return for name in recommenders}
    out.update({f"{n}~swapped": rows[n].mean_return - rows[n].swapped_drop for n in ("mf", "itemknn")})
    return out


def candidate_popularity(config, dataset, users: np.ndarray) -> None:
    counts = np.bincount(dataset.interactions["item_id"].to_numpy(), minlength=dataset.n_items)
    env = make_candidate_env(config, dataset, users)
    shown = []
    for k, user in enumerate(users.tolist()):
        env.reset(seed=k, options={"user_id": int(user)})
        shown += [int(i) for i in env.unwrapped.candidate_ids]
    split = temporal_split(dataset, 10, 10)
    eligible = [u for u in users.tolist() if u in split.held_out]
    groups = {"the env's candidates (K = 50, first page)": shown}
    for sampler in ("uniform", SAMPLER):
        pools = build_pools(dataset, split, eligible, sampler=sampler, size=50, seed=0)
        groups[f"{sampler} negatives"] = [i for u in eligible for i in pools[u].candidates.tolist()
                                          if i not in set(pools[u].future)]  # fmt: skip
    groups["the users' real future items"] = [i for u in eligible for i in pools[u].future]
    for name, items in groups.items():
        c = counts[np.asarray(items)]
        print(f"  {name}: median {np.median(c):.0f} ratings, {np.mean(c <= 2):.0%} with at most 2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shares", default="0,0.25,0.5,0.75,1")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--env-seeds", default="0,1,2")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override of the simulated users' config (rl_recsim's), repeatable")  # fmt: skip
    args = parser.parse_args()
    if args.overrides:
        print("simulated users: rl_recsim with " + ", ".join(args.overrides))
    base = load_config("rl_recsim", [])
    dataset = load_dataset_from_config(base.data)
    shares = args.shares.split(",")
    taus: dict[str, list[float]] = {p: [] for p in shares}
    for seed in (int(s) for s in args.env_seeds.split(",")):
        split = split_users(dataset.n_users, test_fraction=base.train.test_fraction, seed=seed)
        if seed == 0:
            print("popularity of what the recommenders rank (training users, env seed 0):")
            candidate_popularity(base, dataset, split.train[: args.users])
        users, real = real_hits(base, dataset, split.train[: args.users])
        print(f"env seed {seed}: {len(users)} training users; real hit@5 ({SAMPLER}): "
              + ", ".join(f"{a} {real[a]:.3f}" for a in ARMS), flush=True)  # fmt: skip
        for share in shares:
            sim = simulated(dataset, users, share, seed, args.overrides)
            tau = float(kendalltau([real[a] for a in ARMS], [sim[a] for a in ARMS]).statistic)
            taus[share].append(tau)
            print(f"  p={share}: tau {tau:+.2f}; " + ", ".join(f"{a} {sim[a]:.2f}" for a in ARMS), flush=True)
    print("mean Kendall tau over env seeds: " + ", ".join(f"p={p} {np.mean(t):+.3f}" for p, t in taus.items()))


if __name__ == "__main__":
    main()

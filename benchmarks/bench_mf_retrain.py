"""Online MF retraining, incremental against full: held-out recall and CPU per retrain.

    python benchmarks/bench_mf_retrain.py [--dataset bundled] [--stream 2] [--every 20] [--threads 1]

The simulator's protocol (``simulate_paper``: ``recommender.retrain_every: 20``) on real data: each user's last
interaction is held out; the ``--stream`` interactions before it are the "simulated" watches, fed to the recommender
one user's session at a time (users in a seeded random order) through :meth:`MFRecommender.observe`, so it retrains
every ``--every`` sessions; the rest is the dataset it is first fitted on. Printed per retrain mode (``none``: never
retrain, ``incremental``, ``full``): hit rate at 10 and 50 of the held-out items (ranked among the items each user
has not interacted with), their mean percentile rank (AUC), the retrains and their CPU seconds (the process's, all
threads) and per retrain.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch
import yaml

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.config import RecommenderConfig
from recagent_gym.recommenders.mf import MFRecommender


def split(dataset: Dataset, stream: int) -> tuple[Dataset, list[list[tuple[int, int, float]]], dict[int, int]]:
    """``(base dataset, each user's streamed session, held-out item per user)`` for users with enough history."""
    inter = dataset.interactions.sort_values(["user_id", "timestamp"], kind="stable")
    position = inter.groupby("user_id").cumcount(ascending=False).to_numpy()  # 0 = the user's last interaction
    counts = inter.groupby("user_id")["item_id"].transform("size").to_numpy()
    eligible = counts >= stream + 6  # at least 5 interactions stay in the base
    held_rows = inter[eligible & (position == 0)]
    stream_rows = inter[eligible & (position >= 1) & (position <= stream)]
    base = dataclasses.replace(dataset, interactions=inter[~eligible | (position > stream)].reset_index(drop=True))
    sessions = [
        list(zip(g["user_id"].tolist(), g["item_id"].tolist(), g["rating"].tolist(), strict=True))
        for _, g in stream_rows.groupby("user_id")
    ]
    return base, sessions, dict(zip(held_rows["user_id"].tolist(), held_rows["item_id"].tolist(), strict=True))


def held_out_metrics(mf: MFRecommender, held: dict[int, int]) -> dict[str, float]:
    """Hit@10, hit@50 and mean percentile rank of each user's held-out item among the items they did not see."""
    ranks, sizes = [], []
    for user, item in held.items():
        scores = mf.scores(user)
        seen = np.fromiter(mf._seen[user], dtype=np.int64)
        unseen = np.ones(len(scores), dtype=bool)
        unseen[seen] = False
        unseen[item] = True
        ranks.append(int((scores[unseen] > scores[item]).sum()))
        sizes.append(int(unseen.sum()))
    r, n = np.asarray(ranks), np.asarray(sizes)
    return {"hit@10": float((r < 10).mean()), "hit@50": float((r < 50).mean()), "auc": float((1 - r / n).mean())}


def run(base: Dataset, sessions: list, held: dict[int, int], mode: str, config: RecommenderConfig, seed: int) -> dict:
    """Fit on ``base``, stream ``sessions`` (retraining as ``mode`` says) and score the held-out items."""
    cfg = config.model_copy(update={"retrain_every": 0 if mode == "none" else config.retrain_every})
    if mode != "none":
        cfg = cfg.model_copy(update={"mf_retrain": mode})
    mf = MFRecommender(base, 5, cfg, seed=seed)
    order = np.random.default_rng(seed).permutation(len(sessions))
    cpu = 0.0
    for index in order:
        session = sessions[index]
        for k, (user, item, rating) in enumerate(session):
            start = time.process_time()
            mf.observe({"user_id": user, "item": item, "rating": rating}, done=k == len(session) - 1)
            cpu += time.process_time() - start
    result = held_out_metrics(mf, held)
    result.update(retrains=mf.retrains, cpu_s=cpu, cpu_per_retrain_ms=1000 * cpu / max(mf.retrains, 1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bundled")
    parser.add_argument("--stream", type=int, default=2, help="streamed interactions per user (one session)")
    parser.add_argument("--every", type=int, default=20, help="retrain every N sessions (simulate_paper: 20)")
    parser.add_argument("--threads", type=int, default=1, help="recommender.torch_threads")
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    parser.add_argument("--modes", default="none,incremental,full")
    parser.add_argument("--set", action="append", default=[], help="RecommenderConfig field=value (repeatable)")
    args = parser.parse_args()
    overrides = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.set)}
    config = RecommenderConfig.model_validate({"retrain_every": args.every, "torch_threads": args.threads, **overrides})
    base, sessions, held = split(load_dataset(args.dataset), args.stream)
    print(f"{args.dataset}: {len(base.interactions)} base interactions, {len(sessions)} streamed sessions "
          f"({sum(map(len, sessions))} interactions), {len(held)} held-out items; torch {torch.__version__}, "
          f"{torch.backends.cpu.get_cpu_capability()}, threads {args.threads}")  # fmt: skip
    print("| mode | seed | hit@10 | hit@50 | AUC | retrains | retrain CPU s | per retrain ms |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        for seed in map(int, args.seeds.split(",")):
            m = run(base, sessions, held, mode, config, seed)
            print(f"| {mode} | {seed} | {m['hit@10']:.3f} | {m['hit@50']:.3f} | {m['auc']:.4f} | {m['retrains']} "
                  f"| {m['cpu_s']:.2f} | {m['cpu_per_retrain_ms']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()

"""Does the item-scoring PPO's evaluation page re-show items shown earlier in the session? With and without the rule.

    python benchmarks/probe_reshown_pages.py [--config rl_recsim] [--steps 4000,12000,24000] [--users 40]

Trains PPO (item scoring, Plackett-Luce pages) on the config's training users twice, with
``ItemScoringExtractor(exclude_shown=...)`` off (the policy of earlier versions) and on (this version's), and at each
checkpoint runs one session per validation user (the first ``--users`` training users, left out of training) with
the deterministic page (top scores, what the comparison evaluates) and with sampled pages. Prints the mean return, the
pages per session and the share of page slots holding an item shown earlier in the session. A probe, not a timed
benchmark: about 4 minutes on 2 cores at the defaults.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

from recagent_gym.envs.resolve import resolve_dataset
from recagent_gym.policies.candidate_baselines import SHOWN_COLUMN
from recagent_gym.policies.item_scoring import ItemScoringPolicy
from recagent_gym.runs.config import load_config
from recagent_gym.runs.make_env import make_candidate_env
from recagent_gym.runs.policies.protocol import split_users


def sessions(model: PPO, env, users: np.ndarray, deterministic: bool, page_size: int) -> str:
    returns, reshown, pages = [], [], []
    for k, user in enumerate(users.tolist()):
        obs, _ = env.reset(seed=k, options={"user_id": int(user)})
        done, total, n, repeats = False, 0.0, 0, 0
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            page = np.argsort(-action)[:page_size]
            repeats += int((obs["candidates"][page, SHOWN_COLUMN] > 0).sum())
            obs, reward, terminated, truncated, _ = env.step(action)
            done, total, n = bool(terminated or truncated), total + float(reward), n + 1
        returns.append(total)
        reshown.append(repeats / (page_size * n))
        pages.append(n)
    return f"return {np.mean(returns):.2f}, pages {np.mean(pages):.1f}, re-shown slots {np.mean(reshown):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="rl_recsim")
    parser.add_argument("--steps", default="4000,12000,24000")
    parser.add_argument("--users", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_config(args.config)
    train = config.train
    dataset = resolve_dataset(None, config)
    split = split_users(dataset.n_users, test_fraction=train.test_fraction, seed=train.split_seed)
    validation, learn = split.train[: args.users], split.train[args.users :]
    env = make_candidate_env(config, dataset, validation)
    page_size = config.env.page_size
    print(f"{args.config}: {len(learn)} training users, {len(validation)} validation users", flush=True)
    for exclude in (False, True):
        venv = VecMonitor(DummyVecEnv([lambda: make_candidate_env(config, dataset, learn)] * train.n_envs))
        venv.seed(0)
        kwargs = {"page_size": page_size, "features_extractor_kwargs": {"dim": 32, "exclude_shown": exclude}}
        model = PPO(ItemScoringPolicy, venv, n_steps=train.n_steps, batch_size=train.batch_size, seed=0,
                    learning_rate=train.learning_rate, gamma=train.gamma, device="cpu",
                    policy_kwargs=kwargs)  # fmt: skip
        for steps in (int(s) for s in args.steps.split(",")):
            model.learn(steps - model.num_timesteps, reset_num_timesteps=False)
            print(
                f"exclude_shown={exclude} step {model.num_timesteps}: deterministic pages "
                f"{sessions(model, env, validation, True, page_size)} | sampled pages "
                f"{sessions(model, env, validation, False, page_size)}",
                flush=True,
            )
        venv.close()


if __name__ == "__main__":
    main()

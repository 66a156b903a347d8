"""The training users' real logs as behaviour-cloning examples, and the ``bc`` / ``bc_ppo`` learners.

Examples (:func:`cloning_examples`): each TRAINING user's last items by time are held out (the agreement test's
temporal split, :mod:`recagent_gym.runs.evaluation.agreement.pools`); RecAgent-v1 is built on the history before
them with a pool per user of ``train.n_candidates`` candidates (the user's real future items among never-seen
negatives, both samplers) and the real user replayed. The user's pages are walked by teacher forcing (each page
shows the earliest future item not yet shown, so the replayed user watches it, among random other candidates); every
observation on the way is an example whose targets are the future items not shown yet. The same observation the real-hit
column is measured on, item features counted on the history included, but of training users only: the held-out
users' futures are never read. (With the simulator's table, counted on the whole dataset, the popularity and
latent columns count the very futures the clone is trained to find: it learns the leak, not the users.)

``bc``: :func:`~recagent_gym.policies.behaviour_cloning.clone` on those examples (no simulator step), kept at the
epoch whose pages hold the validation users' logged choices most often (the start included) where the comparison
sets users aside.
``bc_ppo``: the clone, then PPO in the simulator with ``train.bc_kl_beta * KL(pi || pi_bc)`` added to its loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.policies.candidate_baselines import rank_action
from recagent_gym.runs.config import Config

SAMPLERS: tuple[str, ...] = ("popularity-matched", "uniform")


def cloning_examples(
    config: Config,
    dataset: Dataset,
    users: np.ndarray,
    item_features: tuple[np.ndarray, str] | Callable[[Dataset], tuple[np.ndarray, str]],
    *,
    seed: int = 0,
    samplers: tuple[str, ...] = SAMPLERS,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``(observations, targets)``: every value of ``observations`` ``(N, ...)``, ``targets`` ``(N, K)`` (see the
    module docstring); ``users`` are training users (those with too little history are skipped); ``item_features``
    the observation's item table, or a function of the history split that builds it (the RL comparison's
    :func:`~recagent_gym.runs.comparisons.history_features.history_item_features`: a table counted on the whole
    dataset tells the clone which items the users went on to watch); ``samplers``: the pools' negatives (both by
    default)."""
    from recagent_gym.runs.evaluation.agreement.pools import PoolRetriever, build_pools, temporal_split
    from recagent_gym.runs.make_env import candidates_env
    from recagent_gym.users.replay import ReplayUser

    ev, k = config.evaluation, config.train.n_candidates
    n_future = max(1, min(ev.agreement_future, k // 5))
    split = temporal_split(dataset, n_future, ev.agreement_min_history, kind=ev.agreement_split,
                           quantile=ev.agreement_cut_quantile)  # fmt: skip
    eligible = np.array([u for u in np.asarray(users).tolist() if split.held_out.get(int(u))], dtype=np.int64)
    if len(eligible) == 0:
        raise ValueError("behaviour cloning: no training user has held-out items to clone")
    future = {int(u): tuple(dict.fromkeys(split.held_out[int(u)])) for u in eligible}
    if callable(item_features):
        item_features = item_features(split.train)
    observations: list[dict[str, np.ndarray]] = []
    targets: list[np.ndarray] = []
    for s, sampler in enumerate(samplers):
        pools = build_pools(dataset, split, [int(u) for u in eligible], sampler=sampler, size=k, seed=seed + 7919 * s,
                            n_bands=ev.popularity_bands)  # fmt: skip
        env = candidates_env(split.train, ReplayUser(future), config.env.page_size, ev.agreement_pages, False, config,
                             n_candidates=k, users=eligible, retriever=PoolRetriever(pools, k, split.train.n_users),
                             item_features=item_features)  # fmt: skip
        for n, user in enumerate(eligible.tolist()):
            _walk(env, int(user), future[int(user)], seed + n, observations, targets)
    stacked = {key: np.stack([o[key] for o in observations]) for key in observations[0]}
    return stacked, np.stack(targets)


def _walk(
    env: Any, user: int, future: tuple[int, ...], seed: int, observations: list[dict[str, np.ndarray]],
    targets: list[np.ndarray],
) -> None:  # fmt: skip
    """One user's teacher-forced session: an example per page while a future item not shown yet is among the
    candidates (its targets: those items). Each page shows the earliest of them, which the replayed user watches, and
    random other candidates; the other future items are held back. (Pages filled with the future items, the first
    way, made the ones not watched the session's skipped items: the clone learned to show what resembles what the
    user had just skipped, 0.95 of the validation users' logged pages held a choice, and its real hits fell below
    popularity's.)"""
    obs, _ = env.reset(seed=seed, options={"user_id": user})
    rng = np.random.default_rng([seed, 5381])
    order = {item: r for r, item in enumerate(future)}
    done = False
    while not done:
        ids = np.asarray(env.unwrapped.candidate_ids)
        n = len(obs["candidate_mask"])
        shown = obs["candidates"][:, -2] * obs["candidate_mask"]
        ahead = np.isin(ids, future) & (shown[: len(ids)] == 0)
        if not ahead.any():
            return
        wanted = np.zeros(n, dtype=np.float32)
        wanted[: len(ids)] = ahead
        observations.append(obs)
        targets.append(wanted)
        scores = np.full(n, -2.0)  # padding last
        scores[: len(ids)] = np.where(np.isin(ids, future), -1.0, rng.random(len(ids)))  # future held back
        scores[min((order[int(ids[k])], k) for k in np.flatnonzero(ahead))[1]] = 2.0
        obs, _, terminated, truncated, _ = env.step(rank_action(scores, shown))
        done = terminated or truncated


def train_cloned(
    name: str, config: Config, dataset: Dataset, users: np.ndarray, seed: int, curve: Any, retriever: Any,
    examples: tuple[dict[str, np.ndarray], np.ndarray], steps: int, say: Any = print,
    validation: tuple[dict[str, np.ndarray], np.ndarray] | None = None,
) -> Any:  # fmt: skip
    """``bc`` or ``bc_ppo`` (``name``) trained on ``users`` (the clone on ``examples``, then ``steps`` PPO steps for
    ``bc_ppo``); the model answers ``predict``. ``bc`` is a PPO model that never stepped (its curve has the one
    point, step 0: the clone, as ``bc_ppo``'s first point)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    from recagent_gym.policies.behaviour_cloning import PPO_ENT_COEF, KLPenalisedPolicy, clone
    from recagent_gym.runs.make_env import make_candidate_env
    from recagent_gym.runs.policies.callbacks import ProgressLine

    train = config.train
    build = lambda: make_candidate_env(config, dataset, users, retriever=retriever)  # noqa: E731
    venv = VecMonitor(DummyVecEnv([build] * train.n_envs))
    venv.seed(seed)
    page_size = venv.get_attr("page_size", [0])[0]
    kwargs = {"page_size": page_size, "kl_beta": train.bc_kl_beta, "entropy_coef": 0.0, "prior": train.latent_prior}
    model = PPO(KLPenalisedPolicy, venv, n_steps=train.n_steps, batch_size=train.batch_size, gamma=train.gamma,
                learning_rate=train.learning_rate, ent_coef=PPO_ENT_COEF, n_epochs=train.ppo_epochs, seed=seed,
                device="cpu", verbose=0, policy_kwargs=kwargs)  # fmt: skip
    policy: Any = model.policy  # a KLPenalisedPolicy (SB3 types it as its base class)
    done = clone(policy, *examples, epochs=train.bc_epochs, learning_rate=train.bc_learning_rate, seed=seed,
                 validation=validation)  # fmt: skip
    line = f"{name} seed {seed}: cloned on {len(examples[1])} logged pages, loss {done.losses[0]:.3f} -> "
    line += f"{done.losses[-1]:.3f}"
    if done.validation and validation is not None:
        line += f"; validation pages holding a choice {done.validation[0]:.3f} at the start, kept epoch {done.kept} "
        line += f"of {len(done.losses)} ({done.validation[done.kept]:.3f} on {len(validation[1])} pages of other users)"
    say(line)
    policy.anchor()
    if name == "bc":
        curve.per_user.append((0, curve.evaluate(model)))
        if curve.also is not None:
            curve.also(model, 0)
    else:  # the curve's first point (step 0) is the clone
        model.learn(steps, callback=[curve, ProgressLine(steps, every=train.log_every)])
    venv.close()
    return model

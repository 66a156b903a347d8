"""Run recommenders (baselines, trained policies, an oracle) on held-out users; table, CSV and plot with intervals.

The protocol (:class:`EvalProtocol`): every held-out user gets the same fixed number of sessions, from the users'
restored starting state (``reset(seed=...)`` restores every user), so each recommender meets the same users in the
same states. A recommender's figure is the mean over users of each user's mean session return, with a 95% interval
by bootstrap over users (:mod:`recagent_gym.runs.policies.protocol`). A trained policy given for several training seeds
is one row: per user, the mean over its seeds.

Personalisation check: the same sessions again, with the observation's user encoding (``encoding_keys``) replaced
by another held-out user's (a fixed derangement, the partner's encoding at its first session start). A recommender
that uses who the user is loses return (``swapped_drop`` > 0, paired bootstrap over users); one that ignores it
(popularity) loses nothing. The swap also freezes the encoding for the session, which discards what the session's
own watches add to it; the control (``frozen_drop``) therefore runs the sessions a third time with the user's OWN
session-start encoding frozen the same way, and reports the frozen own run minus the swapped run: the return that
depends on whose encoding it is, and nothing else.

Every recommender answers SB3's ``predict`` on the env's observation; a trained v0 policy is adapted by
:class:`PolicyRecommender`. An optional ``observe(info, done)`` lets a recommender see each step's outcome (MF's
online retraining, the per-session exclusion of shown items).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.envs.adapters import ObsFlattener, PageAdapter
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.wrappers import page_adapter
from recagent_gym.runs.policies.policy_files import PolicyError, check_v0_meta, load_policy, read_meta
from recagent_gym.runs.policies.protocol import Interval, bootstrap_mean, bootstrap_ratio, derangement

V0_ENCODING_KEYS: tuple[str, ...] = ("user_id", "user_features", "history", "history_genres")
"""Who the user is in the v0 observation: swapped by the personalisation check."""


REPEAT_SEED_STRIDE = 1_000_003
"""Seed offset between repeats of a user's sessions (more than any number of users: the seeds never collide)."""


@dataclass(frozen=True)
class EvalProtocol:
    """Which users, how many sessions each, and the seeds of the evaluation."""

    users: np.ndarray
    """Held-out dense user ids, each evaluated ``sessions_per_user`` times."""
    sessions_per_user: int = 1
    seed: int = 0
    """User ``k`` of ``users`` starts from ``reset(seed=seed + k)``: the same state for every recommender."""
    repeats: int = 1
    """Times each user's sessions are played again from the restored starting state, repeat ``r`` from
    ``reset(seed=seed + k + REPEAT_SEED_STRIDE * r)``: other draws of the same sessions, so a user's mean return is
    less noisy (the users, and so the interval's unit, stay the same)."""
    n_boot: int = 2000
    swapped: bool = True
    """Run the personalisation check (doubles the cost)."""
    encoding_keys: tuple[str, ...] = V0_ENCODING_KEYS


@dataclass
class RunRecord:
    """Raw outcome of one recommender's sessions: per user and session returns, plus per-session counts."""

    returns: np.ndarray
    """``(n_users, repeats * sessions_per_user)``: repeat ``r``'s sessions in columns ``r * sessions_per_user`` on."""
    watches: list[int] = field(default_factory=list)
    search_watches: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    leaves: int = 0
    fallbacks: int = 0
    shown: np.ndarray | None = None
    first_obs: dict[int, Any] = field(default_factory=dict)
    """Observation at the start of each user's first session (the source of swapped encodings)."""


@dataclass(frozen=True)
class PolicyMetrics:
    """One row of ``policies.csv``. NaN means "not defined here" and is written as an empty cell."""

    recommender: str
    mean_return: float
    """Mean over held-out users of the user's mean session return."""
    ci_low: float
    ci_high: float
    """95% bootstrap interval over users."""
    n_users: int
    """Distinct held-out users evaluated."""
    sessions: int
    """Sessions run (users x sessions per user x seeds)."""
    seeds: int
    """Training seeds pooled in this row (1 for non-learning recommenders)."""
    swapped_drop: float
    """Return lost when another user's encoding is swapped into the observation (> 0: the policy personalises)."""
    swapped_ci_low: float
    swapped_ci_high: float
    frozen_drop: float
    """The control: return with the user's own session-start encoding frozen minus with the partner's (same freeze)."""
    frozen_ci_low: float
    frozen_ci_high: float
    oracle_ratio: float
    """mean_return / the oracle's mean_return (empty without an oracle row)."""
    oracle_ratio_ci_low: float
    oracle_ratio_ci_high: float
    oracle_corr: float
    """Pearson correlation over users of this recommender's per-user return with the oracle's."""
    watches_per_session: float
    search_watches_per_session: float
    pages_per_session: float
    leave_rate: float
    coverage: float
    """Distinct recommended items / catalogue size."""
    genre_entropy: float
    """Entropy of the genres of recommended items, normalised by log(n_genres) to [0, 1]."""
    fallbacks: int
    """User-model fallbacks (LLM users) counted over the run."""
    real_hit: float = math.nan
    """Real offline metric: hit@k per page against the held-out users' real future items (``evaluate agreement``'s
    real side, :mod:`recagent_gym.runs.evaluation.agreement.sim2real`); empty where not measured (the oracle)."""
    real_ci_low: float = math.nan
    real_ci_high: float = math.nan
    real_swapped_drop: float = math.nan
    """The real hit rate lost when the recommender reads another held-out user's encoding (paired over users; the
    real counterpart of ``swapped_drop``); empty for rows that do not read who the user is."""
    real_swapped_ci_low: float = math.nan
    real_swapped_ci_high: float = math.nan

    @property
    def interval(self) -> Interval:
        return Interval(self.mean_return, self.ci_low, self.ci_high, self.n_users)

    @property
    def swapped_interval(self) -> Interval:
        return Interval(self.swapped_drop, self.swapped_ci_low, self.swapped_ci_high, self.n_users)


class PolicyRecommender:
    """A trained SB3 model behind the ``predict`` of the raw env (flatten, predict, page through the adapter)."""

    def __init__(self, model: Any, adapter: PageAdapter | None, flattener: ObsFlattener, env: RecAgentEnv) -> None:
        self.model, self.adapter, self.flattener, self.env = model, adapter, flattener, env

    @classmethod
    def load(cls, path: str | Path, env: RecAgentEnv) -> PolicyRecommender:
        """Load ``policy.zip`` (or a checkpoint) with the ``policy.json`` written beside it by training, checked
        against ``env`` (:func:`~recagent_gym.runs.policies.policy_files.load_policy`)."""
        meta = check_v0_meta(path, load_meta(path), list(env.observation_space.spaces))
        if meta["n_items"] != env.tables.n_items or meta["page_size"] != env.page_size:
            raise PolicyError(
                f"{path}: trained for {meta['n_items']} items and pages of {meta['page_size']}, "
                f"but the env has {env.tables.n_items} items and pages of {env.page_size}"
            )
        flattener = ObsFlattener(env.observation_space, meta["observation_keys"])
        adapter = page_adapter(meta["action"], env)
        action_space = env.action_space if adapter is None else adapter.space
        model = load_policy(path, meta["algorithm"], observation_space=flattener.space, action_space=action_space)
        return cls(model, adapter, flattener, env)

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]:
        action, state = self.model.predict(self.flattener.flatten(observation), deterministic=deterministic)
        page = action if self.adapter is None else self.adapter.to_page(action, self.env.seen_mask)
        return np.asarray(page, dtype=np.int64), state


def load_meta(path: str | Path) -> dict[str, Any]:
    """The ``policy.json`` saved beside a policy (its folder, or the run folder of a checkpoint)."""
    return read_meta(path)


# ------------------------------------------------------------------------------------------------------- running
def _swap(observation: Any, partner_obs: Any, keys: Sequence[str]) -> Any:
    swapped = dict(observation)
    for key in keys:
        swapped[key] = np.array(partner_obs[key], copy=True)
    return swapped


def run_sessions(
    recommender: Any,
    env: Any,
    protocol: EvalProtocol,
    *,
    swap_from: Mapping[int, Any] | None = None,
    partners: np.ndarray | None = None,
    on_step: Callable[[int, dict[str, Any], float, bool], None] | None = None,
) -> RunRecord:
    """``protocol.sessions_per_user`` sessions of each held-out user, each user from the restored starting state
    (``protocol.repeats`` times, with other seeds).

    With ``swap_from`` (user -> first observation) and ``partners`` (index into ``protocol.users``), the
    recommender sees the partner's encoding keys instead of the user's own. ``on_step(k, info, reward, done)``
    sees every step of user ``protocol.users[k]`` (per-page metrics of the agreement test).
    """
    users = protocol.users
    core = env.unwrapped
    n_items = core.tables.n_items
    per_repeat = protocol.sessions_per_user
    record = RunRecord(returns=np.zeros((len(users), protocol.repeats * per_repeat)), shown=np.zeros(n_items, np.int64))
    observe = getattr(recommender, "observe", None)
    for k, user in enumerate(users.tolist()):
        partner_obs = None
        if swap_from is not None and partners is not None:
            partner_obs = swap_from[int(users[partners[k]])]
        for column in range(protocol.repeats * per_repeat):
            repeat, s = divmod(column, per_repeat)
            seed = protocol.seed + k + REPEAT_SEED_STRIDE * repeat if s == 0 else None
            obs, _ = env.reset(seed=seed, options={"user_id": int(user)})
            if column == 0:
                record.first_obs[int(user)] = {key: np.array(v, copy=True) for key, v in obs.items()}
            if observe is not None:
                observe({"session_start": True, "user_id": int(user)}, False)
            total, watches, search_watches, pages, done = 0.0, 0, 0, 0, False
            while not done:
                seen = obs if partner_obs is None else _swap(obs, partner_obs, protocol.encoding_keys)
                action, _ = recommender.predict(seen, deterministic=True)
                obs, reward, terminated, truncated, info = env.step(action)
                done = bool(terminated or truncated)
                total += float(reward)
                pages += 1
                record.shown[list(info["page"])] += 1
                if info.get("item") is not None and info["item"] >= 0:  # v1 writes -1 for "nothing watched"
                    from_search = bool(info.get("from_search", False))
                    search_watches += int(from_search)
                    watches += int(not from_search)
                record.fallbacks += int(info.get("fallbacks", 0))
                if on_step is not None:
                    on_step(k, info, float(reward), done)
                if observe is not None:
                    observe(info, done)
                if terminated:
                    record.leaves += 1
            record.returns[k, column] = total
            record.watches.append(watches)
            record.search_watches.append(search_watches)
            record.pages.append(pages)
    return record


def evaluate_recommenders(
    recommenders: Mapping[str, Any | Sequence[Any]],
    env: Any,
    protocol: EvalProtocol,
    *,
    oracle: str | None = None,
    progress: Callable[[str], None] | None = None,
    per_user_out: dict[str, np.ndarray] | None = None,
) -> list[PolicyMetrics]:
    """Every recommender (a list value: one trained policy per seed, pooled per user) on the same held-out users.

    ``oracle`` names the reference row (a recommender that knows the users' hidden state) for ``oracle_ratio``
    and ``oracle_corr``; ``per_user_out`` receives each row's per-user mean return (for paired differences).
    """
    partners = derangement(len(protocol.users), protocol.seed)
    per_user: dict[str, np.ndarray] = {}
    records: dict[str, list[RunRecord]] = {}
    drops: dict[str, np.ndarray] = {}
    frozen_drops: dict[str, np.ndarray] = {}
    for name, value in recommenders.items():
        models = list(value) if isinstance(value, list | tuple) else [value]
        runs, swapped_runs, frozen_runs = [], [], []
        for model in models:
            if progress is not None:
                progress(f"evaluating {name}: {len(protocol.users)} held-out users")
            # The swapped run starts from the recommender's same state (a random page generator, MF's weights):
            # the only difference between the two runs is the encoding the recommender sees.
            state = model.get_state() if hasattr(model, "get_state") and hasattr(model, "set_state") else None
            run = run_sessions(model, env, protocol)
            runs.append(run)
            if protocol.swapped and len(protocol.users) > 1:
                if state is not None:
                    model.set_state(state)
                swapped_runs.append(
                    run_sessions(model, env, protocol, swap_from=run.first_obs, partners=partners).returns
                )
                if state is not None:
                    model.set_state(state)
                own = np.arange(len(protocol.users))  # the control: the user's own encoding, frozen the same way
                frozen_runs.append(run_sessions(model, env, protocol, swap_from=run.first_obs, partners=own).returns)
        records[name] = runs
        per_user[name] = np.mean([r.returns.mean(axis=1) for r in runs], axis=0)
        if swapped_runs:
            swapped_mean = np.mean([s.mean(axis=1) for s in swapped_runs], axis=0)
            drops[name] = per_user[name] - swapped_mean
            frozen_drops[name] = np.mean([f.mean(axis=1) for f in frozen_runs], axis=0) - swapped_mean
    if per_user_out is not None:
        per_user_out.update(per_user)
    results = []
    for i, (name, runs) in enumerate(records.items()):
        drop = (drops.get(name), frozen_drops.get(name))
        results.append(_metrics(name, runs, per_user[name], drop, per_user.get(oracle or ""), env, protocol, i))
    return results


def _metrics(
    name: str,
    runs: list[RunRecord],
    per_user: np.ndarray,
    drop: tuple[np.ndarray | None, np.ndarray | None],
    oracle_per_user: np.ndarray | None,
    env: Any,
    protocol: EvalProtocol,
    index: int,
) -> PolicyMetrics:
    seed = protocol.seed + 7919 * (index + 1)
    interval = bootstrap_mean(per_user, n_boot=protocol.n_boot, seed=seed)
    nan = float("nan")
    swapped, frozen = (bootstrap_mean(d, n_boot=protocol.n_boot, seed=seed + k) if d is not None else None
                       for k, d in ((1, drop[0]), (3, drop[1])))  # fmt: skip
    ratio = corr = None
    if oracle_per_user is not None:
        ratio = bootstrap_ratio(per_user, oracle_per_user, n_boot=protocol.n_boot, seed=seed + 2)
        both_vary = per_user.std() > 0 and oracle_per_user.std() > 0
        corr = float(np.corrcoef(per_user, oracle_per_user)[0, 1]) if both_vary else nan
    tables = env.unwrapped.tables
    shown = np.sum([r.shown for r in runs], axis=0)
    genre_mass = shown.astype(np.float64) @ tables.topics
    p = genre_mass / max(genre_mass.sum(), 1e-12)
    entropy = float(-(p[p > 0] * np.log(p[p > 0])).sum() / math.log(max(tables.n_genres, 2)))
    sessions = sum(r.returns.size for r in runs)
    return PolicyMetrics(
        recommender=name,
        mean_return=interval.mean,
        ci_low=interval.low,
        ci_high=interval.high,
        n_users=interval.n,
        sessions=sessions,
        seeds=len(runs),
        swapped_drop=swapped.mean if swapped else nan,
        swapped_ci_low=swapped.low if swapped else nan,
        swapped_ci_high=swapped.high if swapped else nan,
        frozen_drop=frozen.mean if frozen else nan,
        frozen_ci_low=frozen.low if frozen else nan,
        frozen_ci_high=frozen.high if frozen else nan,
        oracle_ratio=ratio.mean if ratio else nan,
        oracle_ratio_ci_low=ratio.low if ratio else nan,
        oracle_ratio_ci_high=ratio.high if ratio else nan,
        oracle_corr=corr if corr is not None else nan,
        watches_per_session=float(np.mean([w for r in runs for w in r.watches])),
        search_watches_per_session=float(np.mean([w for r in runs for w in r.search_watches])),
        pages_per_session=float(np.mean([p for r in runs for p in r.pages])),
        leave_rate=sum(r.leaves for r in runs) / max(sessions, 1),
        coverage=float((shown > 0).sum() / tables.n_items),
        genre_entropy=entropy,
        fallbacks=sum(r.fallbacks for r in runs),
    )


# ------------------------------------------------------------------------------------------------------ reporting

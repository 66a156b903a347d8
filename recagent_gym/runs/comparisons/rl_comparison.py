"""The RL comparison on RecAgent-v1, one call: every recommender, every training seed, held-out users.

Protocol (:mod:`recagent_gym.runs.policies.protocol`): a fixed seeded split of users; learners (PPO/A2C with
:class:`ItemScoringPolicy`, SlateQ, the LinUCB bandit) train on training users only, for ``train.total_timesteps``
(or the learner's entry in ``train.learner_timesteps``)
env steps per seed; PPO/A2C and SlateQ are evaluated on ``train.eval_curve_users`` held-out users every
``train.eval_every`` steps (learning curves, seeds pooled per user, 95% bands); with ``train.validation_users`` > 0
that many training users are set aside (no learner trains on them) and each learner is kept at the curve point with
the best mean return on them (:mod:`recagent_gym.runs.policies.selection`); at the end every recommender runs
``train.eval_sessions_per_user`` sessions of each held-out user from their restored starting state, with the
personalisation (swapped encoding) check and the ratio to the oracle and per-user correlation with it (the rollout
oracle where it runs, else the heuristic oracle: :mod:`recagent_gym.runs.comparisons.oracles`).

Writes ``policies.md/.csv/.png``, ``learning_curves.csv/.png`` and ``timing.json`` into the output folder.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recagent_gym.data.schema import Dataset
from recagent_gym.envs.candidate_slate_env import RecAgentCandidateEnv
from recagent_gym.envs.encoding import ENCODING_KEYS
from recagent_gym.envs.resolve import resolve_dataset
from recagent_gym.policies.bandit import train_bandit
from recagent_gym.policies.candidate_baselines import (
    HistoryLatentCandidates,
    ItemKNNCandidates,
    MFCandidates,
    PopularCandidates,
    QualityCandidates,
    RandomCandidates,
)
from recagent_gym.policies.slateq import train_slateq
from recagent_gym.policies.threads import blas_threads
from recagent_gym.runs.comparisons.cloning import cloning_examples, train_cloned
from recagent_gym.runs.comparisons.headroom import headroom_line, real_transfer_lines
from recagent_gym.runs.comparisons.history_features import history_item_features
from recagent_gym.runs.comparisons.oracles import ORACLES, OracleRows
from recagent_gym.runs.config import Config, dump_config
from recagent_gym.runs.make_env import make_candidate_env
from recagent_gym.runs.policies.callbacks import HeldOutEval, ProgressLine, write_curve_plot
from recagent_gym.runs.policies.evaluate_policies import (
    EvalProtocol,
    PolicyMetrics,
    evaluate_recommenders,
    run_sessions,
)
from recagent_gym.runs.policies.protocol import Interval, bootstrap_mean, split_users
from recagent_gym.runs.policies.results_table import markdown_table, summary_line, write_results
from recagent_gym.runs.policies.selection import BestOnValidation, validation_split
from recagent_gym.runs.policies.validation_file import validation_curves

LEARNERS: tuple[str, ...] = ("ppo", "a2c", "slateq", "bandit", "bc", "bc_ppo")
OBSERVATION_BASELINES: tuple[str, ...] = ("latent",)
"""Non-learning rows that read the observation only: on the real side they play as trained policies do."""
KNOWN: tuple[str, ...] = ("random", "popularity", "quality", "mf", "itemknn", *OBSERVATION_BASELINES, *ORACLES,
                          *LEARNERS)  # fmt: skip
CLONED: tuple[str, ...] = ("bc", "bc_ppo")
"""Learners pre-trained on the training users' real logs (:mod:`recagent_gym.runs.comparisons.cloning`)."""
REAL_BASELINES: tuple[str, ...] = ("random", "popularity", "quality", "mf", "itemknn")
"""Rows whose real offline metric is measured by the agreement test's zoo under the same name (the oracle reads the
simulated users' hidden state: it has no real counterpart)."""
REAL_SWAPPED: tuple[str, ...] = ("mf", "itemknn", *OBSERVATION_BASELINES, *LEARNERS)
"""Rows whose real hit rate is also measured on another held-out user's encoding (the rows that read who the user
is): the real counterpart of the swapped drop."""


def learner_steps(config: Config, name: str) -> int:
    """Env steps a learner trains for: its ``train.learner_timesteps`` entry, else ``train.total_timesteps``."""
    return int(config.train.learner_timesteps.get(name, config.train.total_timesteps))


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def train_item_scoring(
    name: str, config: Config, dataset: Dataset, users: np.ndarray, seed: int, curve: HeldOutEval, retriever: Any
) -> Any:
    """PPO or A2C (``name``) with :class:`ItemScoringPolicy` on RecAgent-v1 over ``users`` for the learner's steps;
    the trained SB3 model (its ``predict`` answers the env's observation)."""
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    from recagent_gym.policies.item_scoring import ItemScoringPolicy

    train = config.train
    # Sync vector env for now: RecAgent-v1 composes v0 one session at a time (no batched user-model call yet).
    build = lambda: make_candidate_env(config, dataset, users, retriever=retriever)  # noqa: E731
    venv = VecMonitor(DummyVecEnv([build] * train.n_envs))
    venv.seed(seed)
    common = {
        "learning_rate": train.learning_rate,
        "gamma": train.gamma,
        "seed": seed,
        "device": "cpu",
        "verbose": 0,
        # Pages drawn as Plackett-Luce slates of the scores (the policy gradient credits the items shown).
        "policy_kwargs": {"page_size": venv.get_attr("page_size", [0])[0], "prior": train.latent_prior},
    }
    if name == "ppo":
        model = PPO(ItemScoringPolicy, venv, n_steps=train.n_steps, batch_size=train.batch_size,
                    n_epochs=train.ppo_epochs, **common)  # fmt: skip
    else:
        model = A2C(ItemScoringPolicy, venv, n_steps=train.n_steps, **common)
    steps = learner_steps(config, name)
    model.learn(steps, callback=[curve, ProgressLine(steps, every=train.log_every)])
    venv.close()
    return model


def run_comparison(
    config: Config, *, output_dir: str | Path, dataset: Dataset | None = None,
    per_user: dict[str, np.ndarray] | None = None,
) -> list[PolicyMetrics]:  # fmt: skip
    """Train and evaluate everything in ``config.train.compare``; see the module docstring. ``per_user`` receives
    each row's per-user mean return."""
    # numpy's BLAS as torch: ``train.torch_threads`` threads (spinning BLAS threads cost 10x on a busy machine)
    with blas_threads(config.train.torch_threads):
        return _run_comparison(config, output_dir=output_dir, dataset=dataset, per_user=per_user)


def check_compare(config: Config, *, env_seeds: bool = False) -> None:
    """``train.compare`` and ``train.learner_timesteps`` name known recommenders, once each, and not none; with
    ``env_seeds`` (the comparison at several env seeds, whose table pits the best learner against the best
    baseline) at least one learner and one non-learning baseline. Checked when the command reads its configuration,
    before any seed runs."""
    from recagent_gym.settings_section import ConfigError

    compare = list(config.train.compare)
    if not compare:
        raise ConfigError(f"train.compare is empty: name the recommenders to compare among {', '.join(KNOWN)}")
    unknown = sorted(set(compare) - set(KNOWN))
    if unknown:
        raise ConfigError(f"train.compare: unknown recommenders {unknown}; expected among {', '.join(KNOWN)}")
    twice = sorted({n for n in compare if compare.count(n) > 1})
    if twice:
        raise ConfigError(f"train.compare names {', '.join(twice)} more than once")
    unknown = sorted(set(config.train.learner_timesteps) - set(LEARNERS))
    if unknown:
        raise ConfigError(f"train.learner_timesteps: unknown learners {unknown}; expected among {', '.join(LEARNERS)}")
    learners = [n for n in compare if n in LEARNERS]
    baselines = [n for n in compare if n not in (*LEARNERS, *ORACLES)]
    if env_seeds and not (learners and baselines):
        raise ConfigError(
            f"--env-seeds compares the best learner ({', '.join(LEARNERS)}) with the best non-learning baseline: "
            f"train.compare={compare} needs at least one of each"
        )


def _run_comparison(
    config: Config, *, output_dir: str | Path, dataset: Dataset | None, per_user: dict[str, np.ndarray] | None = None
) -> list[PolicyMetrics]:
    train = config.train
    check_compare(config)
    torch.set_num_threads(train.torch_threads)  # small nets: one thread is fastest (measured, see README)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    started = time.perf_counter()
    dataset = resolve_dataset(dataset, config)
    split = split_users(dataset.n_users, test_fraction=train.test_fraction, seed=train.split_seed)
    test_users = split.test[: train.eval_users] if train.eval_users else split.test
    learn_users, val_users = validation_split(split.train, train.validation_users, seed=train.split_seed)
    eval_env = make_candidate_env(config, dataset, test_users)
    curve_protocol = EvalProtocol(
        users=test_users[: train.eval_curve_users], seed=train.split_seed, swapped=False, n_boot=train.n_bootstrap
    )
    _say(
        f"{dataset.name}, {config.user.model} users: {len(learn_users)} training users"
        + (f" (+ {len(val_users)} validation users)" if len(val_users) else "")
        + f", {len(test_users)} held-out users; seeds {train.seeds}; steps per seed: {learner_steps_text(config)}"
    )

    def curve_eval(model: Any) -> np.ndarray:
        return run_sessions(model, eval_env, curve_protocol).returns.mean(axis=1)

    select = _selection(config, dataset, val_users, eval_env.retriever)
    kept: dict[str, list[int]] = {}
    examples = held = None  # the training (and validation) users' real logs, built once for bc and bc_ppo

    recommenders: dict[str, Any] = {}
    oracles = OracleRows()
    curves: dict[str, list[list[tuple[int, np.ndarray]]]] = {}
    timing: dict[str, float] = {}
    for name in train.compare:
        tick = time.perf_counter()
        if name == "random":
            recommenders[name] = RandomCandidates(eval_env, seed=train.seeds[0])
        elif name == "popularity":
            recommenders[name] = PopularCandidates(eval_env)
        elif name == "quality":
            recommenders[name] = QualityCandidates(eval_env)
        elif name == "mf":
            recommenders[name] = MFCandidates(eval_env)
        elif name == "itemknn":
            recommenders[name] = ItemKNNCandidates(eval_env)
        elif name == "latent":
            recommenders[name] = HistoryLatentCandidates()
        elif name in ORACLES:
            oracles.add(name, eval_env, train)
            recommenders.update(oracles.rows)  # the fallback's heuristic row takes the rollout oracle's place
            if oracles.fallback is not None and name == "oracle_rollout":
                _say(f"no rollout oracle: {oracles.fallback}; the ratio is to the heuristic oracle")
        elif name == "bandit":
            recommenders[name] = [
                train_bandit(
                    make_candidate_env(config, dataset, learn_users, retriever=eval_env.retriever),
                    steps=learner_steps(config, name),
                    seed=seed,
                    alpha=train.bandit_alpha,
                )
                for seed in train.seeds
            ]
        else:
            models = []
            for seed in train.seeds:
                _say(f"training {name}, seed {seed}")
                selector = select()
                curve = HeldOutEval(
                    curve_eval,
                    eval_every=train.eval_every or learner_steps(config, name),
                    output_dir=out / f"{name}_{seed}",
                    also=None if selector is None else selector.offer,
                )
                if name == "slateq":
                    model = _train_slateq(config, dataset, learn_users, seed, curve, eval_env.retriever)
                elif name in CLONED:
                    if examples is None:
                        features = history_item_features(eval_env)  # as the real side: counted on the history
                        examples = cloning_examples(config, dataset, learn_users, features, seed=train.split_seed)
                        # the clone is kept by the pages of the negatives the real column uses (with uniform ones
                        # popularity alone finds the future: a clone that learned it scored 0.97 on both samplers)
                        held = cloning_examples(config, dataset, val_users, features, seed=train.split_seed + 1,
                                                samplers=(config.evaluation.sim2real_negatives,)) \
                            if len(val_users) else None  # fmt: skip
                    model = train_cloned(name, config, dataset, learn_users, seed, curve, eval_env.retriever,
                                         examples, learner_steps(config, name), say=_say, validation=held)  # fmt: skip
                else:
                    retriever = eval_env.retriever
                    model = train_item_scoring(name, config, dataset, learn_users, seed, curve, retriever)
                if selector is not None:
                    model = selector.restore(model)
                    selector.write_csv(out / f"{name}_{seed}" / "validation.csv")
                    kept.setdefault(name, []).append(int(selector.best_step or 0))
                    _say(f"{name} seed {seed}: {selector.summary()}")
                models.append(model)
                curves.setdefault(name, []).append(curve.per_user)
            recommenders[name] = models
        timing[f"train_{name}_s"] = time.perf_counter() - tick
    protocol = EvalProtocol(
        users=test_users,
        sessions_per_user=train.eval_sessions_per_user,
        seed=train.split_seed,
        n_boot=train.n_bootstrap,
        swapped=train.eval_swapped,
        encoding_keys=ENCODING_KEYS,
        repeats=train.eval_repeats,
    )
    tick = time.perf_counter()
    oracle = oracles.reference
    per_user = {} if per_user is None else per_user  # the oracles' paired difference reads it
    results = evaluate_recommenders(recommenders, eval_env, protocol, oracle=oracle, progress=_say,
                                    per_user_out=per_user)  # fmt: skip
    timing["evaluate_s"] = time.perf_counter() - tick
    hits: dict[str, dict[str, np.ndarray]] = {}
    if train.real_metric:
        tick = time.perf_counter()
        results = _with_real_metric(results, recommenders, config, dataset, test_users, eval_env, out, hits)
        timing["real_metric_s"] = time.perf_counter() - tick
    timing["total_s"] = time.perf_counter() - started
    learned = [n for n in recommenders if n in LEARNERS]
    title = (
        f"RecAgent-v1, {dataset.name}, {config.user.model} users: {len(test_users)} held-out users x "
        f"{protocol.sessions_per_user} session(s)"
        + (f", each played {protocol.repeats} times from the same start" if protocol.repeats > 1 else "")
        + f"; learners: {learner_steps_text(config)} steps x seeds {train.seeds}"
    )
    summary = summary_line([r for r in results if r.recommender not in ORACLES], learned=learned)
    summary += f" {oracles.note(train, per_user)}" if oracle else ""
    baselines = [n for n in recommenders if n not in (*LEARNERS, *ORACLES)]
    summary += " " + headroom_line(per_user, learned, baselines, oracle, train.n_bootstrap) if learned else ""
    best_sim = max(learned, key=lambda n: float(per_user[n].mean())) if learned else None
    summary += "".join(" " + line for line in real_transfer_lines(hits, learned, train.n_bootstrap, best_sim))
    if kept:
        window = train.selection_window
        summary += (
            f" Learners kept at their best validation point ({len(val_users)} training users set aside, never "
            f"trained on, their first session played {train.validation_repeats} time(s); `train.validation_users`"
            + (f"; each point scored with its neighbours, {window} points" if window > 1 else "")
            + "), steps per seed: "
            + "; ".join(f"{n} {', '.join(map(str, steps))}" for n, steps in kept.items())
            + "."
        )
    if any(not np.isnan(r.real_hit) for r in results):
        summary += (
            " Real hit rate (sim2real): the share of a recommender's pages that hold one of the same held-out "
            "users' real future items (their last items by time among never-seen negatives, "
            f"{config.evaluation.sim2real_negatives}, every model fitted on the history before them), the real users "
            "replayed (`evaluate agreement`'s real side); the oracles have none (they read the simulated users' "
            "hidden state). Real swapped drop: the real hit rate lost when the recommender reads another held-out "
            "user's encoding, paired over users."
        )
    pooled = _write_curves(curves, out, train.n_bootstrap)
    curve_lines = [f"learning curve {name} (held-out return on {len(curve_protocol.users)} curve users, seeds pooled "
                   "per user; step: mean [95% CI]): " + ", ".join(f"{s}: {i}" for s, i in points)
                   for name, points in pooled.items()]  # fmt: skip
    walls = ", ".join(f"{k.removesuffix('_s')} {v:.0f}" for k, v in timing.items())
    summary += "".join(f"\n\n- {line}" for line in curve_lines) + f"\n\nWall time (s, all seeds): {walls}."
    write_results(results, out, title, summary, oracle=oracle)
    (out / "timing.json").write_text(json.dumps(timing, indent=2), encoding="utf-8")
    _say(title)
    _say(markdown_table(results, oracle=oracle))
    _say(summary)
    _say(f"total {timing['total_s']:.0f}s; written to {out}")
    return results


def _with_real_metric(
    results: list[PolicyMetrics], recommenders: dict[str, Any], config: Config, dataset: Dataset,
    users: np.ndarray, eval_env: RecAgentCandidateEnv, out: Path, hits: dict[str, dict[str, np.ndarray]],
) -> list[PolicyMetrics]:  # fmt: skip
    """Each row's real offline metric on the held-out users (sim2real), the learners as trained: the table's
    column with ``evaluation.sim2real_negatives``, and ``hits[sampler][row]`` (per-user real hit rates) with both
    samplers."""
    from recagent_gym.runs.evaluation.agreement.sim2real import attach, real_metrics

    _say(f"real side: every recommender on the real future items of {len(users)} held-out users")
    ready = {n: r if isinstance(r, list) else [r] for n, r in recommenders.items()
             if n in (*LEARNERS, *OBSERVATION_BASELINES)}  # fmt: skip
    table = config.evaluation.sim2real_negatives
    attached = results
    rows: list[list[Any]] = []
    for sampler in (table, *(s for s in ("popularity-matched", "uniform") if s != table)):
        cfg = config.model_copy(deep=True)
        cfg.evaluation.sim2real_negatives = sampler  # type: ignore[assignment]
        real = real_metrics(cfg, dataset, users, baselines={n: n for n in REAL_BASELINES if n in recommenders},
                            ready=ready, item_features=history_item_features(eval_env),
                            swapped=[n for n in recommenders if n in REAL_SWAPPED] if sampler == table else [],
                            out=out / f"real_{sampler}")  # fmt: skip
        hits[sampler] = {name: metric.per_user for name, metric in real.items()}
        rows.extend([sampler, name, int(user), float(hit)] for name, metric in real.items()
                    for user, hit in zip(metric.users, metric.per_user, strict=True))  # fmt: skip
        if sampler == table:
            attached = attach(results, real)
    with (out / REAL_HITS_FILE).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sampler", "recommender", "user", "hit"])
        writer.writerows(rows)
    return attached


REAL_HITS_FILE = "real_hits.csv"
"""Each held-out user's real hit rate per sampler and row (``evaluate sim2real`` pairs simulators on it)."""


def _train_slateq(
    config: Config, dataset: Dataset, users: np.ndarray, seed: int, curve: HeldOutEval, retriever: Any
) -> Any:
    train = config.train
    env = make_candidate_env(config, dataset, users, retriever=retriever)
    steps = learner_steps(config, "slateq")
    every = train.eval_every or steps

    def callback(agent: Any, step: int) -> None:
        if step == 1 or step % every == 0 or step == steps:
            point = step if step > 1 else 0
            curve.per_user.append((point, curve.evaluate(agent)))
            if curve.also is not None:
                curve.also(agent, point)
        if step % max(steps // 4, 1) == 0:
            _say(f"slateq seed {seed}: step {step}/{steps}")

    return train_slateq(
        env,
        steps=steps,
        seed=seed,
        gamma=train.gamma,
        n_step=train.slateq_n_step,
        train_every=train.slateq_train_every,
        callback=callback,
    )


def _selection(
    config: Config, dataset: Dataset, users: np.ndarray, retriever: Any
) -> Callable[[], BestOnValidation | None]:
    """A fresh :class:`BestOnValidation` per learner and seed over ``users`` (None without validation users)."""
    if not len(users):
        return lambda: None
    env = make_candidate_env(config, dataset, users, retriever=retriever)
    train = config.train
    protocol = EvalProtocol(users=users, seed=train.split_seed, swapped=False, repeats=train.validation_repeats)

    def evaluate(model: Any) -> np.ndarray:
        return run_sessions(model, env, protocol).returns.mean(axis=1)

    return lambda: BestOnValidation(evaluate, len(users), window=train.selection_window)


def learner_steps_text(config: Config) -> str:
    """Each learner's training steps per seed, e.g. ``ppo 150000, bc_ppo 1000000`` (``bc``: 0, it only clones)."""
    learners = [n for n in config.train.compare if n in LEARNERS]
    return ", ".join(f"{n} {0 if n == 'bc' else learner_steps(config, n)}" for n in learners) or "none"


def _write_curves(
    curves: dict[str, list[list[tuple[int, np.ndarray]]]], out: Path, n_boot: int
) -> dict[str, list[tuple[int, Interval]]]:
    """Pool seeds per user at each evaluation step (steps every seed reached), bootstrap, write CSV and plot."""
    pooled: dict[str, list[tuple[int, Interval]]] = {}
    rows = []
    for name, seeds in curves.items():
        steps = sorted(set.intersection(*(set(s for s, _ in runs) for runs in seeds))) if seeds else []
        points = []
        for step in steps:
            per_user = np.mean([dict(runs)[step] for runs in seeds], axis=0)
            interval = bootstrap_mean(per_user, n_boot=n_boot, seed=step)
            points.append((step, interval))
            rows.append([name, step, interval.mean, interval.low, interval.high, interval.n, len(seeds)])
        pooled[name] = points
    with (out / "learning_curves.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["recommender", "step", "mean_return", "ci_low", "ci_high", "n_users", "seeds"])
        writer.writerows(rows)
    title = "held-out return during training (seeds pooled per user)\ndashed: validation users; stars: the points kept"
    write_curve_plot(pooled, out / "learning_curves.png", title, validation=validation_curves(out, list(curves)))
    return pooled

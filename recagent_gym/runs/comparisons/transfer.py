"""``recagent-gym users transfer``: train a policy on the distilled users (minutes), evaluate it on held-out LLM users.

1. **Train** PPO (``train.*`` of the config) on the distilled users of the training split (``train.split_seed``),
   one policy per seed: on RecAgent-v0 through ``train.action``, or with ``train.transfer_env: v1`` (the
   quickstart's) the item-scoring PPO on RecAgent-v1's candidates (:mod:`.transfer_v1`), where the baselines choose
   among the same candidates.
2. **Evaluate** the trained policy and the baselines (random, popularity, MF; on RecAgent-v1 also quality-greedy,
   the candidates' observed quality column with no user information) on the same held-out users, with the
   LLM users (the target) and with the distilled users (where the policy was trained: the transfer gap). The
   held-out users are the policy split's test users that the distilled model was not fitted on either.
3. **Report**: per recommender and user model the mean session return with a 95% bootstrap interval over users
   (:func:`~recagent_gym.runs.metrics.summarize`),
   and the policy's paired difference with every baseline on the
   same users (:func:`~recagent_gym.runs.metrics.paired_difference`): ``transfer.md``, ``transfer.csv``,
   ``transfer.png``.
"""

from __future__ import annotations

import csv
import logging
import math
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import catalogue_env
from recagent_gym.runs.metrics import Estimate, paired_difference, summarize
from recagent_gym.users.distilled.saved_model import Artefact
from recagent_gym.users.distilled.user import BUNDLED_DIR
from recagent_gym.users.prior_default import (
    configured_llm_name,
    keep_weights,
    prior_note,
    resolve_prior,
)

logger = logging.getLogger(__name__)

POLICY = "ppo (distilled-trained)"
REAL_NOTE = (
    "Real hit rate (sim2real): the share of a recommender's pages that hold one of the same held-out users' real "
    "future items (their last items by time, in pools of the policy's K candidates with {negatives} negatives; "
    "every model fitted on the history before them), the real users replayed (`evaluate agreement`'s real side): "
    "their watches per page. The same in every user model's rows."
    "\n\n"
)
BASELINES = ("random", "popularity", "mf")
"""The catalogue-wide baselines of the RecAgent-v0 transfer (row name = recommender name)."""
BASELINES_V1 = {"random": "random", "popularity": "popularity", "quality-greedy": "quality", "mf": "mf"}
"""RecAgent-v1's baselines among the candidates, row name -> name in the agreement zoo (the real side)."""


@dataclass(frozen=True)
class TransferRow:
    """One line of ``transfer.csv``: a recommender on one user model (``diff_*``: policy minus this row, paired)."""

    users: str
    recommender: str
    mean_return: float
    ci_low: float
    ci_high: float
    n_users: int
    sessions: int
    seeds: int
    diff: float
    diff_low: float
    diff_high: float
    fallbacks: int
    seconds: float
    real_hit: float = math.nan
    """The recommender's real offline metric (hit@k per page against the users' real future items, the agreement
    test's real side) on the same held-out users; NaN on RecAgent-v0."""
    real_ci_low: float = math.nan
    real_ci_high: float = math.nan
    real_diff: float = math.nan
    """The policy's real hit rate minus this row's, paired over the same held-out users (``real_diff_*``: its 95%
    interval); NaN for the policy's own row and on RecAgent-v0."""
    real_diff_low: float = math.nan
    real_diff_high: float = math.nan


def held_out_users(dataset: Dataset, config: Config, n_users: int) -> np.ndarray:
    """The first ``n_users`` of the policy split's held-out users that neither the distilled model nor the LLM
    agents' behavioural prior (``user.prior_weights``) was fitted on."""
    from recagent_gym.runs.policies.protocol import split_users

    split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed)
    meta = Artefact.load(config.user.distilled_path or BUNDLED_DIR).meta
    fitted = set(meta.get("train_users", []))
    users = [u for u in split.test.tolist() if u not in fitted]
    prior = resolve_prior(config.user, dataset, configured_llm_name(config.llm)).prior_weights
    if prior is not None and users:  # nor the LLM agents' behavioural prior
        from recagent_gym.runs.evaluation.prior_ablation import without_calibration_users

        users = without_calibration_users(dataset, users, prior)
    users = np.array(users, dtype=np.int64)
    return users[:n_users] if n_users else users


def train_on_distilled(
    config: Config, dataset: Dataset, out: Path, seeds: Sequence[int], *, progress: bool
) -> list[Path]:
    """One PPO policy per seed on the distilled users of the training split; their ``policy.zip`` paths."""
    from recagent_gym.runs.policies.training import train_policy

    paths = []
    for seed in seeds:
        cfg = config.model_copy(deep=True)
        cfg.user.model = "distilled"
        cfg.train.seed = int(seed)
        result = train_policy(cfg, dataset=dataset, output_dir=out / f"policy-seed{seed}", progress_bar=progress)
        logger.info("seed %d: %d steps on distilled users in %.0fs", seed, result.timesteps, result.seconds)
        paths.append(result.policy_path)
    return paths


def _per_user(recommenders: list[Any], env: Any, protocol: Any) -> tuple[np.ndarray, int, int]:
    """Per-user mean return (seeds pooled), sessions run and user-model fallbacks."""
    from recagent_gym.runs.policies.evaluate_policies import run_sessions

    runs = [run_sessions(r, env, protocol) for r in recommenders]
    per_user = np.mean([r.returns.mean(axis=1) for r in runs], axis=0)
    return per_user, sum(r.returns.size for r in runs), sum(r.fallbacks for r in runs)


def _v0_arena(config: Config, dataset: Dataset, policies: Sequence[Path], user_model: str) -> tuple[Any, dict]:
    """RecAgent-v0 with ``user_model`` users, the catalogue-wide baselines and the trained v0 policies."""
    from recagent_gym.recommenders.factory import build_recommender
    from recagent_gym.runs.policies.evaluate_policies import PolicyRecommender

    cfg = config.model_copy(deep=True)
    cfg.user.model = user_model  # type: ignore[assignment]
    env = catalogue_env(dataset, user_model, config=cfg)
    seed = cfg.train.seed
    candidates: dict[str, list[Any]] = {
        name: [build_recommender(name, dataset, cfg.recommender, env.page_size, seed)] for name in BASELINES
    }
    candidates[POLICY] = [PolicyRecommender.load(p, env) for p in policies]
    return env, candidates


def check_policies(policies: Sequence[Path], transfer_env: str) -> None:
    """Each given policy's ``policy.json`` (trained on this transfer's env) and zip, before anything is built; the
    spaces are checked against the env where it is loaded."""
    from recagent_gym.runs.policies.policy_files import PolicyError, check_policy, read_meta, trained_env

    expected = "RecAgent-v1" if transfer_env == "v1" else "RecAgent-v0"
    for path in policies:
        trained = trained_env(read_meta(path))
        if trained != expected:
            other = "v0" if transfer_env == "v1" else "v1"
            raise PolicyError(
                f"{path}: trained on {trained}, but this transfer runs {expected} (train.transfer_env={transfer_env});"
                f" give a policy trained on {expected}, or set train.transfer_env={other}"
            )
        check_policy(path)  # loaded once: a damaged network fails before anything is built or written


def evaluate_on(
    user_model: str,
    config: Config,
    dataset: Dataset,
    policies: Sequence[Path],
    users: np.ndarray,
    *,
    bootstrap: int,
    say: Callable[[str], None],
    shared: Any = None,
) -> list[TransferRow]:
    """Baselines and the trained policy on ``users`` with ``user_model`` users; one row per recommender
    (``shared``: the v1 transfer's :class:`~recagent_gym.runs.make_env.SharedCandidates`, else RecAgent-v0)."""
    from recagent_gym.runs.policies.evaluate_policies import EvalProtocol

    seed = config.train.seed
    if shared is None:
        env, candidates = _v0_arena(config, dataset, policies, user_model)
    else:
        from recagent_gym.runs.comparisons.transfer_v1 import recommenders_v1

        env = shared.make_env(config, dataset, users, user_model)
        named = recommenders_v1(env, policies, seed)
        candidates = {**{name: named[name] for name in BASELINES_V1}, POLICY: named["policy"]}
    protocol = EvalProtocol(
        users=users, sessions_per_user=config.train.eval_sessions_per_user, seed=seed, swapped=False
    )
    measured: dict[str, tuple[np.ndarray, int, int, float]] = {}
    for name, recs in candidates.items():
        say(f"{user_model} users: {name} on {len(users)} held-out users")
        start = time.perf_counter()
        per_user, sessions, fallbacks = _per_user(recs, env, protocol)
        measured[name] = (per_user, sessions, fallbacks, time.perf_counter() - start)
    cache = getattr(env.user_model, "score_cache", None)
    if cache is not None:  # the LLM users meet each held-out user again, in the same state, per recommender
        say(f"{user_model} users: item score cache {cache.stats()}")
    if shared is None or env is not shared.env:
        env.close()
    policy_returns = measured[POLICY][0]
    rows = []
    for k, (name, (per_user, sessions, fallbacks, seconds)) in enumerate(measured.items()):
        est = summarize(per_user, np.random.default_rng(seed + k), bootstrap=bootstrap)
        if name == POLICY:
            diff = Estimate(math.nan, math.nan, math.nan, math.nan, 0)
        else:
            rng = np.random.default_rng(seed + 100 + k)
            diff = paired_difference(policy_returns, per_user, rng, bootstrap=bootstrap)
        rows.append(
            TransferRow(user_model, name, est.mean, est.low, est.high, est.n, sessions, len(candidates[name]),
                        diff.mean, diff.low, diff.high, fallbacks, seconds)
        )  # fmt: skip
    return rows


def with_real_metric(
    rows: list[TransferRow], config: Config, dataset: Dataset, users: np.ndarray, policies: Sequence[Path],
    shared: Any, out: Path, say: Callable[[str], None],
) -> list[TransferRow]:  # fmt: skip
    """``rows`` with each recommender's real offline metric (:mod:`recagent_gym.runs.evaluation.agreement.sim2real`)."""
    from recagent_gym.runs.evaluation.agreement.sim2real import attach, real_metrics

    say(f"real side: {', '.join([*BASELINES_V1, POLICY])} on the real future items of {len(users)} held-out users")
    real = real_metrics(config, dataset, users, baselines=BASELINES_V1,
                        policies={POLICY: list(policies)}, item_features=shared.item_features, out=out)  # fmt: skip
    return with_real_differences(attach(rows, real), real, seed=config.train.seed)


def with_real_differences(rows: Sequence[TransferRow], real: Mapping[str, Any], seed: int) -> list[TransferRow]:
    """``rows`` with the policy's real hit rate minus each baseline's, paired over the same users (the real side
    measures every recommender on the same users and pools, so the per-user values pair)."""
    from dataclasses import replace

    if POLICY not in real:
        return list(rows)
    policy = real[POLICY].per_user
    diffs = {}
    for k, (name, metric) in enumerate(real.items()):
        if name != POLICY and len(metric.per_user) == len(policy):
            diffs[name] = paired_difference(policy, metric.per_user, np.random.default_rng(seed + 200 + k))
    return [replace(r, real_diff=d.mean, real_diff_low=d.low, real_diff_high=d.high)
            if (d := diffs.get(r.recommender)) is not None else r for r in rows]  # fmt: skip


def _read_intervals(named: Sequence[tuple[str, float, float]], phrases: tuple[str, str, str]) -> str:
    """``subject + phrase`` per group of ``(name, low, high)`` paired intervals: above 0, below 0, spanning 0
    (``phrases`` hold ``{}`` for the names)."""
    above = [n for n, low, _ in named if low > 0]
    below = [n for n, _, high in named if high < 0]
    tied = [n for n, _, _ in named if n not in above + below]
    words: list[str] = []
    for group, phrase in zip((above, below, tied), phrases, strict=True):
        if group:
            words.append(("and " if words else "") + phrase.format(", ".join(group)))
    return " ".join(words)


def verdict(rows: Sequence[TransferRow], user_model: str | None = None) -> str:
    """What the rows show about the policy on ``user_model`` users (default: the last evaluated, the LLM users in
    the default order), read off the paired intervals."""
    user_model = user_model or (rows[-1].users if rows else "llm")
    part = [r for r in rows if r.users == user_model and r.recommender != POLICY]
    if not part or any(math.isnan(r.diff_low) for r in part):
        return "Too few users for intervals: the run shows the pipeline, not which recommender is better."
    who = user_model.upper() if user_model == "llm" else user_model
    reading = _read_intervals(
        [(r.recommender, r.diff_low, r.diff_high) for r in part],
        ("beats {} (paired 95% interval of the difference above 0)", "is beaten by {} (interval below 0)",
         "is not separable from {} (interval spans 0)"),
    )  # fmt: skip
    return f"On {part[0].n_users} held-out {who} users the distilled-trained policy {reading}."


def real_verdict(rows: Sequence[TransferRow]) -> str:
    """What the paired real-hit differences show (the same in every user model's rows: read the first model's)."""
    first = rows[0].users if rows else ""
    part = [r for r in rows if r.users == first and not math.isnan(r.real_diff)]
    if not part:
        return ""
    reading = _read_intervals(
        [(r.recommender, r.real_diff_low, r.real_diff_high) for r in part],
        ("hold one more often than {}'s (paired 95% interval above 0)", "less often than {}'s (interval below 0)",
         "are not separable from {}'s (interval spans 0)"),
    )  # fmt: skip
    return f"On the real users' future items the policy's pages {reading}.\n\n"


def ranking(rows: Sequence[TransferRow], reference: str = "llm") -> str:
    """Recommenders by mean return per user model (best first), whether the order is the ``reference`` users',
    and the Spearman correlation of the mean returns with theirs (the surrogate's fidelity for choosing policies)."""
    from recagent_gym.runs.distill.fit import spearman

    models = list(dict.fromkeys(r.users for r in rows))
    means = {m: {r.recommender: r.mean_return for r in rows if r.users == m} for m in models}
    order = {m: sorted(means[m], key=lambda name: -means[m][name]) for m in models}
    lines = ["| users | ranking (best first) | same as " + reference + " | Spearman with " + reference + " |",
             "|---|---|---|---|"]  # fmt: skip
    for m in models:
        same, rho = "", ""
        if reference in means and m != reference:
            names = list(means[reference])
            same = "yes" if order[m] == order[reference] else "no"
            value = spearman(
                np.array([means[m].get(n, math.nan) for n in names]), np.array([means[reference][n] for n in names])
            )
            rho = "" if math.isnan(value) else f"{value:+.2f}"
        lines.append(f"| {m} | {' > '.join(order[m])} | {same} | {rho} |")
    return "\n".join(lines)


def write_report(rows: Sequence[TransferRow], out: Path, title: str, *, negatives: str = "uniform") -> dict[str, Path]:
    """``transfer.md``, ``transfer.csv`` and ``transfer.png`` (return per recommender and user model, 95% CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "transfer.md", "csv": out / "transfer.csv", "plot": out / "transfer.png"}
    with paths["csv"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(TransferRow.__dataclass_fields__))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in asdict(row).items()})
    verdicts = "\n\n".join(verdict(rows, m) for m in dict.fromkeys(r.users for r in rows))
    real = REAL_NOTE.format(negatives=negatives) if any(not math.isnan(r.real_hit) for r in rows) else ""
    real += real_verdict(rows)
    text = f"# {title}\n\n{markdown(rows)}\n\n{real}{verdicts}\n\nRanking of the recommenders:\n\n{ranking(rows)}\n"
    paths["markdown"].write_text(text, encoding="utf-8")
    models = list(dict.fromkeys(r.users for r in rows))
    recs = list(dict.fromkeys(r.recommender for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(len(models), 1)
    for k, model in enumerate(models):
        part = {r.recommender: r for r in rows if r.users == model}
        means = np.array([part[c].mean_return for c in recs])
        lows, highs = np.array([part[c].ci_low for c in recs]), np.array([part[c].ci_high for c in recs])
        err = np.nan_to_num(np.vstack([means - lows, highs - means]))
        ax.bar(np.arange(len(recs)) + k * width, means, width, yerr=err, capsize=3, label=f"{model} users")
    ax.set_xticks(np.arange(len(recs)) + 0.4 - width / 2, recs, fontsize=9)
    ax.set_ylabel("mean session return (95% CI over users)")
    ax.set_title(textwrap.fill(title, 110), fontsize=9)  # the title names users, env and steps: wrap it
    ax.legend()
    fig.tight_layout()
    fig.savefig(paths["plot"], dpi=100)
    plt.close(fig)
    return paths


def markdown(rows: Sequence[TransferRow]) -> str:
    header = ["users", "recommender", "return [95% CI]", "policy - this [paired 95% CI]",
              "real hit rate [95% CI]", "policy - this, real hit [paired 95% CI]", "users (n)", "sessions", "seeds",
              "fallbacks", "seconds"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        diff = "" if math.isnan(r.diff) else f"{r.diff:+.3f} [{r.diff_low:+.3f}, {r.diff_high:+.3f}]"
        real = "" if math.isnan(r.real_hit) else f"{r.real_hit:.3f} [{r.real_ci_low:.3f}, {r.real_ci_high:.3f}]"
        real_diff = (
            "" if math.isnan(r.real_diff) else f"{r.real_diff:+.3f} [{r.real_diff_low:+.3f}, {r.real_diff_high:+.3f}]"
        )
        cells = [r.users, r.recommender, f"{r.mean_return:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]", diff, real,
                 real_diff, str(r.n_users), str(r.sessions), str(r.seeds), str(r.fallbacks),
                 f"{r.seconds:.0f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_transfer(
    config: Config,
    out: str | Path,
    *,
    n_users: int,
    seeds: Sequence[int],
    user_models: Sequence[str] = ("distilled", "llm"),
    bootstrap: int = 2000,
    progress: bool = True,
    say: Callable[[str], None] = print,
    dataset: Dataset | None = None,
    policies: Sequence[Path] = (),
) -> list[TransferRow]:
    """Train on distilled users (or take ``policies`` already trained), evaluate on ``user_models`` (the LLM users
    last: the slow part); write the report."""
    from recagent_gym.envs.resolve import resolve_dataset

    out = Path(out)
    check_policies(policies, config.train.transfer_env)
    dataset = resolve_dataset(dataset, config)
    users = held_out_users(dataset, config, n_users)
    if len(users) == 0:
        raise ValueError("users transfer: no held-out user left (the distilled model or the prior was fitted on all)")
    shared = None
    if config.train.transfer_env == "v1":
        from recagent_gym.runs.comparisons.transfer_v1 import load_v1, train_v1
        from recagent_gym.runs.make_env import SharedCandidates
        from recagent_gym.runs.policies.protocol import split_users

        shared = SharedCandidates(config, dataset, users)
        for path in policies:  # each given policy's spaces checked before anything runs or is written
            load_v1(path, shared.env)
    if "llm" in user_models and keep_weights(config, dataset, out) is not None:  # written once the policies load
        say(f"LLM users: {prior_note(config, dataset)} (copied to {out / 'prior.json'})")
    if not policies:
        start = time.perf_counter()
        if shared is None:
            policies = train_on_distilled(config, dataset, out, seeds, progress=progress)
        else:
            split = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed)
            policies = train_v1(config, dataset, out, seeds, shared, split.train, say)
        say(f"trained {len(policies)} policy(ies) on distilled users in {time.perf_counter() - start:.0f}s")
    rows: list[TransferRow] = []
    for model in user_models:
        rows += evaluate_on(model, config, dataset, policies, users, bootstrap=bootstrap, say=say, shared=shared)
    if shared is not None:
        rows = with_real_metric(rows, config, dataset, users, policies, shared, out, say)
    from recagent_gym.runs.policies.evaluate_policies import load_meta

    steps = "/".join(str(load_meta(p).get("timesteps", "?")) for p in policies)
    trained_on = "/".join(sorted({str(load_meta(p).get("user_model", "?")) for p in policies}))
    env_name = "RecAgent-v1 (candidates)" if shared is not None else "RecAgent-v0"
    title = (
        f"{dataset.name}, {env_name}: {len(policies)} PPO policy(ies) trained {steps} steps on {trained_on} users, "
        f"evaluated on {len(users)} held-out users"
        + (f"; LLM users: {prior_note(config, dataset)}" if "llm" in user_models else "")
    )
    write_report(rows, out, title, negatives=config.evaluation.sim2real_negatives)
    return rows

"""The held-out evaluation of an RLlib run: ``evaluate policies``' protocol, table and files, with the trained
RLModule as one more recommender (:class:`~recagent_gym.runs.rllib.policy.RLlibPolicy` answers SB3's ``predict``).

The env is the raw catalogue env over the whole dataset, the users the held-out side of the fixed split (the first
``train.eval_users``, 0: all), each for ``train.eval_sessions_per_user`` sessions from their restored starting
state; the baselines are those of ``evaluate policies`` (built the same way). The files are ``policies.md``,
``.csv`` and ``.png`` in ``<run>/evaluation``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from recagent_gym.runs.config import Config
from recagent_gym.runs.rllib.policy import RLlibPolicy

BASELINES: tuple[str, ...] = ("random", "popularity")
"""The baselines the run is reported against (``evaluate policies --recommenders``; MF's fit is left out here)."""


def evaluate_run(
    config: Config,
    run_dir: Path,
    checkpoint: Path,
    *,
    name: str = "ppo_rllib",
    baselines: Sequence[str] = BASELINES,
    progress: Callable[[str], None] | None = print,
) -> dict[str, Path]:
    """Evaluate the run's policy and ``baselines`` on held-out users; write and print the report."""
    from recagent_gym.recommenders.factory import build_recommender
    from recagent_gym.runs.make_env import catalogue_env
    from recagent_gym.runs.policies.evaluate_policies import EvalProtocol, evaluate_recommenders
    from recagent_gym.runs.policies.protocol import split_users
    from recagent_gym.runs.policies.results_table import markdown_table, summary_line, write_results

    train = config.train
    env = catalogue_env(config.data.dataset, config.user.model, config=config)
    recommenders = {
        b: build_recommender(b, env.dataset, config.recommender, env.page_size, train.seed) for b in baselines
    }
    recommenders[name] = RLlibPolicy.load(checkpoint, env, train.action)
    split = split_users(env.dataset.n_users, test_fraction=train.test_fraction, seed=train.split_seed)
    users = split.test[: train.eval_users] if train.eval_users else split.test
    protocol = EvalProtocol(users=users, sessions_per_user=train.eval_sessions_per_user, seed=train.seed,
                            n_boot=train.n_bootstrap, swapped=train.eval_swapped)  # fmt: skip
    results = evaluate_recommenders(recommenders, env, protocol, progress=progress)
    title = (
        f"{env.dataset.name}, {config.user.model} users: {len(users)} held-out users x "
        f"{protocol.sessions_per_user} session(s), eval seed {train.seed}; {name} trained on RLlib"
    )
    summary = summary_line(results, learned=[name])
    paths = write_results(results, run_dir / "evaluation", title, summary)
    env.close()
    if progress is not None:
        progress(title)
        progress(markdown_table(results))
        progress(summary)
        progress("written: " + ", ".join(str(p) for p in paths.values()))
    return paths

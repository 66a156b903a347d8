"""Configuration of RL training (stable-baselines3)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from recagent_gym.settings_section import Section


class TrainConfig(Section):
    algorithm: Literal["ppo", "a2c", "dqn"] = "ppo"
    """stable-baselines3 algorithm."""

    total_timesteps: int = Field(20_000, ge=1)
    """Environment steps to train for."""

    n_envs: int = Field(4, ge=1)
    """Parallel sub-environments."""

    learning_rate: float = Field(3e-4, gt=0.0)
    """Optimiser learning rate."""

    n_steps: int = Field(128, ge=1)
    """Rollout length per sub-environment (PPO/A2C)."""

    batch_size: int = Field(64, ge=1)
    """Minibatch size (PPO/DQN)."""

    torch_threads: int = Field(1, ge=1)
    """Torch threads; the policy networks here are small, where one thread is fastest."""

    seed: int = Field(0, ge=0)
    """Seed of training."""

    action: Literal["score", "genre", "page"] = "score"
    """Action wrapper the policy acts through: ``score`` (a query vector over item features, top-k by score),
    ``genre`` (one discrete genre per page; needed by DQN), or ``page`` (the raw MultiDiscrete page)."""

    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    """Share of users held out from training (a fixed split seeded by ``split_seed``); evaluation uses only them."""

    split_seed: int = 0
    """Seed of the train / held-out split of users (kept apart from ``seed`` so every training seed shares it)."""

    eval_users: int = Field(0, ge=0)
    """Held-out users evaluated by ``evaluate policies`` (the first N of the split, uniformly); 0 means all."""

    eval_sessions_per_user: int = Field(1, ge=1)
    """Sessions per held-out user, from the users' restored starting state."""

    eval_repeats: int = Field(1, ge=1)
    """RL comparison: times each held-out user's sessions are played again from the same restored start with other
    seeds, every recommender alike; a user's return is the mean (less noise per user, the same users)."""

    eval_swapped: bool = True
    """Run the personalisation check (every policy again with another user's encoding swapped in)."""

    n_bootstrap: int = Field(2000, ge=100)
    """Bootstrap resamples over users for the 95% intervals."""

    log_every: int = Field(1, ge=1)
    """Print a progress line (steps, episodes, mean episode return) every N rollouts / updates (and at least every
    ``log_every_s`` seconds)."""

    log_every_s: float = Field(30.0, ge=0.0)
    """Also print the progress line when this many seconds passed without one (slow LLM steps); 0 turns it off."""

    eval_every: int = Field(0, ge=0)
    """Evaluate on held-out users every N environment steps during training (learning curve); 0 turns it off."""

    eval_curve_users: int = Field(20, ge=1)
    """Held-out users per learning-curve point (one session each)."""

    validation_users: int = Field(0, ge=0)
    """RL comparison: training users set aside for model selection (the learners never train on them). When > 0,
    every ``eval_every`` steps PPO/A2C and SlateQ are evaluated on them (one session each, from their restored state)
    and each seed's learner is kept at the step with the best mean validation return (the held-out users choose
    nothing); 0 keeps the last step."""

    validation_repeats: int = Field(1, ge=1)
    """Times each validation user's first session is played at every selection point, each from the user's
    restored starting state with its own seed (the same seeds at every point). The held-out users are scored on first
    sessions, so these are repeats of that session, not later sessions; more repeats make a point's validation return
    less noisy, so the best point is less often the luckiest one."""

    selection_window: int = Field(1, ge=1)
    """The learner is kept at the point whose validation return averaged with its neighbours (this many points,
    centred on it; odd) is the best: 1 keeps the single best point, 5 a point in a stretch that is good throughout."""

    # -- the RL comparison on RecAgent-v1 (``recagent-gym evaluate rl-comparison``) --------------------------------

    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    """Training seeds of every learned policy in the comparison (one row per policy, seeds pooled per user)."""

    compare: list[str] = Field(
        default_factory=lambda: [
            "random",
            "popularity",
            "quality",
            "mf",
            "itemknn",
            "bandit",
            "slateq",
            "ppo",
            "oracle",
            "oracle_rollout",
        ]
    )
    """Recommenders of the comparison: random, popularity, quality (the candidates' observed quality column: no
    user information), mf, itemknn (item-kNN on the co-watches with the observed user's history), bandit (LinUCB),
    slateq, ppo, a2c, oracle (the heuristic oracle: ``oracle_values``),
    oracle_rollout (rollouts over the heuristic oracle; the ``/ oracle`` ratio's reference where present)."""

    real_metric: bool = True
    """Report each recommender's real offline metric beside its simulated return: hit@k per page against the
    held-out users' real future items (``evaluate agreement``'s real side); a few seconds."""

    learner_timesteps: dict[str, int] = Field(default_factory=dict)
    """Env steps per seed for named learners of the comparison (e.g. ``{ppo: 15000}``: PPO's cheap updates need
    more samples than SlateQ's); a learner not named trains for ``total_timesteps``."""

    n_candidates: int = Field(50, ge=1)
    """Candidates per step of RecAgent-v1 (the retrieval stage's K)."""

    candidate_mix: dict[str, float] | None = None
    """Shares of RecAgent-v1's retrieval sources (``envs/candidates.py``; default its documented mix), e.g.
    ``{random: 1.0}`` for RecSim's uniformly sampled candidates."""

    transfer_env: Literal["v0", "v1"] = "v0"
    """``users transfer``: train and evaluate on RecAgent-v0 through ``action``, or on RecAgent-v1 with the
    item-scoring PPO and the baselines choosing among the same candidates."""

    gamma: float = Field(0.9, gt=0.0, le=1.0)
    """Discount of PPO/A2C/SlateQ in the comparison (sessions are a few pages long)."""

    bandit_alpha: float = Field(0.5, ge=0.0)
    """LinUCB exploration bonus while training (evaluation is greedy)."""

    slateq_n_step: int = Field(1, ge=1)
    """SlateQ's n-step return (1: the paper's one-step TD; longer: budget effects reach the item sooner)."""

    slateq_train_every: int = Field(4, ge=1)
    """SlateQ: one gradient step every N env steps (as DQN's ``train_freq``)."""

    ppo_epochs: int = Field(10, ge=1)
    """PPO's passes over each rollout (SB3's ``n_epochs``) in the RL comparison (``ppo`` and ``bc_ppo``): the update
    is PPO's cost, the env is cheap."""

    bc_epochs: int = Field(20, ge=1)
    """``bc`` / ``bc_ppo``: epochs of behaviour cloning on the training users' real logs
    (:mod:`recagent_gym.runs.comparisons.cloning`)."""

    bc_learning_rate: float = Field(1e-3, gt=0.0)
    """``bc`` / ``bc_ppo``: Adam's learning rate for the cloning."""

    bc_kl_beta: float = Field(0.1, ge=0.0)
    """``bc_ppo``: weight of ``KL(pi || pi_bc)`` (first slot) in PPO's loss; 0 is PPO started from the clone."""

    latent_prior: float = Field(0.0, ge=0.0)
    """``ppo``, ``a2c``, ``bc``, ``bc_ppo`` on RecAgent-v1: starting weight of the item-scoring policy's latent prior
    (:mod:`recagent_gym.policies.item_scoring`: the candidates' item vectors against the observed history's mean, the
    ``latent`` baseline's ranking, standardised, added to each score with a trained weight); 0: no prior."""

    oracle_minute_value: float = Field(0.2, ge=0.0)
    """Reward the oracle row prices one minute of the RecSim user's time budget at (``RecSimUser.oracle_values``;
    0 ranks by appeal alone, the myopic oracle). 0.2 was the best of 0.1-0.3 on ``rl_recsim`` (training users)."""

    oracle_rollouts: int = Field(8, ge=1)
    """The rollout oracle (``oracle_rollout`` in ``compare``, :mod:`recagent_gym.policies.rollout_oracle`): simulated
    rests of the session per candidate page and decision, with common random numbers across the pages."""

    oracle_rollout_pages: int = Field(4, ge=1, le=6)
    """Candidate pages the rollout oracle compares at each decision (the first N of ``PAGE_KINDS``: the heuristic
    oracle's page, the same at twice the minute value, the quality-greedy page, a mix; then the top-appeal page and
    the heuristic at half the minute value); 1 is the heuristic oracle itself. Cost per decision: pages x rollouts
    x remaining pages (about 0.5 s per session of ``rl_recsim`` at 4 x 8 on a shared 2-core machine)."""

    checkpoint_every: int = Field(10_000, ge=1)
    """Save the policy every N environment steps."""

    output_dir: str = "runs"
    """Folder receiving TensorBoard logs, checkpoints, the dumped config and evaluation tables."""

    @field_validator("selection_window")
    @classmethod
    def _centred_window(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError(f"must be odd: the window is centred on the point it scores ({value} is even)")
        return value

"""What an agent does with free time (recommender, social media, nothing): the agent's behaviour policy.

The model's option log-likelihoods (``prompts/take_action.py``) are calibrated against the same prompt with a
content-free profile (summed log-likelihoods favour short, frequent phrases such as " do nothing" whoever the agent
is; only the difference says something about this agent), then combined with priors from the behaviour features
(Watchers favour the recommender, Chatters and Posters the social media; activity makes doing nothing less likely)
and sampled with the seeded generator: ``p ∝ prior * softmax(scores - baseline)``. A backend without scores
contributes its pick with weight 0.9 (0.05 to each other option). Fallback (invalid answer after one re-ask), and
the simulator's ``action_choice: prior``: the prior alone; counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recagent_gym.llm.protocol import Choice
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.prompts import take_action as contract
from recagent_gym.prompts.checked import choose_checked
from recagent_gym.prompts.take_action import ACTIONS, OPTIONS
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.clock import clock_text


def choose_actions(
    agents: Agents, user_ids: Sequence[int], rng: np.random.Generator, time_h: float, *, use_llm: bool = True
) -> list[str]:
    """``recommender`` / ``social`` / ``nothing`` for each user: one batched ``choose`` (plus the content-free
    calibration prompt) sampled with the behaviour priors; the priors alone without ``use_llm``."""
    if not user_ids:
        return []
    if not use_llm:
        return [sample_action(None, prior_of(agents, u), rng) for u in user_ids]
    clock = clock_text(time_h)
    prompts = [
        contract.build(
            profile=agents.profile_text(u, "take_action"),
            memory=agents.memory_block(u, "what to do in free time", time_h),
            name=agents.profiles[u].name,
            clock=clock,
        )
        for u in user_ids
    ]
    prompts.append(contract.build_baseline(clock))
    options = [OPTIONS] * len(prompts)
    checked = choose_checked(agents.llm, prompts, options, lambda c: c, seed=int(rng.integers(0, SEED_HIGH)))
    baseline = checked.pop().value
    choices = []
    for u, answer in zip(user_ids, checked, strict=True):
        agent = agents.agent(u)
        agent.usage = agent.usage + answer.usage
        agent.count("take_action", reasked=answer.reasked, fallback=answer.value is None)
        choices.append(sample_action(answer.value, prior_of(agents, u), rng, baseline))
    return choices


def prior_of(agents: Agents, user_id: int) -> np.ndarray:
    profile = agents.profiles[user_id]
    return priors(profile.features, profile.activity)


def priors(features: Sequence[str], activity: float) -> np.ndarray:
    """Prior probability of each action from behaviour features and activity in [0, 1]."""
    weights = np.array([1.0, 1.0, 1.5 - float(np.clip(activity, 0.0, 1.0))])
    if "Watcher" in features:
        weights[0] += 1.0
    if "Explorer" in features:
        weights[0] += 0.5
    if "Chatter" in features:
        weights[1] += 1.0
    if "Poster" in features:
        weights[1] += 1.0
    return weights / weights.sum()


def _usable(choice: Choice | None) -> bool:
    return (
        choice is not None
        and choice.scores is not None
        and len(choice.scores) == len(OPTIONS)
        and bool(np.all(np.isfinite(choice.scores)))
    )


def model_probabilities(choice: Choice | None, baseline: Choice | None = None) -> np.ndarray:
    """The model's distribution over :data:`OPTIONS`, calibrated by ``baseline``'s scores when both have scores
    (uniform when there is no valid answer)."""
    n = len(OPTIONS)
    if choice is None:
        return np.full(n, 1.0 / n)
    if choice.scores is None or len(choice.scores) != n or not np.all(np.isfinite(choice.scores)):
        probs = np.full(n, 0.05)
        probs[choice.index] = 0.9
        return probs / probs.sum()
    logits = np.asarray(choice.scores, dtype=float)
    if _usable(baseline):
        logits = logits - np.asarray(baseline.scores, dtype=float)  # type: ignore[union-attr]
    logits = np.exp(logits - logits.max())
    return logits / logits.sum()


def sample_action(
    choice: Choice | None, prior: np.ndarray, rng: np.random.Generator, baseline: Choice | None = None
) -> str:
    """Sample one of :data:`ACTIONS` from ``prior * model`` (calibrated by ``baseline``) with ``rng``."""
    probs = prior * model_probabilities(choice, baseline)
    probs = probs / probs.sum()
    return ACTIONS[int(rng.choice(len(ACTIONS), p=probs))]

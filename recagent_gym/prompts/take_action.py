"""Contract of ``templates/take_action.txt``: what an agent does with free time (recommender, social, nothing).

The options (:data:`OPTIONS`, named :data:`ACTIONS`) and the content-free prompt that calibrates every agent's
option scores (:func:`build_baseline`). How the scores become a choice (behaviour priors, sampling, fallback) is
the agent's behaviour policy: :mod:`recagent_gym.users.agent.take_action`.
"""

from __future__ import annotations

from recagent_gym.prompts.template import load_template

OPTIONS: tuple[str, ...] = (" enter the recommender", " enter the social media", " do nothing")
ACTIONS: tuple[str, ...] = ("recommender", "social", "nothing")


CONTENT_FREE = "N/A"


def build(*, profile: str, memory: str, name: str, clock: str) -> str:
    return load_template("take_action").render(profile=profile, memory=memory, name=name, clock=clock)


def build_baseline(clock: str) -> str:
    """The content-free prompt whose option scores calibrate every agent's (see the module docstring)."""
    return build(profile=CONTENT_FREE, memory="", name=CONTENT_FREE, clock=clock)

"""A trained RLlib RLModule behind SB3's ``predict``, so that the evaluation of every other recommender serves it.

The observation goes through the same ``FlattenObservations`` connector piece the env runners used while training
(same space, same removed keys), the module's ``forward_inference`` gives the action distribution's inputs, the
deterministic action is the distribution's mode (the Gaussian's mean, the categorical's argmax), and RLlib's own
``unsquash_action`` maps it into the action space as the env runners' module-to-env pipeline does. The action then
goes through the same page adapter as in training (``train.action``) to become a page of the raw env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from recagent_gym.envs.wrappers import page_adapter
from recagent_gym.runs.rllib.env import observation_keys_to_remove, require_ray

MODULE_PATH = ("learner_group", "learner", "rl_module", "default_policy")
"""Where an RLlib algorithm checkpoint keeps the default RLModule (``COMPONENT_LEARNER_GROUP/...``)."""


def flatten_connector(observation_space: gym.Space, action_space: gym.Space) -> Any:
    """RLlib's env-to-module ``FlattenObservations`` over the keys the SB3 path reads (raw ids removed)."""
    from ray.rllib.connectors.env_to_module import FlattenObservations

    if not isinstance(observation_space, gym.spaces.Dict):
        raise TypeError(f"the RLlib path wants a Dict observation space, got {observation_space}")
    return FlattenObservations(
        observation_space, action_space, keys_to_remove=observation_keys_to_remove(observation_space)
    )


class RLlibPolicy:
    """``predict(obs, state=None, episode_start=None, deterministic=True) -> (page, state)`` on the raw env."""

    def __init__(self, module: Any, env: Any, action: str, observation_space: gym.spaces.Dict) -> None:
        require_ray()
        import torch

        self.module, self.env = module, env
        self.adapter = page_adapter(action, env.unwrapped)
        self.action_space = env.action_space if self.adapter is None else self.adapter.space
        self.connector = flatten_connector(observation_space, self.action_space)
        self._torch = torch

    @classmethod
    def load(cls, checkpoint: str | Path, env: Any, action: str) -> RLlibPolicy:
        """The RLModule of an algorithm checkpoint (``algo.save()``'s folder), acting on ``env``."""
        require_ray()
        from ray.rllib.core.rl_module.rl_module import RLModule

        module = RLModule.from_checkpoint(str(Path(checkpoint, *MODULE_PATH)))
        return cls(module, env, action, env.observation_space)

    def flat(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """The observation as the module saw it in training (the connector's own flattening)."""
        from ray.rllib.env.single_agent_episode import SingleAgentEpisode

        episode = SingleAgentEpisode(observations=[observation], len_lookback_buffer=0)
        self.connector(rl_module=None, batch={}, episodes=[episode], explore=False, shared_data={})
        return np.asarray(episode.get_observations(0), dtype=np.float32)

    def act(self, observation: dict[str, np.ndarray], deterministic: bool = True) -> np.ndarray:
        """The action in ``train.action``'s space (a query vector, a genre, a page)."""
        from ray.rllib.core.columns import Columns
        from ray.rllib.utils.spaces.space_utils import unsquash_action

        torch = self._torch
        batch = {Columns.OBS: torch.from_numpy(self.flat(observation)[None])}
        with torch.no_grad():
            out = self.module.forward_inference(batch)
            dist = self.module.get_inference_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
            action = (dist.to_deterministic() if deterministic else dist).sample()[0].numpy()
        return np.asarray(unsquash_action(action, self.action_space))

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]:
        action = self.act(observation, deterministic)
        page = action if self.adapter is None else self.adapter.to_page(action, self.env.unwrapped.seen_mask)
        return np.asarray(page, dtype=np.int64), state

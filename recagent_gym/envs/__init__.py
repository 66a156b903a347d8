"""The Gymnasium environments: one recommender session per episode, the recommender being the policy.

``import recagent_gym`` registers ``recagent_gym/RecAgent-v0``::

    env = gymnasium.make("recagent_gym/RecAgent-v0", dataset="bundled", user_model="recsim")
    venv = gymnasium.make_vec("recagent_gym/RecAgent-v0", num_envs=4, dataset="bundled", user_model="recsim")

``make_vec`` builds the batched :class:`~recagent_gym.envs.vector.RecAgentVectorEnv` (``vector_entry_point``): the
sub-envs' users answer in one batch and share the social round.
"""

from gymnasium.envs.registration import register, registry

from recagent_gym.envs.config import DEFAULT_MAX_EPISODE_STEPS

ENV_ID = "recagent_gym/RecAgent-v0"

if ENV_ID not in registry:
    register(
        id=ENV_ID,
        entry_point="recagent_gym.envs.recagent_env:RecAgentEnv",
        vector_entry_point="recagent_gym.envs.vector:RecAgentVectorEnv",
        max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
    )

__all__ = ["DEFAULT_MAX_EPISODE_STEPS", "ENV_ID"]

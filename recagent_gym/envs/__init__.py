"""The Gymnasium environments: one recommender session per episode, the recommender being the policy.

``import recagent_gym`` registers two environments (:mod:`recagent_gym.runs.env_registration`; their entry
points, in :mod:`recagent_gym.runs.make_env`, build them from a configuration), under names that are not versions
of each other:

* ``recagent_gym/RecAgentCatalogue-v0`` (:class:`~recagent_gym.envs.recagent_env.RecAgentEnv`): each step the
  policy shows a page of items from the whole catalogue;
* ``recagent_gym/RecAgentCandidates-v0`` (:class:`~recagent_gym.envs.candidate_slate_env.RecAgentCandidateEnv`): each
  step the policy picks the page among K retrieved candidates, described as item features.

::

    env = gymnasium.make("recagent_gym/RecAgentCatalogue-v0", dataset="bundled", user_model="recsim")
    venv = gymnasium.make_vec("recagent_gym/RecAgentCatalogue-v0", num_envs=4, dataset="bundled", user_model="recsim")

``make_vec`` builds the batched vector env of each (``vector_entry_point``):
:class:`~recagent_gym.envs.vector.RecAgentVectorEnv` and
:class:`~recagent_gym.envs.candidate_slate_vector.RecAgentCandidateVectorEnv`; the sub-envs' users answer in one batch
and share the social round.

The earlier ids ``recagent_gym/RecAgent-v0`` and ``recagent_gym/RecAgent-v1`` still work (:mod:`.ids`), with a
one-time ``DeprecationWarning`` naming the new id: as two versions of one name, Gymnasium warned on every ``make``
of v0 that it was out of date, although v1 is a different environment, not its successor.
"""

from recagent_gym.envs.config import DEFAULT_MAX_EPISODE_STEPS
from recagent_gym.envs.ids import CANDIDATES_ENV_ID, CATALOGUE_ENV_ID

ENV_ID = CATALOGUE_ENV_ID
"""The catalogue env, the package's first environment."""

__all__ = ["CANDIDATES_ENV_ID", "CATALOGUE_ENV_ID", "DEFAULT_MAX_EPISODE_STEPS", "ENV_ID"]

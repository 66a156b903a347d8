"""The Gymnasium environments: one recommender session per episode, the recommender being the policy.

``import recagent_gym`` registers two environments, under names that are not versions of each other:

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

from gymnasium.envs.registration import register, registry

from recagent_gym.envs.config import DEFAULT_MAX_EPISODE_STEPS
from recagent_gym.envs.ids import CANDIDATES_ENV_ID, CATALOGUE_ENV_ID, ENTRY_POINTS, RENAMED, old_entry_points

ENV_ID = CATALOGUE_ENV_ID
"""The catalogue env, the package's first environment."""

for _id, (_entry, _vector) in ENTRY_POINTS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, vector_entry_point=_vector, max_episode_steps=DEFAULT_MAX_EPISODE_STEPS)

for _old in RENAMED:
    if _old not in registry:
        _entry_point, _vector_point = old_entry_points(_old)
        register(
            id=_old,
            entry_point=_entry_point,
            vector_entry_point=_vector_point,
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        )
# Not a later version of RecAgent-v0 for Gymnasium's "is out of date, upgrade to v1" check on every make of v0
# (``find_highest_version`` reads ``spec.version``): the two old ids name different environments. Set after both are
# registered (registration refuses a versioned id beside an unversioned one); ``make`` finds a spec by its id.
registry["recagent_gym/RecAgent-v1"].version = None

__all__ = ["CANDIDATES_ENV_ID", "CATALOGUE_ENV_ID", "DEFAULT_MAX_EPISODE_STEPS", "ENV_ID"]

"""Training on Ray RLlib (``recagent-gym train --engine rllib``): the project's envs as they are, registered with
Ray's env registry, PPO on RLlib's current API stack (RLModule, Learner, ConnectorV2, EnvRunner), then the held-out
evaluation and report of ``evaluate policies``.

Ray is an optional extra (``pip install 'recagent-gym[ray]'``); nothing here imports it at module level, so the
package works without it and :func:`~recagent_gym.runs.rllib.env.require_ray` names the extra when it is missing.
"""
